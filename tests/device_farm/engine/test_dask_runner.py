"""``tinyhil farm run --engine dask`` on a loopback cluster: a scheduler and two farm workers with different maps
stand in for two hosts. Each fault of the issue is one test here."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from support.cluster import emulated_board, farm_run, loopback_cluster, needs_dask

pytestmark = needs_dask

HOST_A = emulated_board("usb-a", "MOCKUSB+AMD", "host-a", slots=2)
HOST_B = emulated_board("kfd-b", "MOCKKFD+AMD", "host-b", slots=2)

# Tests that mark when they start (so a test knows what runs where) and take a moment each.
SUITE = """
import os, pathlib, signal, time

import pytest


@pytest.mark.parametrize("n", range({count}))
def test_step(hil_target, n):
    board = os.environ["TINYHIL_BOARD"]
    (pathlib.Path(os.environ["MARKS"]) / f"{{board}}-{{n}}-{{time.monotonic_ns()}}").touch()
    time.sleep({sleep})
    if n == {killer} and board in {killer_boards}:
        os.kill(os.getppid(), signal.SIGKILL)  # the shard's parent: the Dask worker process
"""


def _suite(root: Path, count: int, sleep: float = 0.2, killer: int = -1, killer_boards: tuple[str, ...] = ()) -> Path:
    path = root / "suite" / "test_steps.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SUITE.format(count=count, sleep=sleep, killer=killer, killer_boards=list(killer_boards)))
    (root / "marks").mkdir(exist_ok=True)
    return path


def _results(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "journal.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "result"]


def _outcomes(run_dir: Path) -> dict[tuple[str, str], str]:
    summary = json.loads((run_dir / "summary.json").read_text())
    return {(r["nodeid"], r["target"]): r["outcome"] for r in summary["results"]}


def _wait_for_mark(marks: Path, prefix: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.name.startswith(prefix) for p in marks.iterdir()):
            return
        time.sleep(0.05)
    raise AssertionError(f"no test started on {prefix} in {timeout_s} s")


def test_the_portable_suite_gives_the_local_engines_outcomes_and_the_report_shows_both_hosts(tmp_path: Path) -> None:
    with loopback_cluster(tmp_path) as cluster:
        cluster.start_worker("host-a", HOST_A)
        cluster.start_worker("host-b", HOST_B)
        dask = farm_run("--engine", "dask", "--scheduler", cluster.address, "--report", str(tmp_path / "dask"),
                        "--state", str(tmp_path / "client-state"), "--history", str(tmp_path / "history.db"),
                        cwd=tmp_path)  # fmt: skip
    assert dask.returncode == 0, dask.stdout + dask.stderr
    run_id = json.loads((tmp_path / "dask" / "summary.json").read_text())["run_id"]
    with contextlib.closing(sqlite3.connect(tmp_path / "history.db")) as history:  # recorded where the run is driven
        assert history.execute("SELECT run_id FROM runs").fetchall() == [(run_id,)]
        hosts = {row[0] for row in history.execute("SELECT DISTINCT host FROM attempts WHERE board != '-'")}
    assert hosts == {"host-a", "host-b"}  # one database covers both hosts
    (tmp_path / "both.toml").write_text(HOST_A + HOST_B)
    local = farm_run("--hwmap", str(tmp_path / "both.toml"), "--report", str(tmp_path / "local"), "--state",
                     str(tmp_path / "local-state"), cwd=tmp_path)  # fmt: skip
    assert local.returncode == 0, local.stdout + local.stderr
    assert _outcomes(tmp_path / "dask") == _outcomes(tmp_path / "local")
    ran = [r for r in _results(tmp_path / "dask") if r["board"] != "-"]
    assert ran and {(r["board"], r["host"]) for r in ran} == {("usb-a", "host-a"), ("kfd-b", "host-b")}
    assert {r["target"] for r in ran if r["host"] == "host-a"} == {"MOCKUSB+AMD"}  # shards land where their board is
    page = (tmp_path / "dask" / "report.html").read_text()
    assert 'data-host="host-a"' in page and 'data-host="host-b"' in page
    assert "usb-a @ host-a" in page and "kfd-b @ host-b" in page


def test_a_killed_host_has_its_shard_rerun_on_the_other_eligible_worker_and_every_test_counted_once(
    tmp_path: Path,
) -> None:
    suite = _suite(tmp_path, count=10, sleep=1.5)
    marks = {"MARKS": str(tmp_path / "marks")}
    with loopback_cluster(tmp_path) as cluster:
        cluster.start_worker("host-a", emulated_board("usb-a", "MOCKUSB+AMD", "host-a"), env=marks)
        cluster.start_worker("host-b", emulated_board("usb-b", "MOCKUSB+AMD", "host-b"), env=marks)
        command = [sys.executable, "-m", "tinyhil.cli", "farm", "run", "--engine", "dask", "--scheduler",
                   cluster.address, "--suite", str(suite), "--report", str(tmp_path / "run"), "--state",
                   str(tmp_path / "client-state"), "--board-grace", "2"]  # fmt: skip
        run = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        _wait_for_mark(tmp_path / "marks", "usb-a-")
        # The engine learns that a test started from the shard's start event, which travels through the scheduler;
        # a host killed before it arrived loses a test the engine never saw start (back to its lane, no attempt).
        # Kill well inside the 1.5 s test, once its start event has had time to arrive even on a loaded machine.
        time.sleep(0.5)
        cluster.kill_worker("host-a")
        output, _ = run.communicate(timeout=300)
    assert run.returncode == 0, output
    results = _results(tmp_path / "run")
    final = Counter(r["nodeid"] for r in results if r["final"])
    assert len(final) == 10 and set(final.values()) == {1}  # every test reported exactly once
    assert all(r["outcome"] == "passed" for r in results if r["final"])
    lost = [r for r in results if not r["final"]]
    assert lost and {r["board"] for r in lost} == {"usb-a"}
    assert all("died during the test" in r["infrastructure"] or "offered by none" in r["infrastructure"]
               for r in lost)  # fmt: skip
    rerun = {r["nodeid"] for r in lost}
    assert all(r["board"] == "usb-b" for r in results if r["final"] and r["nodeid"] in rerun)


def test_a_shard_no_online_worker_can_serve_fails_the_run_at_once_naming_it(tmp_path: Path) -> None:
    (tmp_path / "lab.toml").write_text(HOST_A + HOST_B)
    with loopback_cluster(tmp_path) as cluster:
        cluster.start_worker("host-a", HOST_A)  # host-b, the only one with kfd-b, is not online
        done = farm_run("--engine", "dask", "--scheduler", cluster.address, "--hwmap", str(tmp_path / "lab.toml"),
                        "--report", str(tmp_path / "run"), "--state", str(tmp_path / "s"), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "board kfd-b: no online worker offers it; it takes no work" in done.stdout
    line = next(ln for ln in done.stdout.splitlines() if "no board with capabilities" in ln)
    assert "on any worker for shard kfd-b#0 (board kfd-b; workers: tcp://127.0.0.1:" in line
    assert "offers board:usb-a, emu, usb3" in line
    assert "'memory-faults'" in line  # what the stranded tests need (MOCKUSB+AMD lacks it)
    assert not (tmp_path / "run" / "summary.json").exists()  # it ended before running anything


def test_a_test_that_kills_its_worker_every_time_stops_after_the_bound_as_an_infrastructure_failure(
    tmp_path: Path,
) -> None:
    suite = _suite(tmp_path, count=4, sleep=0.05, killer=1, killer_boards=("usb-a",))
    with loopback_cluster(tmp_path) as cluster:
        cluster.start_worker("host-a", emulated_board("usb-a", "MOCKUSB+AMD", "host-a"),
                             env={"MARKS": str(tmp_path / "marks")})  # fmt: skip
        done = farm_run("--engine", "dask", "--scheduler", cluster.address, "--suite", str(suite), "--report",
                        str(tmp_path / "run"), "--state", str(tmp_path / "s"), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    results = _results(tmp_path / "run")
    killer = [r for r in results if r["nodeid"].endswith("[MOCKUSB+AMD-1]")]
    assert [r["attempt"] for r in killer] == [1, 2, 3] and [r["final"] for r in killer] == [False, False, True]
    assert killer[-1]["outcome"] == "error" and "died during the test" in killer[-1]["infrastructure"]
    others = [r for r in results if r["final"] and r not in killer]
    assert len(others) == 3 and all(r["outcome"] == "passed" for r in others)


def test_the_scheduler_going_away_ends_the_run_with_the_journal_kept_and_resume_finishes_it(tmp_path: Path) -> None:
    suite = _suite(tmp_path, count=12, sleep=0.4)
    marks = {"MARKS": str(tmp_path / "marks")}
    run_dir = tmp_path / "run"
    with loopback_cluster(tmp_path) as cluster:
        cluster.start_worker("host-a", emulated_board("usb-a", "MOCKUSB+AMD", "host-a"), env=marks)
        command = [sys.executable, "-m", "tinyhil.cli", "farm", "run", "--engine", "dask", "--scheduler",
                   cluster.address, "--suite", str(suite), "--report", str(run_dir), "--state",
                   str(tmp_path / "s"), "--scheduler-grace", "1"]  # fmt: skip
        run = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(r["final"] for r in _journal_or_empty(run_dir)):
            time.sleep(0.1)
        cluster.kill_scheduler()
        output, _ = run.communicate(timeout=120)
        cluster.kill_worker("host-a")
    assert run.returncode == 4, output
    assert "went away mid-run" in output and f"--resume {run_dir}" in output
    kept = {r["nodeid"] for r in _results(run_dir) if r["final"]}
    assert 1 <= len(kept) < 12
    with loopback_cluster(tmp_path) as cluster:
        cluster.start_worker("host-a", emulated_board("usb-a", "MOCKUSB+AMD", "host-a"), env=marks)
        resumed = farm_run("--engine", "dask", "--scheduler", cluster.address, "--resume", str(run_dir), "--suite",
                           str(suite), "--state", str(tmp_path / "s"), cwd=tmp_path)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    final = Counter(r["nodeid"] for r in _results(run_dir) if r["final"])
    assert len(final) == 12 and set(final.values()) == {1}
    assert all(_outcomes(run_dir)[key] == "passed" for key in _outcomes(run_dir))


def _journal_or_empty(run_dir: Path) -> list[dict[str, Any]]:
    try:
        return _results(run_dir)
    except (OSError, ValueError):
        return []


def test_the_engine_is_named_and_checked_on_the_command_line(tmp_path: Path) -> None:
    done = farm_run("--engine", "dask", "--report", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 2 and "--engine dask needs --scheduler ADDRESS" in done.stderr
    done = farm_run("--scheduler", "tcp://127.0.0.1:1", "--report", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 2 and "add --engine dask" in done.stderr
    done = farm_run("--engine", "dask", "--scheduler", "tcp://127.0.0.1:1", "--report", str(tmp_path / "r"),
                    cwd=tmp_path)  # fmt: skip
    assert done.returncode == 4 and "no Dask scheduler answers at tcp://127.0.0.1:1" in done.stdout
