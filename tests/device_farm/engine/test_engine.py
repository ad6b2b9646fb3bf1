"""The local engine on emulated boards: results as they arrive, test failures final, infrastructure failures
(a SIGKILLed shard, a lost board) retried once on another board, and a board whose probe fails gets no work."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tinyhil.device_farm.engine import FarmEngine, Result
from tinyhil.device_farm.engine.local import LocalEngine
from tinyhil.device_farm.health.states import HealthBook, ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board, parse_hwmap
from tinyhil.device_farm.planning import Pair, plan
from tinyhil.device_farm.shard.parent import Event, ShardExit, ShardJob

SUITE = """
import os, signal
from pathlib import Path

import usb1

MARKS = Path(os.environ["MARKS"])


def _first_time(name):
    mark = MARKS / name
    if mark.exists():
        return False
    mark.write_text(os.environ["TINYHIL_BOARD"])
    return True


def test_passes(hil_target):
    assert os.environ["DEV"] == hil_target.name


def test_fails(hil_target):
    assert False, "wrong bytes"


def test_killed_once(hil_target):
    if _first_time("killed"):
        os.kill(os.getpid(), signal.SIGKILL)


def test_board_lost_once(hil_target):
    if _first_time("lost"):
        raise usb1.USBErrorNoDevice(usb1.ERROR_NO_DEVICE)
