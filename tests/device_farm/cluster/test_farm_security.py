"""The farm's network surface: loopback by default, no HTTP unless asked, TLS with mutual authentication anywhere else,
and one line (never a traceback) for a refused address or an unreachable scheduler.

The clusters here are started the documented way (``tinyhil farm scheduler`` and ``tinyhil farm worker`` as
processes, :mod:`tinyhil.device_farm.cluster.loopback`); what they listen on is read from ``/proc/net/tcp{,6}`` for the
sockets their processes (and their children: the nanny's worker) hold.
"""

from __future__ import annotations

import json
import shutil
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import LoopbackCluster, emulated_board, farm_run, listening, loopback_cluster, needs_dask

from tinyhil.cli import main
from tinyhil.device_farm.cluster.certs import make_certs
from tinyhil.device_farm.cluster.security import FarmTLS, check_scheme, is_loopback, listen_host, load_farm_config
from tinyhil.errors import InvalidArgument
from tinyhil.loading import FileFormatError

HOST_A = emulated_board("usb-a", "MOCKUSB+AMD", "host-a")
HOST_B = emulated_board("kfd-b", "MOCKKFD+AMD", "host-b")
LOOPBACKS = {"127.0.0.1", "::1"}

# A small suite with every kind of outcome, run per target.
SUITE = """
import pytest


def test_passes(hil_target):
    assert hil_target


def test_fails(hil_target):
    assert hil_target == "no such target"


def test_skips(hil_target):
    pytest.skip("not on this target")
"""


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def _pem(directory: Path, ca: str, cert: str, key: str) -> None:
    """A lab CA's certificate and one host's certificate and key (``make_certs``), under the names given."""
    lab = make_certs(directory / "lab", ["me"])
    directory.mkdir(parents=True, exist_ok=True)
    for source, name in ((lab.ca, ca), (lab.hosts["me"][0], cert), (lab.hosts["me"][1], key)):
        shutil.copyfile(source, directory / name)


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# --- the rule, as functions ---
@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.5.0.1", True), ("::1", True), ("[::1]", True), ("localhost", True), ("0.0.0.0", False),
     ("::", False), ("", False), ("192.0.2.7", False), ("lab-1", False), ("::ffff:10.0.0.1", False)],
)  # fmt: skip
def test_only_loopback_addresses_count_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_insecure_allows_a_wide_address_with_a_warning_and_tls_allows_it_silently(tmp_path: Path) -> None:
    warning = listen_host("0.0.0.0", None, insecure=True)
    assert warning is not None and warning.startswith("WARNING: --insecure: listening on 0.0.0.0 without TLS")
    assert "can run code" in warning
    _pem(tmp_path, "ca", "cert", "key")
    tls = FarmTLS(tmp_path / "ca", tmp_path / "cert", tmp_path / "key")
    assert listen_host("0.0.0.0", tls, insecure=False) is None
    assert listen_host("127.0.0.1", None, insecure=False) is None


def test_the_address_scheme_must_match_whether_tls_is_on(tmp_path: Path) -> None:
    _pem(tmp_path, "ca", "cert", "key")
    tls = FarmTLS(tmp_path / "ca", tmp_path / "cert", tmp_path / "key")
    assert check_scheme("tls://lab-0:8786", tls) == "tls://lab-0:8786"
    with pytest.raises(InvalidArgument, match=r"--scheduler tcp://lab-0:8786: expected tls://HOST:PORT \(TLS is on\)"):
        check_scheme("tcp://lab-0:8786", tls)
    with pytest.raises(InvalidArgument, match="a tls:// address needs this host's certificate: give --tls-ca"):
        check_scheme("tls://lab-0:8786", None)


def test_the_farm_config_gives_the_security_table_relative_to_itself(tmp_path: Path) -> None:
    _pem(tmp_path / "certs", "ca.pem", "me.pem", "me.key")
    config = tmp_path / "farm.toml"
    config.write_text('[security]\nca = "certs/ca.pem"\ncert = "certs/me.pem"\nkey = "certs/me.key"\n')
    assert load_farm_config(config) == FarmTLS(tmp_path / "certs/ca.pem", tmp_path / "certs/me.pem",
                                               tmp_path / "certs/me.key")  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "security: missing"),
        ('[security]\nca = "ca.pem"\ncert = "me.pem"\n', "security.key: missing"),
        ('[security]\nca = 1\ncert = "me.pem"\nkey = "me.key"\n', "security.ca: "),
        ('[security]\nca = "ca.pem"\ncert = "me.pem"\nkey = "me.key"\nciphers = "x"\n', "security.ciphers"),
        ('[tls]\nca = "ca.pem"\n', "tls"),
        ('[security]\nca = "nowhere.pem"\ncert = "me.pem"\nkey = "me.key"\n', "security.ca: .*nowhere.pem: no such"),
        ("[security\n", "not TOML"),
    ],
)
def test_a_bad_farm_config_is_one_typed_error_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    _pem(tmp_path, "ca.pem", "me.pem", "me.key")
    (tmp_path / "farm.toml").write_text(text)
    with pytest.raises(FileFormatError, match=message):
        load_farm_config(tmp_path / "farm.toml")


