"""Board ownership end to end on emulated boards and the local engine: a lease belongs to the board, whatever the
state directory; probes take it; waiting for a busy board is not a fault; a board whose device keeps going away goes
BAD after ``--bad-after`` failures in a row and its work finishes elsewhere."""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from support.cluster import emulated_board, farm_run, loopback_cluster, needs_dask

from tinyhil.cli import main
from tinyhil.device_farm.health import HealthBook, HealthState, LeasedProbe, ProbeResult, read_changes
from tinyhil.device_farm.inventory.hwmap import Board, load_hwmap
from tinyhil.device_farm.journal import read_journal
from tinyhil.device_farm.leases import BoardLock, Holder, acquire

SOLO_MAP = '[[board]]\nid = "solo"\nkind = "emulated"\nemulated = { target = "NULL" }\n'
# Each test logs when it starts and ends on its board, in a file per board that every run appends to.
LOGGED_SUITE = """
import os
import time

import pytest


def _log(what):
    path = os.path.join(os.environ["EVENT_DIR"], os.environ["TINYHIL_BOARD"] + ".log")
    with open(path, "a") as log:
        log.write(f"{os.environ['EVENT_TAG']} {what} {time.time()!r}\\n")


@pytest.mark.parametrize("n", range(int(os.environ.get("EVENT_TESTS", "3"))))
def test_hold_the_board(hil_device, n):
    _log("start")
    time.sleep(float(os.environ.get("EVENT_SLEEP_S", "0.3")))
    _log("end")
"""


def _intervals(log: Path) -> list[tuple[str, float, float]]:
    """(tag, start, end) of every test in a per-board event log, in start order."""
    starts: dict[str, list[float]] = {}
    intervals = []
    for line in log.read_text().splitlines():
        tag, what, when = line.split()
        if what == "start":
            starts.setdefault(tag, []).append(float(when))
        else:
            intervals.append((tag, starts[tag].pop(0), float(when)))
    return sorted(intervals, key=lambda interval: interval[1])


def _files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "hwmap.toml").write_text(SOLO_MAP)
    (tmp_path / "test_logged.py").write_text(LOGGED_SUITE)
    (tmp_path / "events").mkdir()
    return tmp_path / "hwmap.toml", tmp_path / "test_logged.py"


def _farm_run(tmp_path: Path, tag: str, state: str, **env: str) -> subprocess.Popen[str]:
    """``tinyhil farm run`` of the logged suite on the map in ``tmp_path`` (``hwmap.toml``, else ``both.toml``)."""
    if not (tmp_path / "test_logged.py").exists():
        _files(tmp_path)
    hwmap, suite = tmp_path / "hwmap.toml", tmp_path / "test_logged.py"
    hwmap = hwmap if hwmap.exists() else tmp_path / "both.toml"
    command = [
        sys.executable,
        "-m",
        "tinyhil.cli",
        "farm",
        "run",
        "--hwmap",
        str(hwmap),
        "--suite",
        str(suite),
        "--report",
        str(tmp_path / f"run-{tag}"),
        "--state",
        str(tmp_path / state),
        "--workers",
        "1",
    ]
    environment = {**os.environ, "EVENT_DIR": str(tmp_path / "events"), "EVENT_TAG": tag,
                   "TINYHIL_LOCK_DIR": str(tmp_path / "locks"), **env}  # fmt: skip
    return subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_two_runs_with_different_state_directories_never_share_a_board(tmp_path: Path) -> None:
    runs = [_farm_run(tmp_path, tag, f"state-{tag}") for tag in ("a", "b")]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    intervals = _intervals(tmp_path / "events" / "solo.log")
    assert sorted(tag for tag, _, _ in intervals) == ["a"] * 3 + ["b"] * 3
    for (_, _, end), (_, start, _) in itertools.pairwise(intervals):
        assert end <= start  # the next test on the board starts only after the last one ended
    for tag in ("a", "b"):  # neither run charged the other's use of the board to it
        record = HealthBook(load_hwmap(tmp_path / "hwmap.toml").boards, clock=time.time,
                            state_dir=tmp_path / f"state-{tag}").record("solo")  # fmt: skip
        assert (record.state, record.infrastructure_failures) == (HealthState.GOOD, 0)


