"""``tinyhil farm certs``: a private CA and per-host certificates that chain to it, name their host and loopback, and
whose keys only their owner can read."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

import pytest

pytest.importorskip("cryptography", reason="needs the farm extra (cryptography)")

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from tinyhil.cli import main
from tinyhil.device_farm.cluster.certs import CA_CERT, CA_KEY, host_files, make_certs
from tinyhil.errors import InvalidArgument


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_each_host_certificate_chains_to_the_ca_and_serves_as_tls_server_and_client(tmp_path: Path) -> None:
    made = make_certs(tmp_path / "lab", ["host-a", "10.1.2.3"])
    ca = _cert(made.ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for host in ("host-a", "10.1.2.3"):
        cert_path, key_path = made.hosts[host]
        cert = _cert(cert_path)
        cert.verify_directly_issued_by(ca)  # raises when the signature or the issuer is wrong
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert set(usage) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
        for purpose in (ssl.Purpose.SERVER_AUTH, ssl.Purpose.CLIENT_AUTH):  # the key fits, the CA loads
            context = ssl.create_default_context(purpose, cafile=str(made.ca))
            context.load_cert_chain(str(cert_path), str(key_path))


def test_the_subject_alternative_names_are_the_host_and_loopback(tmp_path: Path) -> None:
    made = make_certs(tmp_path, ["host-a", "10.1.2.3"])

    def names(host: str) -> tuple[set[str], set[str]]:
        sans = _cert(made.hosts[host][0]).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return set(sans.get_values_for_type(x509.DNSName)), {str(a) for a in sans.get_values_for_type(x509.IPAddress)}

    assert names("host-a") == ({"host-a", "localhost"}, {"127.0.0.1", "::1"})
    assert names("10.1.2.3") == ({"localhost"}, {"10.1.2.3", "127.0.0.1", "::1"})


def test_keys_are_0600_certificates_0644_and_a_new_directory_0700(tmp_path: Path) -> None:
    directory = tmp_path / "lab"
    made = make_certs(directory, ["host-a"])
    cert, key = made.hosts["host-a"]
    assert _mode(directory) == 0o700
    assert (_mode(directory / CA_KEY), _mode(key)) == (0o600, 0o600)
    assert (_mode(made.ca), _mode(cert)) == (0o644, 0o644)


def test_existing_files_are_never_overwritten_without_force(tmp_path: Path) -> None:
    make_certs(tmp_path, ["host-a"])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(InvalidArgument, match=r"host-a\.pem, .*host-a\.key already exist; pass --force"):
        make_certs(tmp_path, ["host-b", "host-a"])
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing written, not even host-b
    forced = make_certs(tmp_path, ["host-a"], force=True)
    assert forced.new_ca and (tmp_path / CA_CERT).read_bytes() != before[CA_CERT]
    assert _mode(tmp_path / CA_KEY) == 0o600


def test_an_existing_ca_signs_the_next_hosts(tmp_path: Path) -> None:
    first = make_certs(tmp_path, ["host-a"])
    ca_bytes = first.ca.read_bytes()
    second = make_certs(tmp_path, ["host-b"])
    assert not second.new_ca and first.ca.read_bytes() == ca_bytes
    _cert(second.hosts["host-b"][0]).verify_directly_issued_by(_cert(first.ca))


@pytest.mark.parametrize(
    ("hosts", "message"),
    [
        ([], "no --host"),
        (["../etc/x"], "--host '../etc/x': expected a host name"),
        (["a/b"], "--host 'a/b': expected a host name"),
        (["-x"], "--host '-x': expected a host name"),
        (["lab.-x"], "--host 'lab.-x': expected a host name"),  # the farm addresses' host-name rule, in both places
        (["10.0.0.999"], "--host '10.0.0.999': expected a host name"),
        (["ca"], "--host ca: that name is taken"),
    ],
)
def test_bad_host_names_are_refused_and_nothing_is_written(tmp_path: Path, hosts: list[str], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace(".", r"\.")):
        make_certs(tmp_path / "lab", hosts)
    assert not (tmp_path / "lab").exists()


def test_half_a_ca_is_refused(tmp_path: Path) -> None:
    (tmp_path / CA_CERT).write_text("left over")
    with pytest.raises(InvalidArgument, match=r"has only one of ca\.pem and ca\.key; pass --force"):
        make_certs(tmp_path, ["host-a"])


def test_a_directory_that_is_a_file_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "lab").write_text("not a directory")
    with pytest.raises(InvalidArgument, match="lab: cannot write there"):
        make_certs(tmp_path / "lab", ["host-a"])


def test_the_command_names_the_files_to_pass_each_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["farm", "certs", str(tmp_path), "--host", "host-a", "--days", "30"]) == 0
    cert, key = host_files(tmp_path, "host-a")
    out = capsys.readouterr().out
    assert f"host-a: --tls-ca {tmp_path / CA_CERT} --tls-cert {cert} --tls-key {key}" in out
    validity = _cert(cert).not_valid_after_utc - _cert(cert).not_valid_before_utc
    assert 30 <= validity.days <= 31
    assert main(["farm", "certs", str(tmp_path), "--host", "host-a"]) == 2  # exists: one line, usage error
    assert "already exist; pass --force" in capsys.readouterr().err