# --- the commands: refusals in one line ---
@pytest.mark.parametrize(
    "argv",
    [
        ["farm", "scheduler", "--host", "0.0.0.0"],
        ["farm", "scheduler", "--host", "::"],
        ["farm", "scheduler", "--host", "lab-0.example"],
        ["farm", "worker", "--scheduler", "tcp://127.0.0.1:1", "--host", "0.0.0.0"],
    ],
)
def test_a_wide_address_without_tls_is_refused_in_one_line_that_says_how_to_enable_tls(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"--host {argv[argv.index('--host') + 1]}: listening beyond loopback needs TLS" in line
    assert "--tls-ca, --tls-cert and --tls-key" in line and "tinyhil farm certs" in line and "--insecure" in line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tls-ca", "ca.pem"], "--tls-ca without --tls-cert, --tls-key: TLS needs the CA, the certificate and"),
        (["--config", "farm.toml", "--tls-key", "k"], "--config farm.toml and --tls-key: give TLS one way"),
        (["--tls-ca", "nowhere.pem", "--tls-cert", "c", "--tls-key", "k"], "--tls-ca nowhere.pem: no such file"),
    ],
)
def test_incomplete_tls_options_are_named(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["farm", "scheduler", *argv]) == 2
    assert message in _one_line(capsys.readouterr().err)


