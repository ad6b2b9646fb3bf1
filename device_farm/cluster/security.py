"""The farm's network rule, in one place for the scheduler, the workers and the client of ``tinyhil farm run``.

Dask executes what its peers send (pickled functions: ``run``, ``run_on_scheduler``, every task), so whoever reaches
a farm port runs code as the farm's user. Hence:

- every farm process listens on loopback unless told otherwise (:func:`listen_host`);
- listening anywhere else needs TLS with mutual authentication (:class:`FarmTLS`: the lab's CA, this host's
  certificate and key, the same three for every role, ``require_encryption`` on), or an explicit ``--insecure``
  that warns on every start;
- with TLS every address is ``tls://``, without it ``tcp://`` (:func:`check_scheme`), so a typo never silently
  downgrades a connection.

TLS comes from ``--tls-ca/--tls-cert/--tls-key`` or from the ``[security]`` table of a farm config file
(``--config farm.toml``: keys ``ca``, ``cert``, ``key``, paths relative to the file), never both. docs/farm.md
("Security") says what this protects and what it does not.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tinyhil.errors import InvalidArgument
from tinyhil.loading import Fields, parse_toml, read_capped
from tinyhil.printable import printable

__all__ = [
    "LOOPBACK",
    "FarmTLS",
    "check_host_name",
    "check_scheme",
    "client_config",
    "farm_tls",
    "is_loopback",
    "listen_host",
    "load_farm_config",
]

LOOPBACK: Final = "127.0.0.1"
_LOOPBACK_NAMES: Final = frozenset({"localhost"})
_CONFIG_KEYS: Final = ("ca", "cert", "key")
_ROLES: Final = ("scheduler", "worker", "client")  # Dask's; each farm host uses its one certificate in all three
_PORT_MAX: Final = 0xFFFF
# A host name: dot-separated labels of letters, digits and '-', neither starting nor ending with '-' (RFC 1123).
_LABEL: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_NAME_MAX: Final = 253
_HOW_TO_TLS: Final = ("give --tls-ca, --tls-cert and --tls-key (make them with `tinyhil farm certs DIR --host NAME`) "
                      "or --config FILE with a [security] table")  # fmt: skip


@dataclass(frozen=True, slots=True)
class FarmTLS:
    """Mutual TLS for one host: the lab's CA certificate, this host's certificate and its key (PEM files), each read
    and parsed once here (the ``cryptography`` package of the farm extra), so a wrong file is one line at start, not a
    TLS error inside Dask.

    Raises:
        InvalidArgument: a file is missing, not a regular file, over its size cap, not the PEM it should be (the CA
            and the certificate: X.509 certificates; the key: an unencrypted private key), or the key is not the
            certificate's; the message names the option and the file.
    """

    ca: Path
    cert: Path
    key: Path

    def __post_init__(self) -> None:
        for name in _CONFIG_KEYS:
            path = getattr(self, name)
            if not Path(path).is_file():
                raise InvalidArgument(f"--tls-{name} {path}: no such file, expected a PEM file (tinyhil farm certs)")
            object.__setattr__(self, name, Path(path).resolve())
        _check_pem(self)

    def dask_config(self) -> dict[str, Any]:
        """Dask's config for this host's TLS: the same CA, certificate and key for the scheduler, worker and client
        roles, and encryption required."""
        config: dict[str, Any] = {"distributed.comm.require-encryption": True,
                                  "distributed.comm.tls.ca-file": str(self.ca)}  # fmt: skip
        for role in _ROLES:
            config[f"distributed.comm.tls.{role}.cert"] = str(self.cert)
            config[f"distributed.comm.tls.{role}.key"] = str(self.key)
        return config

    def environment(self) -> dict[str, str]:
        """:meth:`dask_config` as the ``DASK_...`` variables a Dask process reads at start."""
        return {"DASK_" + key.upper().replace(".", "__").replace("-", "_"): str(value)
                for key, value in self.dask_config().items()}  # fmt: skip

    def security(self) -> Any:
        """Dask's ``Security`` for this host in every role, encryption required (needs the farm extra)."""
        from distributed.security import Security

        files = {f"tls_{role}_{part}": str(getattr(self, part)) for role in _ROLES for part in ("cert", "key")}
        make: Any = Security  # untyped
        return make(tls_ca_file=str(self.ca), require_encryption=True, **files)


