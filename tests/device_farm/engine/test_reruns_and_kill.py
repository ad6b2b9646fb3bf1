"""The engine's ``reruns`` (a failing test runs again by the retry path, never charged to its board) and
``stop(kill=True)`` (the running shards ended through the runner's ``cancel``, their tests left without a result and
their boards' health untouched)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest

from tinyhil.device_farm.engine import FarmEngine, Result
from tinyhil.device_farm.health.states import HealthBook
from tinyhil.device_farm.inventory.hwmap import parse_hwmap
from tinyhil.device_farm.planning import Pair, plan
from tinyhil.device_farm.shard.parent import Event, ShardExit, ShardJob
from tinyhil.errors import InvalidArgument

BOARDS = parse_hwmap('[[board]]\nid = "emu-1"\nkind = "emulated"\nemulated = { target = "NULL" }\n').boards
PAIRS = [Pair(f"t.py::test_{name}[NULL]", "NULL") for name in ("passes", "fails_once", "fails_always")]


def _reports(node: str, outcome: str) -> list[dict[str, object]]:
    call = {"nodeid": node, "when": "call", "outcome": outcome, "duration": 0.01,
            "longrepr": "assert False" if outcome == "failed" else None}  # fmt: skip
    return [{"nodeid": node, "when": "setup", "outcome": "passed", "duration": 0.0, "longrepr": None}, call]


class _Runner:
    """Shards without processes: ``test_fails_once`` fails its first run, ``test_fails_always`` every run."""

    host = "here"

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()

    def run(self, job: ShardJob, on_event: Callable[[Event], None]) -> ShardExit:
        for node in job.nodes:
            self.runs[node] += 1
            on_event({"event": "start", "nodeid": node})
            fails = "fails_always" in node or ("fails_once" in node and self.runs[node] == 1)
            on_event({"event": "result", "nodeid": node, "reports": _reports(node, "failed" if fails else "passed")})
        return ShardExit(0)


def _run(reruns: int) -> tuple[list[Result], HealthBook, _Runner]:
    book = HealthBook(BOARDS, clock=lambda: 0.0)
    runner = _Runner()
    engine = FarmEngine(BOARDS, runner, run_id="r", workers=1, health=book, reruns=reruns)
    results: list[Result] = []
    engine.run(plan(PAIRS, BOARDS), results.append)
    return results, book, runner


def test_without_reruns_a_failure_is_final_at_its_first_attempt() -> None:
    results, _, runner = _run(0)
    assert all(r.final and r.attempt == 1 for r in results) and len(results) == len(PAIRS)
    assert set(runner.runs.values()) == {1}


def test_reruns_run_a_failing_test_again_keeping_every_attempt_and_never_charge_the_board() -> None:
    results, book, runner = _run(2)
    by_test: dict[str, list[Result]] = {}
    for result in results:
        by_test.setdefault(result.nodeid.split("::")[1].split("[")[0], []).append(result)
    assert [(r.attempt, r.outcome, r.final) for r in by_test["test_passes"]] == [(1, "passed", True)]
    assert [(r.attempt, r.outcome, r.final) for r in by_test["test_fails_once"]] == [(1, "failed", False),
                                                                                     (2, "passed", True)]  # fmt: skip
    always = by_test["test_fails_always"]
    assert [(r.attempt, r.outcome, r.final) for r in always] == [(1, "failed", False), (2, "failed", False),
                                                                 (3, "failed", True)]  # fmt: skip
    assert all(r.infrastructure is None for r in results)
    assert runner.runs[PAIRS[2].node_id] == 3  # once, then the two reruns allowed
    assert book.record("emu-1").infrastructure_failures == 0


def test_reruns_must_be_a_count() -> None:
    with pytest.raises(InvalidArgument, match="reruns=-1, expected an integer >= 0"):
        FarmEngine(BOARDS, _Runner(), run_id="r", workers=1, reruns=-1)


class _HangingRunner:
    """A shard whose first test runs until ``cancel`` ends it, as a killed process would end."""

    host = "here"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.ended = threading.Event()

    def cancel(self) -> None:
        self.ended.set()

    def run(self, job: ShardJob, on_event: Callable[[Event], None]) -> ShardExit:
        on_event({"event": "start", "nodeid": job.nodes[0]})
        self.started.set()
        self.ended.wait(60)
        return ShardExit(-15, "", "worker killed by SIGTERM")


def test_stop_with_kill_ends_the_running_shard_leaving_its_tests_without_a_result_or_a_fault() -> None:
    book = HealthBook(BOARDS, clock=lambda: 0.0)
    runner = _HangingRunner()
    engine = FarmEngine(BOARDS, runner, run_id="r", workers=1, health=book)
    results: list[Result] = []
    stopper = threading.Thread(target=lambda: runner.started.wait(60) and engine.stop("deadline", kill=True))
    stopper.start()
    engine.run(plan(PAIRS, BOARDS), results.append)  # returns once the cancelled shard is accounted for
    stopper.join()
    assert runner.ended.is_set() and engine.killed and engine.stopped == "deadline"
    assert results == []  # the test it ran was ended by the run: no attempt, no result
    assert book.record("emu-1").infrastructure_failures == 0


def test_stop_with_kill_on_a_runner_without_cancel_lets_the_shard_finish() -> None:
    engine = FarmEngine(BOARDS, _Runner(), run_id="r", workers=1)
    results: list[Result] = []

    def arrived(result: Result) -> None:
        results.append(result)
        engine.stop("deadline", kill=True)

    engine.run(plan(PAIRS, BOARDS), arrived)
    assert not engine.killed and len([r for r in results if r.final]) == len(PAIRS)  # one shard held every pair