def test_a_probe_never_overlaps_another_runs_test(tmp_path: Path) -> None:
    run = _farm_run(tmp_path, "a", "state-a", EVENT_TESTS="1", EVENT_SLEEP_S="2")
    log = tmp_path / "events" / "solo.log"
    try:
        while not log.exists():  # run a's test is on the board now
            assert run.poll() is None, run.communicate()[0]
            time.sleep(0.05)
        board = load_hwmap(tmp_path / "hwmap.toml").board("solo")
        probed: list[float] = []
        waits: list[str] = []

        def probe(board: Board) -> ProbeResult:
            probed.append(time.time())
            return ProbeResult(True, "probed")

        leased = LeasedProbe(tmp_path / "locks", "run-b", probe, wait_s=None,
                             on_wait=lambda _board, holders: waits.append(holders))  # fmt: skip
        assert leased(board).ok
    finally:
        output = run.communicate(timeout=300)[0]
    assert run.returncode == 0, output
    [(_, _, end)] = _intervals(log)
    assert len(probed) == 1 and probed[0] >= end  # the probe ran once run a's test was over
    assert len(waits) == 1 and "running " in waits[0] and "test_hold_the_board[NULL-0] since" in waits[0]


@pytest.mark.parametrize("held_s", [3.0])
def test_a_long_holder_makes_the_run_wait_with_no_health_change_and_no_flaky_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held_s: float
) -> None:
    hwmap, suite = _files(tmp_path)
    monkeypatch.setenv("TINYHIL_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("EVENT_DIR", str(tmp_path / "events"))
    monkeypatch.setenv("EVENT_TAG", "b")
    board = load_hwmap(hwmap).board("solo")
    state = tmp_path / "state"
    book = HealthBook((board,), clock=time.time, state_dir=state)
    book.record_probe("solo", ProbeResult(True, "fine"))  # probed: the run's shard is the one that waits
    before = book.record("solo")
    lease = acquire(tmp_path / "locks", BoardLock.of(board), Holder.here("other-run", "test_long", "solo"))
    waiting_since: list[float] = []

    class Output(io.StringIO):
        """The run's output: the holder lets go ``held_s`` after the run says it waits (scaled down from 150 s:
        waiting has no bound, and the unit test of ``acquire`` waits out 150 s on a fake clock)."""

        def write(self, text: str) -> int:
            if "busy" in text and not waiting_since:
                waiting_since.append(time.time())
                threading.Timer(held_s, lease.release).start()
            return super().write(text)

    safety = threading.Timer(120.0, lease.release)  # never a hung test: a run that never waits fails below
    safety.start()
    out = Output()
    args = ["farm", "run", "--hwmap", str(hwmap), "--suite", str(suite), "--report", str(tmp_path / "run"),
            "--state", str(state), "--workers", "1"]  # fmt: skip
    with redirect_stdout(out):
        assert main(args) == 0
    safety.cancel()
    waited = [line for line in out.getvalue().splitlines() if "busy" in line]
    assert len(waited) == 1, out.getvalue()
    assert (
        waited[0].startswith("board solo: busy, held by pid ")
        and "(run other-run) running test_long since" in waited[0]
    )
    journal = read_journal(tmp_path / "run" / "journal.jsonl")
    attempts = [a for per_pair in journal.attempts.values() for a in per_pair]
    assert len(attempts) == 3 and all(a["final"] and a["outcome"] == "passed" for a in attempts)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["counts"].get("flaky", 0) == 0 and summary["counts"].get("error", 0) == 0
    after = HealthBook((board,), clock=time.time, state_dir=state).record("solo")
    assert (after.state, after.infrastructure_failures, after.reason) == (HealthState.GOOD, 0, before.reason)
    assert _intervals(tmp_path / "events" / "solo.log")[0][1] >= waiting_since[0] + held_s


def test_a_bounded_lease_wait_runs_without_the_busy_board_and_charges_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hwmap, suite = _files(tmp_path)
    monkeypatch.setenv("TINYHIL_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("EVENT_DIR", str(tmp_path / "events"))
    monkeypatch.setenv("EVENT_TAG", "b")
    board = load_hwmap(hwmap).board("solo")
    state = tmp_path / "state"
    HealthBook((board,), clock=time.time, state_dir=state).record_probe("solo", ProbeResult(True, "fine"))
    out = io.StringIO()
    args = ["farm", "run", "--hwmap", str(hwmap), "--suite", str(suite), "--report", str(tmp_path / "run"),
            "--state", str(state), "--workers", "1", "--lease-wait", "0.5"]  # fmt: skip
    with acquire(tmp_path / "locks", BoardLock.of(board), Holder.here("other-run", "test_long")), redirect_stdout(out):
        assert main(args) == 1
    journal = read_journal(tmp_path / "run" / "journal.jsonl")
    attempts = [a for per_pair in journal.attempts.values() for a in per_pair]
    assert len(attempts) == 3 and all(a["final"] and a["outcome"] == "error" for a in attempts)
    assert all("solo: busy: board 'solo': no lease within 0.5 s, held by pid" in a["reason"] for a in attempts)
    after = HealthBook((board,), clock=time.time, state_dir=state).record("solo")
    assert (after.state, after.infrastructure_failures) == (HealthState.GOOD, 0)
    assert not (tmp_path / "events" / "solo.log").exists()  # nothing ran on the busy board


GONE_MAP = """
[[board]]
id = "usb-gone"
kind = "emulated"
emulated = { target = "MOCKUSB+AMD", options = { faults = [
    { operation = "bulk_out", occurrence = 3, fault = "no_device" } ] } }

[[board]]
id = "usb-clean"
kind = "emulated"
emulated = { target = "MOCKUSB+AMD" }
"""
COPY_SUITE = """
import pytest


@pytest.mark.parametrize("n", range(8))
def test_copy_a_megabyte(hil_device, n):
    data = bytes(range(256)) * 4096
    buf = hil_device.alloc(len(data))
    hil_device.copyin(buf, data)
    assert hil_device.copyout(buf) == data
"""


def test_a_device_gone_board_goes_bad_after_three_failures_and_the_rest_finishes_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "hwmap.toml").write_text(GONE_MAP)  # usb-gone loses its device in every test, yet probes fine
    (tmp_path / "test_copy_suite.py").write_text(COPY_SUITE)
    state = tmp_path / "s"
    args = ["farm", "run", "--hwmap", str(tmp_path / "hwmap.toml"), "--suite", str(tmp_path / "test_copy_suite.py"),
            "--report", str(tmp_path / "run"), "--state", str(state), "--workers", "2"]  # fmt: skip
    assert main(args) == 0
    journal = read_journal(tmp_path / "run" / "journal.jsonl")
    attempts = [a for per_pair in journal.attempts.values() for a in per_pair]
    on_gone = [a for a in attempts if a["board"] == "usb-gone"]
    assert len(on_gone) == 3 and all(a["infrastructure"] == "board lost: USBErrorNoDevice" for a in on_gone)
    assert len(journal.final) == 8 and all(r["outcome"] == "passed" for r in journal.final.values())
    assert {r["board"] for r in journal.final.values()} == {"usb-clean"}  # the rest finished on the other board
    record = HealthBook(load_hwmap(tmp_path / "hwmap.toml").boards, clock=time.time, state_dir=state).record("usb-gone")
    assert record.state is HealthState.BAD and record.consecutive_failures == 3
    assert record.reason.startswith("3 infrastructure failures in a row (at most 2), the last: board lost")
    bad = [c for c in read_changes(state) if c.board == "usb-gone" and c.after == "BAD"]
    assert len(bad) == 1 and bad[0].reason == record.reason and bad[0].by == ""  # journaled with its reason


@needs_dask
def test_a_dask_run_and_a_local_run_never_share_a_board_of_one_host(tmp_path: Path) -> None:
    hwmap = emulated_board("solo", "NULL", "host-a")  # one board, reached by a farm worker and by a local run
    (tmp_path / "both.toml").write_text(hwmap)
    (tmp_path / "test_logged.py").write_text(LOGGED_SUITE)
    (tmp_path / "events").mkdir()
    env = {"EVENT_DIR": str(tmp_path / "events"), "TINYHIL_LOCK_DIR": str(tmp_path / "locks")}
    with loopback_cluster(tmp_path / "cluster") as cluster:
        cluster.start_worker("host-a", hwmap, {**env, "EVENT_TAG": "dask"})
        local = _farm_run(tmp_path, "local", "state-local", **env)
        dask = farm_run("--engine", "dask", "--scheduler", cluster.address, "--suite", str(tmp_path / "test_logged.py"),
                        "--report", str(tmp_path / "run-dask"), "--state", str(tmp_path / "state-dask"), cwd=tmp_path,
                        env={**env, "EVENT_TAG": "dask"})  # fmt: skip
        output = local.communicate(timeout=300)[0]
    assert dask.returncode == 0, dask.stdout + dask.stderr
    assert local.returncode == 0, output
    intervals = _intervals(tmp_path / "events" / "solo.log")
    assert sorted(tag for tag, _, _ in intervals) == ["dask"] * 3 + ["local"] * 3
    for (_, _, end), (_, start, _) in itertools.pairwise(intervals):
        assert end <= start


def test_two_tinyhil_runs_get_their_own_emulated_boards_and_never_wait_on_each_other(tmp_path: Path) -> None:
    _files(tmp_path)
    env = {**os.environ, "EVENT_DIR": str(tmp_path / "events"), "TINYHIL_LOCK_DIR": str(tmp_path / "locks"),
           "EVENT_SLEEP_S": "1"}  # fmt: skip
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tinyhil.cli",
                "run",
                "--target",
                "NULL",
                "--suite",
                str(tmp_path / "test_logged.py"),
                "--report",
                str(tmp_path / f"report-{tag}"),
                "--workers",
                "1",
            ],
            env={**env, "EVENT_TAG": tag},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for tag in ("a", "b")
    ]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert not any("busy" in output for output in outputs), outputs  # each run's NULL board is its own
    assert sorted(tag for tag, _, _ in _intervals(tmp_path / "events" / "null.log")) == ["a"] * 3 + ["b"] * 3