def test_tls_on_the_local_engine_and_a_zero_connect_timeout_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _pem(tmp_path, "ca", "cert", "key")
    tls = ["--tls-ca", str(tmp_path / "ca"), "--tls-cert", str(tmp_path / "cert"), "--tls-key", str(tmp_path / "key")]
    assert main(["farm", "run", "--report", str(tmp_path / "r"), *tls]) == 2
    assert "the local engine opens no connection; TLS is for --engine dask" in _one_line(capsys.readouterr().err)
    assert main(["farm", "worker", "--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "0"]) == 2
    assert "--connect-timeout 0, expected seconds > 0" in _one_line(capsys.readouterr().err)


@needs_dask
def test_insecure_warns_on_start(capsys: pytest.CaptureFixture[str]) -> None:
    # (the scheduler does not answer, so the worker stops before it listens: tests never bind beyond loopback)
    argv = ["farm", "worker", "--scheduler", "tcp://127.0.0.1:1", "--host", "0.0.0.0", "--insecure"]
    assert main([*argv, "--connect-timeout", "1"]) == 3
    warning, unreachable = capsys.readouterr().err.strip().splitlines()
    assert warning.startswith("tinyhil farm worker: WARNING: --insecure: listening on 0.0.0.0 without TLS")
    assert unreachable.startswith("tinyhil farm worker: no Dask scheduler answers at tcp://127.0.0.1:1")


@needs_dask
@pytest.mark.parametrize("host", ["127.0.0.1", "unreachable"])
def test_a_worker_whose_scheduler_does_not_answer_exits_3_with_one_line_naming_it_and_the_timeout(
    host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a loopback port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://{host}:{port if host == '127.0.0.1' else 8786}"
    assert main(["farm", "worker", "--scheduler", address, "--connect-timeout", "1"]) == 3
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"tinyhil farm worker: no Dask scheduler answers at {address} within 1 s")


# --- clusters started the documented way ---
@needs_dask
def test_a_loopback_cluster_listens_only_on_loopback_with_no_http_port(tmp_path: Path) -> None:
    with loopback_cluster(tmp_path) as cluster:
        cluster.start_worker("host-a", HOST_A)
        assert cluster.scheduler is not None
        assert listening(cluster.scheduler.pid) == [("127.0.0.1", _port(cluster.address))]  # its comm port alone
        worker = listening(cluster.workers["host-a"].pid)
        assert len(worker) == 2 and {address for address, _ in worker} <= LOOPBACKS  # the nanny and its worker


@needs_dask
def test_the_dashboard_when_asked_for_serves_on_loopback(tmp_path: Path) -> None:
    with loopback_cluster(tmp_path, "--dashboard", "--dashboard-port", "0") as cluster:
        assert cluster.scheduler is not None
        sockets = listening(cluster.scheduler.pid)
        assert len(sockets) == 2 and {address for address, _ in sockets} == {"127.0.0.1"}
        [http_port] = [port for _, port in sockets if port != _port(cluster.address)]
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/json/identity.json", timeout=30) as answer:
            identity = json.load(answer)
        assert identity["type"] == "FarmScheduler" and identity["address"] == cluster.address


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lab's certificates, made by ``tinyhil farm certs``, and a second lab's in ``other/``."""
    directory = tmp_path_factory.mktemp("certs")
    hosts = ["--host", "scheduler", "--host", "host-a", "--host", "host-b", "--host", "client"]
    assert main(["farm", "certs", str(directory / "lab"), *hosts]) == 0
    assert main(["farm", "certs", str(directory / "other"), "--host", "client"]) == 0
    return directory


@pytest.fixture(scope="module")
def tls_cluster(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackCluster]:
    """A scheduler and two workers on loopback, every one with its own certificate from the lab's CA."""
    with loopback_cluster(tmp_path_factory.mktemp("tls-cluster"), certs=certs / "lab") as cluster:
        cluster.start_worker("host-a", HOST_A)
        cluster.start_worker("host-b", HOST_B)
        yield cluster


def _tls(directory: Path, host: str) -> FarmTLS:
    return FarmTLS(directory / "ca.pem", directory / f"{host}.pem", directory / f"{host}.key")


@needs_dask
def test_a_tls_cluster_refuses_a_client_without_the_certificate_or_with_another_cas(
    tls_cluster: LoopbackCluster, certs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tinyhil.device_farm.cluster.dask_cluster import SchedulerUnreachable, reach_scheduler

    address = tls_cluster.address
    assert address.startswith("tls://127.0.0.1:")
    reach_scheduler(address, timeout_s=30, tls=_tls(certs / "lab", "client"))  # the lab's own certificate: in
    plain = address.replace("tls://", "tcp://")
    with pytest.raises(SchedulerUnreachable, match=f"no Dask scheduler answers at {plain}"):
        reach_scheduler(plain, timeout_s=2, tls=None)  # no certificate at all
    with pytest.raises(SchedulerUnreachable, match=f"no Dask scheduler answers at {address}"):
        reach_scheduler(address, timeout_s=2, tls=_tls(certs / "other", "client"))  # signed by another CA
    other = _tls(certs / "other", "client")
    argv = ["--tls-ca", str(other.ca), "--tls-cert", str(other.cert), "--tls-key", str(other.key)]
    assert main(["farm", "worker", "--scheduler", address, "--connect-timeout", "2", *argv]) == 3
    assert _one_line(capsys.readouterr().err).startswith(f"tinyhil farm worker: no Dask scheduler answers at {address}")
    assert main(["farm", "run", "--engine", "dask", "--scheduler", address]) == 2  # a tls:// address needs the cert
    assert "a tls:// address needs this host's certificate" in _one_line(capsys.readouterr().err)
    for process in (tls_cluster.scheduler, *tls_cluster.workers.values()):
        assert process is not None
        assert {address for address, _ in listening(process.pid)} <= LOOPBACKS


@needs_dask
def test_a_run_over_a_tls_cluster_of_two_workers_gives_the_local_engines_outcomes(
    tls_cluster: LoopbackCluster, certs: Path, tmp_path: Path
) -> None:
    suite = tmp_path / "suite" / "test_outcomes.py"
    suite.parent.mkdir()
    suite.write_text(SUITE)
    client = _tls(certs / "lab", "client")
    (tmp_path / "farm.toml").write_text(f'[security]\nca = "{client.ca}"\ncert = "{client.cert}"\n'
                                        f'key = "{client.key}"\n')  # fmt: skip
    dask = farm_run("--engine", "dask", "--scheduler", tls_cluster.address, "--config", str(tmp_path / "farm.toml"),
                    "--suite", str(suite), "--report", str(tmp_path / "dask"), "--state", str(tmp_path / "dask-state"),
                    cwd=tmp_path)  # fmt: skip
    (tmp_path / "both.toml").write_text(HOST_A + HOST_B)
    local = farm_run("--hwmap", str(tmp_path / "both.toml"), "--suite", str(suite), "--report",
                     str(tmp_path / "local"), "--state", str(tmp_path / "local-state"), cwd=tmp_path)  # fmt: skip
    assert (dask.returncode, local.returncode) == (1, 1), dask.stdout + dask.stderr + local.stdout + local.stderr

    def outcomes(run_dir: Path) -> dict[tuple[str, str], str]:
        summary = json.loads((run_dir / "summary.json").read_text())
        return {(r["nodeid"].rsplit("::", 1)[1], r["target"]): r["outcome"] for r in summary["results"]}

    found = outcomes(tmp_path / "dask")
    assert found == outcomes(tmp_path / "local")
    assert {outcome for (test, _), outcome in found.items()} == {"passed", "failed", "skipped"}
    assert {target for _, target in found} == {"MOCKUSB+AMD", "MOCKKFD+AMD"}
    hosts = {r["host"] for r in json.loads((tmp_path / "dask" / "summary.json").read_text())["results"]}
    assert hosts == {"host-a", "host-b"}  # the shards ran on both TLS workers
