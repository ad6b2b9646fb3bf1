"""``tinyhil farm run``: collect a suite once, probe the boards, plan, run on the local engine, journal, report.

1. The inventory: the hardware map, or one emulated board per available emulated target (``--workers`` slots).
2. Health: every board that needs a probe is probed; BAD, maintenance and retired boards take no work. A target
   named with ``--target`` that no GOOD board serves fails the run at start (exit 3) unless ``--allow-unavailable``.
3. Collection: ``pytest --collect-only --hil-collect`` over the targets the GOOD boards serve (``pairs.json``).
4. The plan (:mod:`~tinyhil.device_farm.planner`), with durations kept from earlier runs in the farm's state.
5. The local engine runs it; every attempt is appended to ``journal.jsonl`` as it arrives. ``--resume DIR`` runs
   only the pairs of that run with no final result.
6. Reports from the journal: ``summary.json``, ``junit.xml`` (:mod:`~tinyhil.device_farm.reports`) and the
   self-contained ``report.html`` (:mod:`~tinyhil.device_farm.report_html`). ``summary.json`` says ``"complete":
   true`` when every pair has its final result; a run its closed output stopped (``tinyhil run | head -1``: no
   further shard starts, the running ones finish, exit status 141) says ``false``, with the reason
   (``incomplete``) and the pairs left without a result (``missing``), and the HTML page and junit.xml say so too.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from tinyhil._files import write_atomically
from tinyhil.device_farm._pipes import OUTPUT_CLOSED, OUTPUT_CLOSED_EXIT_STATUS, silence
from tinyhil.device_farm.engine import EngineLost, FarmEngine, LocalEngine, Result
from tinyhil.device_farm.health import HealthBook, ProbeResult
from tinyhil.device_farm.hwmap import Board, HardwareMap
from tinyhil.device_farm.journal import Journal, read_journal
from tinyhil.device_farm.matrix import render_matrix
from tinyhil.device_farm.planner import Pair, plan
from tinyhil.device_farm.probes import probe_board
from tinyhil.device_farm.quarantine import Quarantine
from tinyhil.device_farm.report_html import write_report
from tinyhil.device_farm.reports import PairReport, failed, farm_summary, pair_reports, totals_line, write_junit
from tinyhil.device_farm.runner import JUNIT_NAME, SUMMARY_NAME, pytest_command
from tinyhil.device_farm.shard_process import shard_command
from tinyhil.errors import InvalidArgument
from tinyhil.fixtures.summary import target_entry, write_summary
from tinyhil.loading import LIMITS, Fields, FileFormatError, parse_json, read_capped
from tinyhil.printable import printable
from tinyhil.registry import default_registry

if TYPE_CHECKING:
    from tinyhil.device_farm.dask_engine import DaskSession

__all__ = [
    "DURATIONS_NAME",
    "EXIT_ENGINE_LOST",
    "EXIT_NO_BOARD",
    "JOURNAL_NAME",
    "PAIRS_NAME",
    "REPORT_NAME",
    "CollectionFailed",
    "DaskOptions",
    "FarmRun",
    "Progress",
    "parse_subset",
    "run_farm",
    "select_pairs",
]

EXIT_NO_BOARD: Final = 3
EXIT_ENGINE_LOST: Final = 4
JOURNAL_NAME: Final = "journal.jsonl"
PAIRS_NAME: Final = "pairs.json"
DURATIONS_NAME: Final = "durations.json"
_TEXT_MAX_CHARS: Final = LIMITS["pairs"].max_bytes  # a node id or a skip reason is kept whole: the file's cap bounds it
_DURATION_MAX_S: Final = 1e9  # a kept duration past 30 years is damage, not a measurement
REPORT_NAME: Final = "report.html"


@dataclass(frozen=True, slots=True)
class DaskOptions:
    """Run on a Dask cluster (:mod:`~tinyhil.device_farm.dask_engine`): its scheduler and how long a board may go
    unoffered, or the scheduler unreachable, before the run counts it lost."""

    scheduler: str
    board_grace_s: float = 15.0
    scheduler_grace_s: float = 5.0


@dataclass(frozen=True, slots=True)
class FarmRun:
    """What to run and where: the inventory (``None`` on Dask: what the workers offer), the suite, the run
    directory and the farm's state directory; ``dask`` runs it on a Dask cluster instead of this host."""

    hwmap: HardwareMap | None
    suite: tuple[str, ...]
    run_dir: Path
    state_dir: Path
    workers: int
    pyargs: bool = True
    pytest_args: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    allow_unavailable: bool = False
    quarantine: Quarantine | None = None
    resume: bool = False
    subset: tuple[int, int] | None = None  # (i, N): the i-th of N parts, 1-based
    subset_seed: int = 0
    quarantine_verify: bool = False
    dask: DaskOptions | None = None


