"""The engine and board ownership, with scripted shards: waiting for a busy board is said once and charged to
nobody, a lease wait that runs out moves the board's work elsewhere with its health untouched, and a board whose
device keeps going away goes BAD at the health book's bound with its remaining work moved at once."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import tinyhil.device_farm.engine as engine_module
from tinyhil.device_farm.engine import FarmEngine, Result
from tinyhil.device_farm.health.states import HealthBook, HealthState, ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board, parse_hwmap
from tinyhil.device_farm.leases import Holder, LeaseTimeout
from tinyhil.device_farm.planning import Pair, plan
from tinyhil.device_farm.shard.parent import Event, ShardExit, ShardJob

BOARDS = parse_hwmap(
    '[[board]]\nid = "null-1"\nkind = "emulated"\nemulated = { target = "NULL" }\n\n'
    '[[board]]\nid = "null-2"\nkind = "emulated"\nemulated = { target = "NULL" }\n'
).boards
PAIRS = [Pair(f"t.py::test_{n}[NULL]", "NULL") for n in range(8)]
HOLDERS = "pid 9 on lab-1 (run other) running t.py::test_long[NULL] since 02:14:09"


def _passed(node: str) -> list[dict[str, object]]:
    return [{"nodeid": node, "when": when, "outcome": "passed", "duration": 0.01, "longrepr": None}
            for when in ("setup", "call", "teardown")]  # fmt: skip


class _ScriptedRunner:
    """Shards without processes: a ``busy`` board's shard says it waits, then runs; a ``timed_out`` board's never
    gets its lease; a ``gone`` board loses its device in every test (and its shard stops there, as the plugin's
    does)."""

    host = "here"

    def __init__(self, busy: str = "", timed_out: str = "", gone: str = "") -> None:
        self.busy, self.timed_out, self.gone = busy, timed_out, gone

    def run(self, job: ShardJob, on_event: Callable[[Event], None]) -> ShardExit:
        board = job.board.id
        if board == self.timed_out:
            on_event({"event": "waiting", "holders": HOLDERS, "since": 1.0})
            on_event({"event": "lease-timeout", "reason": f"board {board!r}: no lease within 5 s, held by {HOLDERS}"})
            return ShardExit(4)
        if board == self.busy:
            on_event({"event": "waiting", "holders": HOLDERS, "since": 1.0})
        for node in job.nodes:
            on_event({"event": "start", "nodeid": node})
            if board == self.gone:
                failed = [{**report, "outcome": "failed"} if report["when"] == "call" else report
                          for report in _passed(node)]  # fmt: skip
                on_event({"event": "result", "nodeid": node, "reports": failed,
                          "infrastructure": "board lost: USBErrorNoDevice"})  # fmt: skip
                return ShardExit(1)
            on_event({"event": "result", "nodeid": node, "reports": _passed(node)})
        return ShardExit(0)


def _good_book() -> HealthBook:
    book = HealthBook(BOARDS, clock=lambda: 100.0)
    for board in BOARDS:
        book.record_probe(board.id, ProbeResult(True, "fine"))
    return book


def _probe(board: Board) -> ProbeResult:
    return ProbeResult(True, "probes fine")  # the device comes back between tests


def test_a_shard_waiting_for_its_board_is_said_once_and_charged_to_nobody() -> None:
    book = _good_book()
    engine = FarmEngine(BOARDS, _ScriptedRunner(busy="null-1"), run_id="r", workers=2, health=book, probe=_probe)
    results: list[Result] = []
    waits: list[tuple[str, str]] = []
    engine.run(plan(PAIRS, BOARDS), results.append, on_wait=lambda board, held: waits.append((board, held)))
    assert waits == [("null-1", HOLDERS)]  # null-1's lane ran one shard: one line
    assert len(results) == 8 and all(r.final and r.outcome == "passed" for r in results)
    record = book.record("null-1")
    assert (record.state, record.infrastructure_failures, record.reason) == (HealthState.GOOD, 0, "fine")


def test_a_lease_wait_that_runs_out_moves_the_work_and_leaves_health_alone() -> None:
    book = _good_book()
    engine = FarmEngine(BOARDS, _ScriptedRunner(timed_out="null-1"), run_id="r", workers=2, health=book,
                        probe=_probe, lease_timeout_s=5.0)  # fmt: skip
    results: list[Result] = []
    engine.run(plan(PAIRS, BOARDS), results.append)
    assert len(results) == 8 and all(r.final and r.outcome == "passed" and r.board == "null-2" for r in results)
    assert (book.state("null-1"), book.record("null-1").infrastructure_failures) == (HealthState.GOOD, 0)


def test_a_device_gone_board_goes_bad_at_the_bound_and_its_work_moves_at_once() -> None:
    book = HealthBook(BOARDS, clock=lambda: 100.0, bad_after=3)
    engine = FarmEngine(BOARDS, _ScriptedRunner(gone="null-1"), run_id="r", workers=2, health=book, probe=_probe)
    results: list[Result] = []
    engine.run(plan(PAIRS, BOARDS), results.append)
    lost = [r for r in results if not r.final]
    assert len(lost) == 3 and {r.board for r in lost} == {"null-1"}
    finals = [r for r in results if r.final]
    assert len(finals) == 8 and all(r.outcome == "passed" and r.board == "null-2" for r in finals)
    record = book.record("null-1")
    assert record.state is HealthState.BAD and record.consecutive_failures == 3


def test_a_probe_that_finds_the_board_busy_is_asked_again_and_the_wait_said_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine_module, "PROBE_RETRY_S", 0.01)
    book = HealthBook(BOARDS, clock=lambda: 100.0)  # UNKNOWN: each lane probes before its first shard
    busy_for = {"null-1": 3}

    def probe(board: Board) -> ProbeResult:  # a farm worker's probe: it never waits, it says the board is busy
        if busy_for.get(board.id, 0) > 0:
            busy_for[board.id] -= 1
            raise LeaseTimeout(board.id, 0.0, [Holder("lab-1", 9, "other", "t.py::test_long[NULL]", 1.0, board.id)])
        return ProbeResult(True, "fine")

    engine = FarmEngine(BOARDS, _ScriptedRunner(), run_id="r", workers=2, health=book, probe=probe)
    results: list[Result] = []
    waits: list[tuple[str, str]] = []
    engine.run(plan(PAIRS, BOARDS), results.append, on_wait=lambda board, held: waits.append((board, held)))
    assert len(waits) == 1 and waits[0][0] == "null-1" and "(run other) running t.py::test_long[NULL]" in waits[0][1]
    assert len(results) == 8 and all(r.final and r.outcome == "passed" for r in results)
    assert {r.board for r in results} == {"null-1", "null-2"} and busy_for["null-1"] == 0  # it waited, then worked
    assert (book.state("null-1"), book.record("null-1").infrastructure_failures) == (HealthState.GOOD, 0)
