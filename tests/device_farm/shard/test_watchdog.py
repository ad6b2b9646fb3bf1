"""Per-test time limits: a test over its limit (``--test-timeout``, or its ``hil`` marker's ``timeout``) is stopped by
its shard's watchdog with every thread's stack, reported as the test's failure (never retried, never the board's
fault), the board is probed, and the lane goes on in a fresh shard process."""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tinyhil.device_farm.engine import Result
from tinyhil.device_farm.engine.local import LocalEngine
from tinyhil.device_farm.health.states import HealthBook, HealthState, ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board, parse_hwmap
from tinyhil.device_farm.planning import Lane, Pair, plan
from tinyhil.device_farm.shard.watchdog import timeout_report

SUITE = """
import threading
import time

import pytest


def _helper_thread_sleeps():
    time.sleep(60)


def test_sleeps_past_the_run_limit(hil_target):
    threading.Thread(target=_helper_thread_sleeps, name="helper", daemon=True).start()
    time.sleep(60)


@pytest.mark.hil(timeout=0.5)
def test_sleeps_past_its_marker_limit(hil_target):
    time.sleep(60)


def test_passes(hil_target):
    pass
"""
BOARDS = parse_hwmap('[[board]]\nid = "emu"\nkind = "emulated"\nemulated = { target = "NULL" }\n').boards
RUN_LIMIT_S = 1.5
MARKER_LIMIT_S = 0.5  # the marker's, in SUITE


def _run(tmp_path: Path) -> tuple[LocalEngine, HealthBook, list[str], list[Result]]:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_suite.py").write_text(SUITE)
    (suite / "pytest.ini").write_text("[pytest]\n")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tinyhil.device_farm.shard.plugin"]
    book = HealthBook(BOARDS, clock=lambda: 0.0)
    probed: list[str] = []

    def probe(board: Board) -> ProbeResult:
        probed.append(board.id)
        return ProbeResult(True, "answers")

    engine = LocalEngine(BOARDS, command=command, cwd=suite, lease_dir=tmp_path / "leases", run_id="r1", workers=1,
                         health=book, probe=probe, env=dict(os.environ), test_timeout_s=RUN_LIMIT_S)  # fmt: skip
    names = ("test_sleeps_past_the_run_limit", "test_sleeps_past_its_marker_limit", "test_passes")
    pairs = [Pair(f"{suite / 'test_suite.py'}::{name}[NULL]", "NULL") for name in names]
    results: list[Result] = []
    engine.run(plan(pairs, BOARDS, workers=1), results.append)
    return engine, book, probed, results


def test_a_sleeping_test_is_stopped_at_its_limit_with_every_threads_stack(tmp_path: Path) -> None:
    engine, book, probed, results = _run(tmp_path)
    by_name = {r.nodeid.split("::")[1].split("[")[0]: r for r in results}
    assert len(results) == 3 and all(r.final for r in results)  # one result each: a timeout is never retried
    for name, limit in [("test_sleeps_past_the_run_limit", RUN_LIMIT_S),
                        ("test_sleeps_past_its_marker_limit", MARKER_LIMIT_S)]:  # fmt: skip
        result = by_name[name]
        assert (result.outcome, result.infrastructure, result.attempt) == ("failed", None, 1)
        assert result.reason == timeout_report(limit, "").splitlines()[0]
        assert f"in {name}" in result.longrepr  # the test's own frame, from faulthandler's dump
        assert result.duration_s >= limit
    assert "in _helper_thread_sleeps" in by_name["test_sleeps_past_the_run_limit"].longrepr  # every thread
    assert by_name["test_passes"].outcome == "passed"
    # a timeout is not the board's fault, but the board is probed after it
    assert probed == ["emu"] * 3  # before its first shard, then after each timeout
    record = book.record("emu")
    assert record.state is HealthState.GOOD and record.infrastructure_failures == 0
    # the lane went on in a fresh shard process after each timeout
    assert engine.shards_started == {Lane("emu", 0): 3}


def test_a_farm_run_reports_the_timeout_with_its_stack_dump(tmp_path: Path) -> None:
    from tinyhil.cli import main

    suite = tmp_path / "test_hangs.py"
    suite.write_text(
        "import time\n\nimport pytest\n\n\n@pytest.mark.hil(timeout=0.5)\ndef test_hangs(hil_target):\n"
        "    time.sleep(60)\n\n\ndef test_passes(hil_target):\n    pass\n"
    )
    run = tmp_path / "run"
    args = ["farm", "run", "--suite", str(suite), "--target", "NULL", "--report", str(run), "--state",
            str(tmp_path / "s"), "--test-timeout", "30"]  # fmt: skip
    assert main(args) == 1
    summary = json.loads((run / "summary.json").read_text())
    by_test = {r["test"]: r for r in summary["results"]}
    hung = by_test["test_hangs.py::test_hangs"]
    assert (hung["outcome"], hung["infrastructure"], hung["attempt"]) == ("failed", None, 1)
    assert hung["reason"] == timeout_report(MARKER_LIMIT_S, "").splitlines()[0]  # the marker's limit wins
    assert "in test_hangs" in hung["longrepr"]
    assert by_test["test_hangs.py::test_passes"]["outcome"] == "passed"
    failure = next(case for case in ET.parse(run / "junit.xml").getroot().iter("testcase")
                   if case.get("name", "").startswith("test_hangs")).find("failure")  # fmt: skip
    assert failure is not None and "in test_hangs" in (failure.text or "")
