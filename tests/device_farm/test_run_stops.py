"""A farm run that stops before its end, by ``--deadline`` or Ctrl-C: no further test starts, the running test is
ended, the reports are written marked incomplete with what is missing, no board is blamed, and the printed command
finishes the run."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tinyhil.device_farm.health.states import HealthBook
from tinyhil.device_farm.inventory.hwmap import parse_hwmap
from tinyhil.device_farm.journal import read_journal
from tinyhil.device_farm.run import EXIT_DEADLINE, EXIT_INTERRUPTED

SUITE = """
import os
import time
from pathlib import Path

import pytest

MARKS = Path(os.environ["MARKS"])


def test_a_quick(hil_target):
    pass


def test_b_hangs(hil_target):
    (MARKS / "started").write_text(str(os.getpid()))
    while not (MARKS / "release").exists():
        time.sleep(0.05)
"""
HWMAP = '[[board]]\nid = "null-a"\nkind = "emulated"\nemulated = { target = "NULL" }\n'


def _start(tmp_path: Path, *options: str) -> tuple[list[str], subprocess.Popen[str], dict[str, str]]:
    (tmp_path / "marks").mkdir()
    (tmp_path / "test_stops.py").write_text(SUITE)
    (tmp_path / "hwmap.toml").write_text(HWMAP)
    env = {**os.environ, "MARKS": str(tmp_path / "marks")}
    command = [sys.executable, "-m", "tinyhil.cli", "farm", "run"]
    args = [*command, "--suite", str(tmp_path / "test_stops.py"), "--hwmap", str(tmp_path / "hwmap.toml"), "--state",
            str(tmp_path / "s"), "--report", str(tmp_path / "run"), "--workers", "1", *options]  # fmt: skip
    process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return command, process, env


def _check_stopped(tmp_path: Path, why: str, status: int) -> dict[str, object]:
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["complete"] is False and summary["exitstatus"] == status
    assert str(summary["incomplete"]).startswith(f"stopped: {why}")
    assert "test_stops.py::test_b_hangs[NULL]@NULL" in summary["missing"]  # ended, not reported
    assert all(r["nodeid"] != "test_stops.py::test_b_hangs[NULL]" for r in summary["results"])
    assert "incomplete" in (tmp_path / "run" / "junit.xml").read_text()
    health = HealthBook(parse_hwmap(HWMAP).boards, clock=time.time, state_dir=tmp_path / "s").record("null-a")
    assert health.infrastructure_failures == 0 and health.state.value == "GOOD"  # the run ended it: no fault
    return summary


def _finish(tmp_path: Path, resume: list[str], env: dict[str, str]) -> None:
    (tmp_path / "marks" / "release").write_text("")
    done = subprocess.run(resume, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["complete"] is True and {k: n for k, n in summary["counts"].items() if n} == {"passed": 2}
    assert read_journal(tmp_path / "run" / "journal.jsonl").duplicates == 0


def test_ctrl_c_ends_the_running_test_writes_incomplete_reports_and_prints_the_command_to_resume(
    tmp_path: Path,
) -> None:
    command, process, env = _start(tmp_path)
    started = tmp_path / "marks" / "started"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not started.exists():
        time.sleep(0.05)
    assert started.exists(), "the hanging test never started"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == EXIT_INTERRUPTED, err
    resume_line = next(line for line in err.splitlines() if "finish the run with: " in line)
    resume = shlex.split(resume_line.split("finish the run with: ", 1)[1])
    assert resume == ["tinyhil", "farm", "run", "--resume", str(tmp_path / "run")]
    _check_stopped(tmp_path, "interrupted (Ctrl-C)", EXIT_INTERRUPTED)
    _finish(tmp_path, [*command, *resume[3:]], env)


def test_a_run_past_its_deadline_ends_with_exit_124_and_the_resume_finishes_it(tmp_path: Path) -> None:
    command, process, env = _start(tmp_path, "--deadline", "15s")
    out, err = process.communicate(timeout=300)  # the hanging test never ends by itself: the deadline ends it
    assert process.returncode == EXIT_DEADLINE, out + err
    assert f"finish the run with: tinyhil farm run --resume {tmp_path / 'run'}" in out
    _check_stopped(tmp_path, "the run's deadline passed", EXIT_DEADLINE)
    _finish(tmp_path, [*command, "--resume", str(tmp_path / "run")], env)


def test_remaining_s_is_the_time_left_before_the_deadline(tmp_path: Path) -> None:
    from tinyhil.device_farm.run import new_run
    from tinyhil.errors import InvalidArgument

    boards = parse_hwmap(HWMAP)
    run = new_run(boards, (), tmp_path / "a", tmp_path / "s", 1, deadline_s=90.0)
    at = run.deadline_at
    assert at is not None
    assert run.remaining_s(lambda: at - 30.0) == 30.0
    assert run.remaining_s(lambda: at + 5.0) == 0.0
    assert new_run(boards, (), tmp_path / "b", tmp_path / "s", 1).remaining_s() is None  # no deadline: no bound
    for bad in (0.0, -1.0):
        with pytest.raises(InvalidArgument, match=f"--deadline {bad!r} s, expected a duration > 0"):
            new_run(boards, (), tmp_path / "c", tmp_path / "s", 1, deadline_s=bad)
