"""``tinyhil farm certs``: a private CA for a lab and one certificate per host, for the farm's mutual TLS.

Files in the directory (keys ``0600``, certificates ``0644``, the directory ``0700`` when made here):

| file | what |
|---|---|
| ``ca.pem`` / ``ca.key`` | the lab's CA certificate and its key (keep the key off the farm hosts) |
| ``HOST.pem`` / ``HOST.key`` | a host's certificate and key: ``--tls-cert`` and ``--tls-key`` on that host |

Every host certificate names the host (a DNS name, or an IP address given as one) and ``localhost``, ``127.0.0.1``
and ``::1`` as subject alternative names, and serves as both TLS server and client (each farm process is both).
Keys are ECDSA P-256. An existing CA in the directory signs the new hosts' certificates; an existing file is never
overwritten unless ``force`` (then the CA is made anew too, so every host needs its certificate again).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tinyhil.device_farm.cluster.security import check_host_name
from tinyhil.errors import InvalidArgument

__all__ = ["CA_CERT", "CA_KEY", "DEFAULT_DAYS", "LabCerts", "host_files", "make_certs"]

CA_CERT: Final = "ca.pem"
CA_KEY: Final = "ca.key"
DEFAULT_DAYS: Final = 825
KEY_MODE: Final = 0o600
CERT_MODE: Final = 0o644
DIR_MODE: Final = 0o700
_CLOCK_SKEW: Final = datetime.timedelta(minutes=5)  # a host whose clock is a little behind still accepts the cert
_LOOPBACK_SANS: Final[tuple[x509.GeneralName, ...]] = (
    x509.DNSName("localhost"),
    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    x509.IPAddress(ipaddress.ip_address("::1")),
)


@dataclass(frozen=True, slots=True)
class LabCerts:
    """What :func:`make_certs` wrote: the CA certificate, whether it was made now, and each host's (cert, key)."""

    ca: Path
    new_ca: bool
    hosts: dict[str, tuple[Path, Path]]


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _check_host(host: str) -> str:
    if _address(host) is None:
        try:
            check_host_name(host)
        except ValueError:
            raise InvalidArgument(f"--host {host!r}: expected a host name (letters, digits, '-', '.') or an IP address"
                                  ) from None  # fmt: skip
    if host in ("ca", "localhost"):
        raise InvalidArgument(f"--host {host}: that name is taken by the CA's files or by loopback; name the host")
    return host


def host_files(directory: Path, host: str) -> tuple[Path, Path]:
    """The certificate and key files of ``host`` in ``directory``."""
    return directory / f"{host}.pem", directory / f"{host}.key"


def _write(path: Path, data: bytes, mode: int, force: bool) -> None:
    """Write ``data`` to a new file ``path`` with exactly ``mode`` (an existing one is replaced only when ``force``;
    it is unlinked first, so a symlink there is never followed)."""
    if force and (path.is_symlink() or path.exists()):
        path.unlink()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(descriptor, "wb") as file:
        os.fchmod(file.fileno(), mode)  # the umask may have narrowed it; a certificate must be readable
        file.write(data)


def _key_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())  # fmt: skip


def _builder(subject: str, issuer: x509.Name, public: ec.EllipticCurvePublicKey, now: datetime.datetime,
             days: int) -> x509.CertificateBuilder:  # fmt: skip
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer).public_key(public).serial_number(x509.random_serial_number())
            .not_valid_before(now - _CLOCK_SKEW).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False))  # fmt: skip


def _make_ca(now: datetime.datetime, days: int) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tinyhil farm CA")])
    usage = x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                          encipher_only=False, decipher_only=False)  # fmt: skip
    cert = (_builder("tinyhil farm CA", name, key.public_key(), now, days)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(usage, critical=True).sign(key, hashes.SHA256()))  # fmt: skip
    return cert, key


def _make_host(host: str, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, now: datetime.datetime,
               days: int) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    address = _address(host)
    own: x509.GeneralName = x509.IPAddress(address) if address is not None else x509.DNSName(host)
    names = [own, *(san for san in _LOOPBACK_SANS if san != own)]
    usage = x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
                          encipher_only=False, decipher_only=False)  # fmt: skip
    issuer_key = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (_builder(host, ca.subject, key.public_key(), now, days)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(usage, critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(issuer_key), critical=False)
            .sign(ca_key, hashes.SHA256()))  # fmt: skip
    return cert, key


def _load_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate((directory / CA_CERT).read_bytes())
    key = serialization.load_pem_private_key((directory / CA_KEY).read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise InvalidArgument(f"{directory / CA_KEY}: not an EC key, expected the CA key tinyhil farm certs makes")
    return cert, key


def make_certs(directory: Path, hosts: Sequence[str], *, force: bool = False, days: int = DEFAULT_DAYS,
               clock: Callable[[], datetime.datetime] | None = None) -> LabCerts:  # fmt: skip
    """Make (or reuse) the lab's CA in ``directory`` and a certificate for each of ``hosts``.

    Raises:
        InvalidArgument: no host, a bad host name, ``days`` < 1, half a CA in ``directory``, or a file that exists
            (without ``force``): nothing is written then; or ``directory`` cannot be made or written.
    """
    if not hosts:
        raise InvalidArgument("no --host: name each host that needs a certificate, e.g. --host lab-1")
    if type(days) is not int or days < 1:
        raise InvalidArgument(f"--days {days!r}, expected an integer >= 1")
    wanted = list(dict.fromkeys(_check_host(h) for h in hosts))
    has_ca = [(directory / name).exists() for name in (CA_CERT, CA_KEY)]
    reuse = all(has_ca) and not force
    if any(has_ca) and not all(has_ca) and not force:
        raise InvalidArgument(f"{directory}: has only one of {CA_CERT} and {CA_KEY}; pass --force to make a new CA")
    targets = [p for h in wanted for p in host_files(directory, h)] + ([] if reuse else [directory / CA_CERT,
                                                                                    directory / CA_KEY])  # fmt: skip
    existing = [str(p) for p in targets if p.exists() or p.is_symlink()]
    if existing and not force:
        raise InvalidArgument(f"{', '.join(existing)} already exist{'s' * (len(existing) == 1)}; pass --force to "
                              "replace them")  # fmt: skip
    now = (clock or (lambda: datetime.datetime.now(datetime.UTC)))()
    try:
        directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        return _write_all(directory, wanted, reuse=reuse, force=force, now=now, days=days)
    except OSError as exc:
        raise InvalidArgument(f"{exc.filename or directory}: cannot write there ({exc.strerror or exc})") from None


def _write_all(directory: Path, hosts: Sequence[str], *, reuse: bool, force: bool, now: datetime.datetime,
               days: int) -> LabCerts:  # fmt: skip
    if reuse:
        ca, ca_key = _load_ca(directory)
    else:
        ca, ca_key = _make_ca(now, days)
        _write(directory / CA_KEY, _key_bytes(ca_key), KEY_MODE, force)
        _write(directory / CA_CERT, ca.public_bytes(serialization.Encoding.PEM), CERT_MODE, force)
    made: dict[str, tuple[Path, Path]] = {}
    for host in hosts:
        cert, key = _make_host(host, ca, ca_key, now, days)
        cert_path, key_path = host_files(directory, host)
        _write(key_path, _key_bytes(key), KEY_MODE, force)
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), CERT_MODE, force)
        made[host] = (cert_path, key_path)
    return LabCerts(directory / CA_CERT, not reuse, made)