def _check_pem(tls: FarmTLS) -> None:
    """Parse ``tls``'s three files (see :class:`FarmTLS`); raises InvalidArgument naming the first bad one."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise InvalidArgument("--tls-*: TLS needs the farm extra (pip install 'tinyhil[farm]')") from None

    def refuse(name: str, why: str) -> InvalidArgument:
        what = "a private key" if name == "key" else "an X.509 certificate"
        return InvalidArgument(printable(f"--tls-{name} {getattr(tls, name)}: {why}, expected {what} in PEM "
                                         "(tinyhil farm certs)", newlines=False))  # fmt: skip

    chains: dict[str, list[Any]] = {}
    for name in ("ca", "cert"):
        try:
            chains[name] = x509.load_pem_x509_certificates(read_capped(getattr(tls, name), "tls-pem"))
        except ValueError as exc:  # FileFormatError too (unreadable, over the cap)
            raise refuse(name, f"not a PEM certificate ({_first(exc)})") from None
    try:
        key = serialization.load_pem_private_key(read_capped(tls.key, "tls-pem"), password=None)
    except (ValueError, TypeError) as exc:  # TypeError: an encrypted key, or a key type TLS cannot use
        raise refuse("key", f"not an unencrypted PEM private key ({_first(exc)})") from None
    if chains["cert"][0].public_key() != key.public_key():
        raise refuse("key", f"not the key of the certificate {tls.cert}")


def _first(exc: Exception) -> str:
    lines = str(exc).splitlines()
    return lines[0] if lines else type(exc).__name__


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP address, bracketed or not, or ``localhost``) names this machine's loopback only."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name, or the empty "every interface": not provably loopback


def listen_host(host: str, tls: FarmTLS | None, *, insecure: bool, option: str = "--host") -> str | None:
    """Check that a farm process may listen on ``host``; returns the warning to print on this start, if any.

    Loopback is always allowed; anything else needs ``tls`` or ``insecure`` (which earns the warning).

    Raises:
        InvalidArgument: ``host`` is empty or not loopback and there is neither TLS nor ``insecure``.
    """
    if not host:
        raise InvalidArgument(f"{option} '': expected an address to listen on, such as {LOOPBACK}")
    if is_loopback(host) or tls is not None:
        return None
    if not insecure:
        raise InvalidArgument(f"{option} {host}: listening beyond loopback needs TLS with mutual authentication: "
                              f"{_HOW_TO_TLS}; --insecure listens without TLS (unsafe)")  # fmt: skip
    return (f"WARNING: --insecure: listening on {host} without TLS: anyone who can reach this port can run code "
            f"as user {_user()} on this host")  # fmt: skip


def _user() -> str:
    try:
        return os.getlogin()
    except OSError:
        return str(os.getuid())


def _host_port(rest: str) -> tuple[str, int]:
    """``HOST:PORT`` (what follows a farm address's scheme) split and checked: ``HOST`` an IPv4 address, a bracketed
    IPv6 address or a host name (RFC 1123 labels), ``PORT`` 1..65535. Returns the host (without brackets) and port.

    Raises:
        ValueError: what is wrong, in words (:func:`check_scheme` names the option and the address).
    """
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isascii() or not port.isdigit() or not 0 < int(port) <= _PORT_MAX:
        raise ValueError(f"no port, or a port outside 1..{_PORT_MAX}")
    if host.startswith("[") and host.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(host[1:-1])), int(port)
        except ValueError:
            raise ValueError(f"{host} is no IPv6 address") from None
    return check_host_name(host), int(port)


def check_host_name(host: str) -> str:
    """``host`` if it is an IPv4 address or a host name: dot-separated labels of letters, digits and '-', neither
    starting nor ending with '-' (RFC 1123), at most 253 characters; the one rule for farm host names.

    Raises:
        ValueError: ``host`` is empty, too long, has a bad label, or is all digits and no IPv4 address.
    """
    labels = host.rstrip(".").split(".")
    if not host or len(host) > _NAME_MAX or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError("no host, or a host that is no IPv4 address or host name")
    if all(label.isdigit() for label in labels):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"{host} is no IPv4 address") from None
    return host


def check_scheme(address: str, tls: FarmTLS | None, *, option: str = "--scheduler") -> str:
    """``address`` if it is ``SCHEME://HOST:PORT`` (:func:`_host_port`) with the scheme that fits: ``tls://``
    with TLS, ``tcp://`` without. Nothing is created or connected before this check.

    Raises:
        InvalidArgument: another scheme, one that does not match whether TLS is given, or a bad host or port.
    """
    want = "tls://" if tls is not None else "tcp://"
    shown = printable(address, newlines=False)
    if address.startswith(want):
        try:
            _host_port(address[len(want) :])
        except ValueError as exc:
            raise InvalidArgument(f"{option} {shown}: {exc}, expected {want}HOST:PORT such as {want}{LOOPBACK}:8786"
                                  ) from None  # fmt: skip
        return address
    if tls is None and address.startswith("tls://"):
        raise InvalidArgument(f"{option} {shown}: a tls:// address needs this host's certificate: {_HOW_TO_TLS}")
    raise InvalidArgument(f"{option} {shown}: expected {want}HOST:PORT" + (" (TLS is on)" if tls else ""))


def load_farm_config(path: str | Path) -> FarmTLS:
    """The ``[security]`` table of the farm config at ``path`` (the only table it may hold).

    Raises:
        FileFormatError: the file is unreadable, too large, not TOML, a field is missing or mistyped, or names no
            file.
    """
    document = Fields(parse_toml(read_capped(path, "farm-config"), path), path)
    document.only(["security"])
    table = document.table_of("security")
    assert table is not None  # required: table_of raised otherwise
    table.only(list(_CONFIG_KEYS))
    here = Path(path).resolve().parent
    files = {name: here / str(table.string(name)) for name in _CONFIG_KEYS}
    for name, file in files.items():
        if not file.is_file():
            raise table.error(name, f"{file}: no such file, expected a PEM file (tinyhil farm certs)")
    return FarmTLS(files["ca"], files["cert"], files["key"])


def farm_tls(config: str | None, ca: str | None, cert: str | None, key: str | None) -> FarmTLS | None:
    """The TLS a command asks for: a farm ``config`` file's ``[security]`` table, or the ``ca``, ``cert`` and ``key``
    files all three (``--config``, ``--tls-ca/--tls-cert/--tls-key``), or ``None`` for none.

    Raises:
        InvalidArgument: only some of the three files, or both them and ``config``.
    """
    given = {"ca": ca, "cert": cert, "key": key}
    named = [f"--tls-{name}" for name, value in given.items() if value]
    if config and named:
        raise InvalidArgument(f"--config {config} and {', '.join(named)}: give TLS one way, not both")
    if config:
        return load_farm_config(config)
    if not named:
        return None
    if len(named) != len(given):
        missing = [f"--tls-{name}" for name, value in given.items() if not value]
        raise InvalidArgument(f"{', '.join(named)} without {', '.join(missing)}: TLS needs the CA, the certificate "
                              "and the key")  # fmt: skip
    return FarmTLS(Path(str(ca)), Path(str(cert)), Path(str(key)))


@contextmanager
def client_config(tls: FarmTLS | None) -> Iterator[None]:
    """Dask's config for the clients made inside: ``tls``'s when given, Dask's own otherwise."""
    if tls is None:
        yield
        return
    import dask

    settings: Mapping[str, Any] = tls.dask_config()
    with dask.config.set(settings):
        yield