"""
BOARDS = parse_hwmap(
    '[[board]]\nid = "emu-1"\nkind = "emulated"\nemulated = { target = "NULL" }\n\n'
    '[[board]]\nid = "emu-2"\nkind = "emulated"\nemulated = { target = "NULL" }\n'
).boards
TESTS = ("test_passes", "test_fails", "test_killed_once", "test_board_lost_once")


def _engine(
    tmp_path: Path,
    boards: tuple[Board, ...],
    health: HealthBook | None = None,
    probe: Callable[[Board], ProbeResult] | None = None,
) -> LocalEngine:
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_suite.py").write_text(SUITE)
    (tmp_path / "suite" / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "marks").mkdir()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tinyhil.device_farm.shard.plugin"]
    env = {**os.environ, "MARKS": str(tmp_path / "marks")}
    cwd, leases = tmp_path / "suite", tmp_path / "leases"
    return LocalEngine(boards, command=command, cwd=cwd, lease_dir=leases, run_id="r1", workers=2, health=health,
                       probe=probe, env=env)  # fmt: skip


def _run(engine: LocalEngine, boards: tuple[Board, ...]) -> list[Result]:
    pairs = [Pair(f"{engine.cwd / 'test_suite.py'}::{name}[NULL]", "NULL") for name in TESTS]
    results: list[Result] = []
    engine.run(plan(pairs, boards), results.append)
    return results


def test_failures_are_final_and_infrastructure_failures_retry_on_another_board(tmp_path: Path) -> None:
    results = _run(_engine(tmp_path, BOARDS), BOARDS)
    final = {r.nodeid.split("::")[1].split("[")[0]: r for r in results if r.final}
    assert set(final) == set(TESTS) and len([r for r in results if r.final]) == len(TESTS)  # each reported once
    assert (final["test_passes"].outcome, final["test_passes"].attempt) == ("passed", 1)
    assert final["test_fails"].outcome == "failed" and final["test_fails"].attempt == 1  # never retried
    assert "wrong bytes" in final["test_fails"].reason
    for name, cause in [("test_killed_once", "worker killed by SIGKILL"),
                        ("test_board_lost_once", "board lost: USBErrorNoDevice")]:  # fmt: skip
        lost = [r for r in results if name in r.nodeid and not r.final]
        assert [(r.attempt, r.infrastructure) for r in lost] == [(1, cause)]
        first_board = (tmp_path / "marks" / ("killed" if "killed" in name else "lost")).read_text()
        assert lost[0].board == first_board
        assert (final[name].outcome, final[name].attempt) == ("passed", 2)
        assert final[name].board != first_board  # retried on the other board


def test_a_board_whose_probe_fails_gets_no_work(tmp_path: Path) -> None:
    book = HealthBook(BOARDS, clock=lambda: 0.0)

    def probe(board: Board) -> ProbeResult:
        return ProbeResult(board.id != "emu-2", "link down" if board.id == "emu-2" else "fine")

    results = _run(_engine(tmp_path, BOARDS, book, probe), BOARDS)
    assert {r.board for r in results} == {"emu-1"}
    assert book.state("emu-2").value == "BAD" and book.record("emu-2").reason == "probe failed: link down"
    assert len([r for r in results if r.final]) == len(TESTS)


def test_when_every_board_is_bad_the_pairs_end_as_errors_naming_why(tmp_path: Path) -> None:
    book = HealthBook(BOARDS, clock=lambda: 0.0)
    results = _run(_engine(tmp_path, BOARDS, book, lambda board: ProbeResult(False, "gone")), BOARDS)
    assert len(results) == len(TESTS) and all(r.final and r.outcome == "error" for r in results)
    assert all(r.reason.startswith("no eligible board left") for r in results)


@pytest.mark.parametrize("bad", [{"workers": 0}, {"max_attempts": 0}])
def test_bad_arguments_are_named(tmp_path: Path, bad: dict[str, int]) -> None:
    from tinyhil.errors import InvalidArgument

    options = {"command": [], "cwd": tmp_path, "lease_dir": tmp_path, "run_id": "r", "workers": 1, **bad}
    with pytest.raises(InvalidArgument, match=f"{next(iter(bad))}=0, expected an integer >= 1"):
        LocalEngine(BOARDS, **options)  # type: ignore[arg-type]


class _BrokenOnOneBoard(LocalEngine):
    def _shard(self, state: object, lane: object, board: Board, batch: list[Pair]) -> None:  # type: ignore[override]
        if board.id == "emu-1":
            raise RuntimeError("engine bug")
        super()._shard(state, lane, board, batch)  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_an_engine_error_on_one_lane_hands_its_pairs_to_the_others_instead_of_hanging(tmp_path: Path) -> None:
    engine = _engine(tmp_path, BOARDS)
    broken = _BrokenOnOneBoard(BOARDS, command=engine.command, cwd=engine.cwd, lease_dir=engine.lease_dir,
                               run_id="r1", workers=2, env=engine.env)  # fmt: skip
    results = _run(broken, BOARDS)
    final = [r for r in results if r.final]
    assert len(final) == len(TESTS) and {r.board for r in results} == {"emu-2"}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_lane_runs_every_pair_in_one_shard_process_and_workers_bound_the_processes(tmp_path: Path,
                                                                                     workers: int) -> None:  # fmt: skip
    engine = _engine(tmp_path, BOARDS)
    engine = LocalEngine(BOARDS, command=engine.command, cwd=engine.cwd, lease_dir=engine.lease_dir, run_id="r1",
                         workers=workers, env=engine.env)  # fmt: skip
    (engine.cwd / "test_pids.py").write_text(
        "import os\nfrom pathlib import Path\n\nimport pytest\n\n\n@pytest.mark.parametrize('n', range(6))\n"
        "def test_pid(hil_target, n):\n    (Path(os.environ['MARKS']) / str(n)).write_text(str(os.getpid()))\n"
    )
    pairs = [Pair(f"{engine.cwd / 'test_pids.py'}::test_pid[NULL-{n}]", "NULL") for n in range(6)]
    results: list[Result] = []
    work = plan(pairs, BOARDS, workers=workers)
    engine.run(work, results.append)
    assert sorted(r.outcome for r in results) == ["passed"] * 6
    lanes = [lane for lane, shard in work.shards.items() if shard]
    assert len(lanes) == workers and engine.shards_started == {lane: 1 for lane in lanes}
    pids = {(tmp_path / "marks" / str(n)).read_text() for n in range(6)}
    # one process per lane at most, fed its pairs (a lane that runs out takes the others' queued pairs)
    assert 1 <= len(pids) <= engine.local.started <= workers
    assert engine.slots.peak <= workers


def test_a_shard_environment_names_its_board_for_tests_with_their_own_stack() -> None:
    from tinyhil.device_farm.shard.parent import board_environment

    boards = parse_hwmap(
        '[[board]]\nid = "nv-0"\nkind = "nv"\nnv = { uuid = "GPU-5f2c7a10" }\n\n'
        '[[board]]\nid = "nv-1"\nkind = "nv"\nnv = { pci_bus_id = "0000:41:00.0" }\n\n'
        '[[board]]\nid = "kfd-0"\nkind = "amd-kfd"\nkfd = { gpu_id = 4660, unique_id = 11 }\ntargets = ["KFD+AMD"]\n'
    ).boards
    assert board_environment(boards[0], "X") == {
        "TINYHIL_BOARD": "nv-0",
        "DEV": "X",
        "CUDA_VISIBLE_DEVICES": "GPU-5f2c7a10",
    }
    assert board_environment(boards[1], "X")["CUDA_VISIBLE_DEVICES"] == "0000:41:00.0"
    assert board_environment(boards[2], "KFD+AMD") == {"TINYHIL_BOARD": "kfd-0", "DEV": "KFD+AMD",
                                                     "TINYHIL_KFD_GPU_ID": "4660",
                                                     "ROCR_VISIBLE_DEVICES": "GPU-000000000000000b"}  # fmt: skip
    assert board_environment(BOARDS[0], "NULL") == {"TINYHIL_BOARD": "emu-1", "DEV": "NULL"}


MIXED = parse_hwmap(
    '[[board]]\nid = "kfd-1"\nkind = "emulated"\nemulated = { target = "MOCKKFD+AMD" }\n\n'
    '[[board]]\nid = "null-1"\nkind = "emulated"\nemulated = { target = "NULL" }\n\n'
    '[[board]]\nid = "null-2"\nkind = "emulated"\nemulated = { target = "NULL" }\n'
).boards
MIXED_PAIRS = [Pair(f"t.py::test_{n}[{t}]", t) for t in ("MOCKKFD+AMD", "NULL") for n in range(4)]


class _InstantRunner:
    """Shards without processes: every test starts and passes at once (or the shard raises on ``broken``)."""

    host = "here"

    def __init__(self, broken: str = "") -> None:
        self.broken = broken

    def run(self, job: ShardJob, on_event: Callable[[Event], None]) -> ShardExit:
        if job.board.id == self.broken:
            raise RuntimeError("runner broke")
        for node in job.nodes:
            on_event({"event": "start", "nodeid": node})
            reports = [{"nodeid": node, "when": when, "outcome": "passed", "duration": 0.01, "longrepr": None}
                       for when in ("setup", "call", "teardown")]  # fmt: skip
            on_event({"event": "result", "nodeid": node, "reports": reports})
        return ShardExit(0)


def _on_its_board(results: list[Result]) -> None:
    """Every result is on a board that serves its target, and no pair has two final results."""
    boards = {b.id: b for b in MIXED}
    assert all(r.target in boards[r.board].targets for r in results), [(r.key, r.board) for r in results]
    finals = [r.key for r in results if r.final]
    assert len(finals) == len(set(finals)), finals


@pytest.mark.parametrize("broken", ["", "kfd-1", "null-1"])
def test_a_result_callback_that_raises_stops_the_run_without_misattributing_or_repeating_a_result(
    broken: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a closed stdout did to progress printing: the callback raised inside the engine's accounting."""
    crashed: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: crashed.append(str(args.exc_value)))
    engine = FarmEngine(MIXED, _InstantRunner(broken), run_id="r", workers=1)
    results: list[Result] = []

    def arrived(result: Result) -> None:
        results.append(result)
        if result.final:
            raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        engine.run(plan(MIXED_PAIRS, MIXED), arrived)
    assert engine.stopped is not None and "BrokenPipeError" in engine.stopped
    _on_its_board(results)
    assert [c for c in crashed if "Broken pipe" in c] == []  # no lane thread died of it


