"""Ordinary mistakes in a farm address or TLS file are one line, refused before anything is created or connected:
a farm address is ``SCHEME://HOST:PORT`` checked whole (``check_scheme``), and ``FarmTLS`` parses its three PEM files
when it is built. No test here connects anywhere."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.scripts import TINYHIL

from tinyhil.device_farm.cluster.certs import make_certs
from tinyhil.device_farm.cluster.security import FarmTLS, check_scheme
from tinyhil.errors import InvalidArgument


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "tcp://[::1]:1", "tcp://lab-0.example:65535"])
def test_a_whole_address_is_accepted(address: str) -> None:
    assert check_scheme(address, None) == address


@pytest.mark.parametrize(
    ("address", "why"),
    [("tcp://127.0.0.1", "no port"), ("tcp://127.0.0.1:", "no port"), ("tcp://h:0", "a port outside 1..65535"),
     ("tcp://h:65536", "a port outside"), ("tcp://h:http", "no port"), ("tcp://:8786", "no host"),
     ("tcp://::1:8786", "no host"), ("tcp://[::g]:1", "[::g] is no IPv6 address"),
     ("tcp://999.0.0.1:1", "999.0.0.1 is no IPv4 address"), ("tcp://a b:1", "no host"), ("tcp://h/p:1", "no host"),
     ("tcp://-h:1", "no host"), ("tcp://h\x1b[2J:1", "no host")],
)  # fmt: skip
def test_a_bad_host_or_port_is_named_in_one_line(address: str, why: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_scheme(address, None)
    message = str(caught.value)
    assert why in message and "expected tcp://HOST:PORT" in message
    assert "\n" not in message and "\x1b" not in message


def _tinyhil(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run([str(TINYHIL), *argv], capture_output=True, text=True, timeout=120, check=False, env=env,
                          cwd=tmp_path)  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [["farm", "worker", "--scheduler", "tcp://127.0.0.1"],
     ["farm", "run", "--engine", "dask", "--scheduler", "tcp://127.0.0.1", "--report", "r"]],
)  # fmt: skip
def test_an_address_without_a_port_is_a_usage_error_before_anything_is_made(tmp_path: Path, argv: list[str]) -> None:
    done = _tinyhil(tmp_path, *argv, "--state", str(tmp_path / "state"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "--scheduler tcp://127.0.0.1: no port" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"] and not any((tmp_path / "tmp").iterdir())


@pytest.fixture
def lab(tmp_path: Path) -> tuple[Path, Path, Path]:
    made = make_certs(tmp_path / "lab", ["me", "other"])
    return made.ca, *made.hosts["me"]


@pytest.mark.parametrize("bad", ["ca", "cert", "key"])
def test_a_file_that_is_no_pem_is_named_in_one_line(tmp_path: Path, lab: tuple[Path, Path, Path], bad: str) -> None:
    files = dict(zip(("ca", "cert", "key"), lab, strict=True))
    files[bad] = tmp_path / "g.pem"
    files[bad].write_bytes(b"garbage\x1b[2J\n")
    with pytest.raises(InvalidArgument) as caught:
        FarmTLS(**files)
    message = str(caught.value)
    assert message.startswith(f"--tls-{bad} {files[bad].resolve()}: not ") and "in PEM" in message
    assert "\n" not in message


def test_a_key_of_another_certificate_is_refused(tmp_path: Path, lab: tuple[Path, Path, Path]) -> None:
    other_key = tmp_path / "lab" / "other.key"
    with pytest.raises(InvalidArgument, match=r"--tls-key .*other\.key: not the key of the certificate .*me\.pem"):
        FarmTLS(lab[0], lab[1], other_key)


def test_a_key_for_the_certificate_is_accepted(lab: tuple[Path, Path, Path]) -> None:
    assert FarmTLS(*lab).cert == lab[1].resolve()


def test_garbage_tls_files_on_the_command_line_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "g.pem").write_text("garbage\n")
    tls = ["--tls-ca", "g.pem", "--tls-cert", "g.pem", "--tls-key", "g.pem"]
    for argv in (["farm", "worker", "--scheduler", "tls://127.0.0.1:1", *tls],
                 ["farm", "scheduler", *tls]):  # fmt: skip
        done = _tinyhil(tmp_path, *argv)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "--tls-ca" in done.stderr and "g.pem: not a PEM certificate" in done.stderr