class CollectionFailed(InvalidArgument):
    """Collecting the suite failed: ``exitstatus`` is pytest's (4 it refused its arguments, 5 nothing collected)."""

    def __init__(self, exitstatus: int, output: str) -> None:
        tail = " | ".join(output.strip().splitlines()[-5:])
        what = {5: "no test was collected"}.get(exitstatus, f"collecting the suite failed (pytest exit {exitstatus})")
        super().__init__(f"{what}: {tail}" if tail and exitstatus != 5 else what)
        self.exitstatus = exitstatus


def _collect(run: FarmRun, targets: Sequence[str]) -> list[dict[str, Any]]:
    pairs_path = run.run_dir / PAIRS_NAME
    command = [*pytest_command(run.run_dir), "--collect-only", "-q", "-p", "no:xdist", "--hil-collect",
               str(pairs_path), *(["--pyargs"] if run.pyargs else []), *run.suite,
               *(f"--hil-target={t}" for t in targets), *run.pytest_args]  # fmt: skip
    done = subprocess.run(command, cwd=run.run_dir, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not pairs_path.exists():
        raise CollectionFailed(done.returncode, done.stdout + done.stderr)
    return _read_pairs(pairs_path)


def _read_pairs(path: Path) -> list[dict[str, Any]]:
    """The pairs ``--hil-collect`` wrote to ``path``, each field the run reads typed: ``arg``, ``target`` (a string or
    null), ``requires`` (strings), ``skip`` (a reason or null).

    Raises:
        FileFormatError: over ``LIMITS["pairs"]``, not JSON, or a pair's field missing or of the wrong type.
    """
    pairs = Fields(parse_json(read_capped(path, "pairs"), path), path).of_type("pairs", list)
    assert pairs is not None
    for number, pair in enumerate(pairs):
        fields = Fields(pair, path, prefix=f"pairs[{number}].")
        fields.string("arg", max_len=_TEXT_MAX_CHARS)
        requires = fields.of_type("requires", list)
        if not all(isinstance(item, str) for item in requires or ()):
            raise fields.error("requires", f"{requires!r:.60}, expected a list of strings")
        for name in ("target", "skip"):  # read as pair[name]: present, a string or null
            if name not in fields.table:
                raise fields.error(name, "missing, expected a string or null")
            fields.string(name, required=False, max_len=_TEXT_MAX_CHARS, empty=name == "skip")
    return pairs


def _durations(state_dir: Path) -> dict[str, float]:
    """Durations kept from earlier runs; a file that cannot be used is a fresh start (it only orders the work)."""
    try:
        known = parse_json(read_capped(state_dir / DURATIONS_NAME, "durations"), state_dir / DURATIONS_NAME)
    except FileFormatError:
        return {}
    if not isinstance(known, dict):
        return {}
    return {str(k): float(v) for k, v in known.items() if type(v) in (int, float) and 0 <= v < _DURATION_MAX_S}


def _save_durations(state_dir: Path, known: dict[str, float]) -> None:
    write_atomically(state_dir / DURATIONS_NAME, json.dumps(known, sort_keys=True))


def _good_boards(hwmap: HardwareMap, health: HealthBook, out: TextIO) -> list[Board]:
    good = []
    for board in hwmap.boards:
        if health.ready(board, probe_board):
            good.append(board)
        else:
            record = health.record(board.id)
            print(f"board {board.id}: {record.state.value} ({record.reason}); it takes no work", file=out)
    return good


def run_farm(run: FarmRun, out: TextIO | None = None, *, clock: Callable[[], float] = time.time) -> int:
    """Run ``run``; returns the exit status (0 passed, 1 a test failed, 3 a named target has no GOOD board, or a
    shard no online Dask worker can serve, 4 the Dask scheduler went away, 141 ``out`` closed mid-run: no further
    test started, the running shards finished, and the reports say whether every pair has its result)."""
    out = out or sys.stdout
    run.run_dir.mkdir(parents=True, exist_ok=True)
    if run.dask is None:
        if run.hwmap is None:
            raise InvalidArgument("a local farm run needs a hardware map (hwmap=None is for Dask runs)")
        return _run_farm(run, run.hwmap, out, clock, None)
    from tinyhil.device_farm.dask_engine import DaskSession  # the farm extra: imported only for Dask runs

    try:
        session = DaskSession(run.dask.scheduler, run_id=_run_id(run), board_grace_s=run.dask.board_grace_s,
                              scheduler_grace_s=run.dask.scheduler_grace_s)  # fmt: skip
    except EngineLost as exc:
        print(f"tinyhil farm run: {exc}", file=out)
        return EXIT_ENGINE_LOST
    try:
        print(f"tinyhil farm run: Dask scheduler {run.dask.scheduler}; workers: {session.describe_workers()}",
              file=out)  # fmt: skip
        hwmap = run.hwmap or HardwareMap(f"(farm workers at {run.dask.scheduler})", tuple(session.offered()))
        return _run_farm(run, hwmap, out, clock, session)
    finally:
        session.close()


def _run_id(run: FarmRun) -> str:
    """The run's id: the resumed run's, else a new one."""
    previous = read_journal(run.run_dir / JOURNAL_NAME) if run.resume else None
    return str(previous.run["run_id"]) if previous is not None and previous.run else uuid.uuid4().hex[:12]


def _dask_boards(hwmap: HardwareMap, offered: Sequence[Board], health: HealthBook, out: TextIO) -> list[Board]:
    """The map's boards some online worker offers (GOOD: the worker probed them); the others take no work."""
    ids = {board.id for board in offered}
    for board in hwmap.boards:
        if board.id in ids:
            health.record_probe(board.id, ProbeResult(True, "offered by a farm worker"))
        else:
            print(f"board {board.id}: no online worker offers it; it takes no work", file=out)
    return [board for board in hwmap.boards if board.id in ids]


def _run_farm(run: FarmRun, hwmap: HardwareMap, out: TextIO, clock: Callable[[], float],
              session: DaskSession | None) -> int:  # fmt: skip
    health = HealthBook(hwmap.boards, clock=clock, state_dir=run.state_dir if session is None else None)
    boards = _good_boards(hwmap, health, out) if session is None else _dask_boards(hwmap, session.offered(),
                                                                                   health, out)  # fmt: skip
    # On Dask a mapped board no worker offers is collected too: its shards fail the run with the precise message.
    served = sorted({t for b in (boards if session is None else hwmap.boards) for t in b.targets})
    missing = [t for t in run.targets if t not in served]
    if missing and not run.allow_unavailable:
        print(f"tinyhil farm run: no GOOD board serves {', '.join(missing)}; pass --allow-unavailable", file=out)
        return EXIT_NO_BOARD
    targets = [t for t in served if not run.targets or t in run.targets]
    if run.allow_unavailable:  # collected anyway: the plugin skips a target that cannot run here, naming why
        targets += [t for t in missing if t not in targets]
    if not targets:
        print("tinyhil farm run: no GOOD board to run on", file=out)
        return EXIT_NO_BOARD
    journal_path = run.run_dir / JOURNAL_NAME
    if not run.resume:  # a new run in a directory used before starts its own journal
        journal_path.unlink(missing_ok=True)
    previous = read_journal(journal_path) if run.resume else None
    run_id = session.runner.run_id if session is not None else _run_id(run)
    collected = _collect(run, targets)
    pairs = [Pair(p["arg"], p["target"], frozenset(p["requires"])) for p in collected if p["target"]]
    with Journal(journal_path) as journal:
        if previous is None or previous.run is None:
            journal.append({"kind": "run", "run_id": run_id, "started": clock(), "pairs": len(pairs)})
        done = set(previous.final) if previous is not None else set()
        for line, problem in previous.corrupt if previous is not None else ():
            print(f"journal line {line} is corrupt ({problem}); its test runs again", file=out)
        todo = [p for p in select_pairs(run, pairs) if p.key not in done]
        skipped = {p["arg"]: p["skip"] for p in collected if p["skip"]}
        known = _durations(run.state_dir)
        routed = [p for p in todo if p.node_id not in skipped]
        if session is not None:
            problems = session.unservable(routed, hwmap.boards, boards)
            if problems and not run.allow_unavailable:
                for problem in problems:
                    print(f"tinyhil farm run: {problem}", file=out)
                return EXIT_NO_BOARD
        work = plan(routed, boards, durations=known, workers=run.workers)
        for pair in todo:
            if pair.node_id in skipped:
                journal.append(Result(pair.key, pair.node_id, pair.target, "-", "-", 1, "skipped", 0.0,
                                      skipped[pair.node_id]).record())  # fmt: skip
        for unroutable in work.unroutable:
            pair = unroutable.pair
            journal.append(Result(pair.key, pair.node_id, pair.target, "-", "-", 1, "error", 0.0,
                                  unroutable.reason).record())  # fmt: skip
        progress = Progress(len(todo), out)

        def arrived(result: Result) -> None:
            journal.append(result.record())
            if result.final and result.outcome == "passed":
                known[result.key] = result.duration_s
            progress.show(result)

        engine: FarmEngine
        if session is None:
            engine = LocalEngine(boards, command=shard_command(run.run_dir, ()), cwd=run.run_dir,
                                 lease_dir=run.state_dir / "leases", run_id=run_id, workers=run.workers,
                                 health=health, probe=probe_board, pytest_args=run.pytest_args)  # fmt: skip
        else:
            engine = FarmEngine(boards, session.runner, run_id=run_id, workers=run.workers, health=health,
                                probe=session.runner.probe, pytest_args=run.pytest_args)  # fmt: skip
        progress.on_closed = engine.stop
        try:
            engine.run(work, arrived, progress.started)
        except EngineLost as exc:
            progress.close()
            final = len(read_journal(journal_path).final)
            print(f"tinyhil farm run: {exc}; the journal keeps the {final} results that arrived "
                  f"({journal_path}); finish the run with --resume {run.run_dir}", file=out)  # fmt: skip
            return EXIT_ENGINE_LOST
        progress.close()
    _save_durations(run.state_dir, known)
    journal_state = read_journal(journal_path)
    reports = pair_reports(journal_state, run.quarantine, dt.date.today())
    status = OUTPUT_CLOSED_EXIT_STATUS if progress.closed else 1 if failed(reports) else 0
    states = [(b, health.record(b.id)) for b in hwmap.boards]
    described = _described(targets)
    extra = {"run_id": run_id, "exitstatus": status, "targets": described,
             "boards": [{"board": b.id, "host": b.host, "health": r.state.value, "reason": r.reason}
                        for b, r in states], **_completeness(todo, journal_state.final, engine.stopped)}  # fmt: skip
    write_summary(run.run_dir / SUMMARY_NAME, farm_summary(reports, extra))
    write_junit(run.run_dir / JUNIT_NAME, reports, f"tinyhil farm run {run_id}", incomplete=extra.get("incomplete"))
    write_report(run.run_dir / REPORT_NAME, reports, extra)
    if not progress.closed:
        _print_results(run, reports, described, out)
    return status


def _completeness(todo: Sequence[Pair], final: Mapping[str, Any], stopped: str | None) -> dict[str, Any]:
    """``{"complete": True}`` when every pair of the run has its final result, else ``complete: false`` with the
    reason (``incomplete``) and the pairs left without a result (``missing``, their keys)."""
    missing = [pair.key for pair in todo if pair.key not in final]
    if not missing:
        return {"complete": True}
    why = f"stopped: {stopped}" if stopped else "the engine ended early"
    reason = f"{why}; {len(missing)} of {len(todo)} pairs have no result"
    return {"complete": False, "incomplete": reason, "missing": missing}


def _described(targets: Sequence[str]) -> list[dict[str, Any]]:
    """The run's targets as the summary lists them: availability here, with the reason, and capabilities."""
    described = []
    for name in targets:
        resolved = default_registry().resolve(name)
        described.append(target_entry(name, resolved.unavailable_reason(), resolved.capabilities))
    return described


def _print_results(run: FarmRun, reports: Sequence[PairReport], described: Sequence[Mapping[str, Any]],
                   out: TextIO) -> None:  # fmt: skip
    results = [dict(r.final) for r in reports]
    print(file=out)
    print(render_matrix(results, [str(d["name"]) for d in described]), file=out)
    print(file=out)
    print(f"totals: {totals_line(reports)}", file=out)
    for target in described:
        if not target["available"]:
            skipped = sum(1 for r in results if r["target"] == target["name"] and r["outcome"] == "skipped")
            tests = "test" if skipped == 1 else "tests"
            print(f"unavailable: {target['name']}: {skipped} {tests} skipped ({target['reason']})", file=out)
    if run.quarantine is not None:
        for entry in run.quarantine.expired(dt.date.today()):
            print(f"quarantine entry at {run.quarantine.path}:{entry.line} expired: {entry}", file=out)
    print(f"reports: {run.run_dir / JUNIT_NAME} {run.run_dir / SUMMARY_NAME} {run.run_dir / REPORT_NAME}", file=out)


def parse_subset(text: str) -> tuple[int, int]:
    """``"i/N"`` (1 <= i <= N) as ``(i, N)``.

    Raises:
        InvalidArgument: not two integers with 1 <= i <= N.
    """
    part, _, count = text.partition("/")
    try:
        i, n = int(part), int(count)
    except ValueError:
        raise InvalidArgument(f"--subset {text!r}, expected i/N such as 2/4") from None
    if not 1 <= i <= n:
        raise InvalidArgument(f"--subset {text!r}, expected 1 <= i <= N")
    return i, n


def select_pairs(run: FarmRun, pairs: Sequence[Pair]) -> list[Pair]:
    """The pairs this run covers: with ``quarantine_verify`` only those an active quarantine entry names (by test
    and target; the board is not known before planning), and with ``subset`` the ``i``-th of ``N`` parts of a
    shuffle seeded with ``subset_seed`` (every CI job computes the same parts, each pair in exactly one)."""
    chosen = list(pairs)
    if run.quarantine_verify:
        if run.quarantine is None:
            raise InvalidArgument("--quarantine-verify runs the quarantined tests, expected --quarantine FILE too")
        active = run.quarantine.active(dt.date.today())
        chosen = [p for p in chosen if any(e.matches(p.node_id, p.target, board=None) for e in active)]
    if run.subset is not None:
        i, n = run.subset
        order = sorted(chosen, key=lambda p: p.key)
        random.Random(run.subset_seed).shuffle(order)
        picked = {p.key for p in order[i - 1 :: n]}
        chosen = [p for p in chosen if p.key in picked]
    return chosen


class Progress:
    """Tests done / total, failures, and what each board is running: one updating line in a terminal; a plain line
    per result otherwise (a log has no use for the in-between states).

    When the output's reader goes away (``tinyhil run | head -1``), :attr:`closed` turns true, the rest of the
    output goes to ``os.devnull``, and ``on_closed`` is called once with :data:`OUTPUT_CLOSED` (the run stops).
    """

    def __init__(self, total: int, out: TextIO, on_closed: Callable[[str], None] | None = None) -> None:
        self.total, self.out, self.done, self.failures = total, out, 0, 0
        self.live = bool(getattr(out, "isatty", lambda: False)())
        self.running: dict[str, str] = {}  # node id -> board
        self.closed = False
        self.on_closed = on_closed

    def _write(self, text: str) -> None:
        if self.closed:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            self.closed = True
            silence(self.out)
            if self.on_closed is not None:
                self.on_closed(OUTPUT_CLOSED)

    def started(self, board: str, nodeid: str) -> None:
        self.running[nodeid] = board
        if self.live:
            self._redraw()

    def _redraw(self) -> None:
        shown = sorted((board, nodeid.rpartition("::")[2]) for nodeid, board in self.running.items())
        boards = ", ".join(f"{board}: {test}" for board, test in shown)
        status = f"{self.done}/{self.total} done, {self.failures} failed | {boards}"
        self._write("\r\x1b[2K" + printable(status[:200], newlines=False))

    def show(self, result: Result) -> None:
        if not result.final:
            line = f"retry {result.nodeid} ({result.board}: {result.infrastructure})"
        else:
            self.done += 1
            self.failures += result.outcome in ("failed", "error")
            line = f"[{self.done}/{self.total}] {result.outcome} {result.nodeid} on {result.board}"
        line = printable(line, newlines=False)  # test ids and reasons come from files and shards
        self.running.pop(result.nodeid, None)
        if self.live:
            if result.outcome in ("failed", "error") or not result.final:  # failures stay visible above the line
                self._write("\r\x1b[2K" + line + "\n")
            self._redraw()
        else:
            self._write(line + "\n")

    def close(self) -> None:
        if self.live:
            self._write("\n")