def test_stop_starts_no_further_shard_and_lets_the_running_one_finish() -> None:
    engine = FarmEngine(MIXED, _InstantRunner(), run_id="r", workers=1)
    results: list[Result] = []

    def arrived(result: Result) -> None:
        results.append(result)
        engine.stop("the reader went away")

    engine.run(plan(MIXED_PAIRS, MIXED), arrived)  # returns: no pair waits forever
    assert engine.stopped == "the reader went away"
    _on_its_board(results)
    ran = {r.board for r in results}
    assert len(ran) == 1  # one slot: the shard running at stop() finished, no other lane started one
    (board,) = (b for b in MIXED if b.id in ran)
    assert 0 < len(results) <= len([p for p in MIXED_PAIRS if p.target in board.targets]) < len(MIXED_PAIRS)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_pairs_no_board_is_left_for_are_reported_on_the_board_they_were_routed_to() -> None:
    """kfd-1's lane breaks: its pairs end as errors on kfd-1, never on a NULL board that happened to notice."""
    results: list[Result] = []
    engine = FarmEngine(MIXED, _InstantRunner("kfd-1"), run_id="r", workers=2)
    engine.run(plan(MIXED_PAIRS, MIXED), results.append)
    _on_its_board(results)
    kfd = [r for r in results if r.target == "MOCKKFD+AMD"]
    assert len(kfd) == 4 and {(r.board, r.outcome) for r in kfd} == {("kfd-1", "error")}
    assert all("no eligible board left (kfd-1: engine error on this lane" in r.reason for r in kfd)
    assert {r.outcome for r in results if r.target == "NULL"} == {"passed"}


class _FedInstantRunner:
    """Fed shards without processes: each test the engine feeds starts and passes at once; ``late``'s shard waits
    until every other shard has finished before it asks for its first test."""

    host = "here"
    feeds = True

    def __init__(self, late: str) -> None:
        self.late, self.others_done = late, threading.Event()

    def run(self, job: ShardJob, on_event: Callable[[Event], None], next_arg: Callable[[], str | None]) -> ShardExit:
        if job.board.id == self.late:
            self.others_done.wait(timeout=30)
        while (node := next_arg()) is not None:
            on_event({"event": "start", "nodeid": node})
            reports = [{"nodeid": node, "when": when, "outcome": "passed", "duration": 0.01, "longrepr": None}
                       for when in ("setup", "call", "teardown")]  # fmt: skip
            on_event({"event": "result", "nodeid": node, "reports": reports})
        if job.board.id != self.late:
            self.others_done.set()
        return ShardExit(None)


def test_a_fed_lane_that_runs_out_takes_the_pairs_still_queued_on_another_lane() -> None:
    boards = MIXED[1:]  # two NULL boards, one lane each
    pairs = [p for p in MIXED_PAIRS if p.target == "NULL"]
    work = plan(pairs, boards, workers=2)
    late = next(lane.board for lane in work.shards)
    results: list[Result] = []
    FarmEngine(boards, _FedInstantRunner(late), run_id="r", workers=2).run(work, results.append)
    assert sorted(r.key for r in results) == sorted(p.key for p in pairs)  # each pair once
    assert {r.board for r in results} == {b.id for b in boards} - {late}  # the other lane took the late one's pairs
