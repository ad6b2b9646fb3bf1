"""A farm run: how one is made from what was asked for (:func:`new_run`, the one constructor behind ``tinyhil run``
and ``tinyhil farm run``), and how it runs (:func:`run_farm`).

Making a run checks everything before anything starts: the targets (:func:`choose_targets`: ``--target``, else
``$DEV``, else the default), the shard count, the suites, the report directory and the pytest arguments (none that
the run sets itself, :data:`MANAGED_PYTEST_OPTIONS`). Running it:

1. The inventory: the hardware map, or one emulated board per available emulated target (``--workers`` slots).
2. Health: every board that needs a probe is probed under its lease (a busy one stays in, and its lane probes it
   before its first shard); BAD, maintenance and retired boards take no work. A target
   named with ``--target`` that no GOOD board serves fails the run at start (:data:`EXIT_UNAVAILABLE`) unless
   ``allow_unavailable``.
3. Collection (:mod:`~tinyhil.device_farm.collection`): ``pytest --collect-only --hil-collect`` over the targets
   the GOOD boards serve (``pairs.json``).
4. The plan (:mod:`~tinyhil.device_farm.planning`), with durations kept from earlier runs in the farm's state.
5. The engine (:mod:`~tinyhil.device_farm.engine`) runs it, its shards taking the boards' leases in the host-wide
   lock directory (``lock_dir``) and waiting for a busy board up to ``lease_wait_s`` and the deadline (``None``: as
   long as it takes; one line says so, and nothing is charged to the board); every attempt is appended to
   ``journal.jsonl`` as it arrives, after the run's header (:mod:`~tinyhil.device_farm.run_header`: what the run is).
   ``resume`` runs the header's run again, collected over the header's targets, refusing one whose suite, map or
   pairs changed, and runs only its pairs with no final result. A run past its deadline (``deadline_at``;
   :meth:`FarmRun.remaining_s` says how long is left) or interrupted (Ctrl-C) starts no further test and ends the
   running shards; their tests are left without a result for ``--resume``.
6. Reports from the journal (:mod:`~tinyhil.device_farm.reports`): ``summary.json``, ``junit.xml`` and the
   self-contained ``report.html``. ``summary.json`` says ``"complete": true`` when every pair has its final result;
   a run its closed output stopped (``tinyhil run | head -1``: no further shard starts, the running ones finish,
   exit status 141; the deadline; Ctrl-C) says ``false``, with the reason (``incomplete``) and the pairs left
   without a result (``missing``), and the HTML page and junit.xml say so too.
7. History (:mod:`~tinyhil.device_farm.history`): the run is recorded where it is driven, and its report marks
   each failure new, known or flaky; ``--last-failed`` narrows step 4 to the pairs that failed in the previous run
   of the suite, and the planner takes expected durations from history too. ``--on-finish`` then runs once.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import shlex
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from tinyhil.device_farm.cluster.dask_cluster import DEFAULT_BOARD_GRACE_S, DEFAULT_SCHEDULER_GRACE_S
from tinyhil.device_farm.collection import (
    NO_TESTS_COLLECTED,
    PAIRS_NAME,
    CollectionFailed,
    collect,
    read_pairs,
    report_id,
)
from tinyhil.device_farm.engine import EngineLost, FarmEngine, Result
from tinyhil.device_farm.engine.local import LocalEngine, LocalRunner
from tinyhil.device_farm.finish_hook import run_on_finish
from tinyhil.device_farm.health.leased import LeasedProbe
from tinyhil.device_farm.health.ready import good_boards, offered_boards, recording
from tinyhil.device_farm.health.states import DEFAULT_BAD_AFTER, HealthBook
from tinyhil.device_farm.history import HistorySettings, durations_from_history, last_failed_pairs, record
from tinyhil.device_farm.history.facts import run_facts, suite_key
from tinyhil.device_farm.inventory.hwmap import HardwareMap
from tinyhil.device_farm.journal import JOURNAL_NAME, Journal, read_journal
from tinyhil.device_farm.planning import Pair, plan, read_durations, save_durations, select_pairs
from tinyhil.device_farm.quarantine import Quarantine
from tinyhil.device_farm.reports import JUNIT_NAME, REPORT_NAME, SUMMARY_NAME
from tinyhil.device_farm.reports.html import write_report
from tinyhil.device_farm.reports.metadata import run_metadata
from tinyhil.device_farm.reports.progress import Progress, print_results
from tinyhil.device_farm.reports.summary import (
    failed,
    farm_summary,
    pair_reports,
    quarantined_by,
    run_completeness,
    write_junit,
)
from tinyhil.device_farm.run_header import check_pairs, check_sources, header_record, read_header
from tinyhil.device_farm.shard.parent import shard_command
from tinyhil.device_farm.shard.served import described_targets, served_collection, served_targets
from tinyhil.device_farm.state import lock_dir
from tinyhil.device_farm.target_choice import TargetChoice, TargetsUnavailable, choose_targets
from tinyhil.errors import InvalidArgument
from tinyhil.fixtures import SUITE_PACKAGE
from tinyhil.fixtures.summary import write_summary
from tinyhil.pipes import OUTPUT_CLOSED_EXIT_STATUS
from tinyhil.printable import printable

if TYPE_CHECKING:
    from tinyhil.device_farm.engine.dask_runner import DaskSession

__all__ = [
    "EXIT_DEADLINE",
    "EXIT_ENGINE_LOST",
    "EXIT_INTERRUPTED",
    "EXIT_UNAVAILABLE",
    "MANAGED_PYTEST_OPTIONS",
    "DaskOptions",
    "FarmRun",
    "TargetChoice",
    "TargetsUnavailable",
    "check_run_arguments",
    "choose_targets",
    "new_run",
    "resolve_suite",
    "resume_command",
    "run_farm",
]

EXIT_UNAVAILABLE: Final = 3
"""A run cannot go where it was asked to: a target named explicitly cannot run here, or no GOOD board (no online
Dask worker) serves it; ``tinyhil farm worker`` exits with it when no scheduler answers."""
EXIT_ENGINE_LOST: Final = 4
"""The Dask scheduler went away mid-run; the journal keeps what arrived (``--resume`` finishes the run)."""
EXIT_DEADLINE: Final = 124
"""The run's deadline passed before every pair had its result (as ``timeout(1)`` exits); the reports say which are
missing and ``--resume`` finishes the run."""
EXIT_INTERRUPTED: Final = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C ended
DEADLINE_PASSED: Final = "the run's deadline passed"  # the stop reason the deadline gives (reports, exit status)
# Options a run sets itself: given again through pytest_args they would run targets, or write reports, that the
# run's header, matrix and report directory do not name.
MANAGED_PYTEST_OPTIONS: Final = {
    "--hil-target": "--target",
    "--hil-summary": "--report",
    "--junitxml": "--report",
    "--junit-xml": "--report",
}
COMMANDS: Final = ("farm run", "run")  # the commands that make a run, as its header and the resume command name them


@dataclass(frozen=True, slots=True)
class DaskOptions:
    """Run on a Dask cluster (:mod:`~tinyhil.device_farm.engine.dask_runner`): its scheduler and how long a board may
    go unoffered, or the scheduler unreachable, before the run counts it lost."""

    scheduler: str
    board_grace_s: float = DEFAULT_BOARD_GRACE_S
    scheduler_grace_s: float = DEFAULT_SCHEDULER_GRACE_S


@dataclass(frozen=True, slots=True)
class FarmRun:
    """What to run and where: the inventory (``None`` on Dask: what the workers offer), the suite, the run
    directory and the farm's state directory; ``dask`` runs it on a Dask cluster instead of this host. Made by
    :func:`new_run`, which checks every field that comes from a user."""

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
    history: HistorySettings | None = None
    on_finish: tuple[str, ...] = ()  # argv; the summary's path is added
    command: str = COMMANDS[0]  # the tinyhil command that runs it (its header says so; --resume goes through it)
    reruns: int = 0  # a failing test runs up to this many more times; one that then passes is flaky
    deadline_at: float | None = None  # time.time() past which the run starts no test and ends the running ones
    command_line: tuple[str, ...] = ()  # the command line its reports name (default: this process's sys.argv)
    lock_dir: Path | None = None  # the host-wide lock directory (None: tinyhil.device_farm.state.lock_dir's default)
    lease_wait_s: float | None = None  # how long to wait for a busy board (None: as long as it takes)
    bad_after: int = DEFAULT_BAD_AFTER  # infrastructure failures in a row that make a board BAD
    test_timeout_s: float = 0.0  # --test-timeout: each test's limit unless its hil marker gives one; 0: none

    def remaining_s(self, clock: Callable[[], float] = time.time) -> float | None:
        """Seconds left before the run's deadline (0 once past it), or ``None`` for a run with no deadline: the
        longest any wait of the run (for a busy board's lease, say) may take."""
        return None if self.deadline_at is None else max(0.0, self.deadline_at - clock())


def _is_importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def check_run_arguments(report_dir: Path, suite: Sequence[str], pytest_args: Sequence[str]) -> None:
    """Check what a run needs before it starts: a report directory that can be created, suites that exist, and no
    pytest option that the run manages itself.

    Raises:
        InvalidArgument: the first problem, naming the bad value and what was expected.
    """
    for arg in pytest_args:
        option = arg.split("=", 1)[0]
        if option in MANAGED_PYTEST_OPTIONS:
            raise InvalidArgument(
                f"pytest argument {arg!r}: the run sets {option} itself; use {MANAGED_PYTEST_OPTIONS[option]} instead"
            )
    for entry in suite:
        if not Path(entry).exists() and not _is_importable(entry):
            raise InvalidArgument(f"suite {entry!r}: no such file or directory, and no importable package of that name")
    if report_dir.exists() and not report_dir.is_dir():
        raise InvalidArgument(f"report directory {str(report_dir)!r} is a file, expected a directory")
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidArgument(
            f"report directory {str(report_dir)!r} cannot be created ({exc.strerror or type(exc).__name__})"
        ) from None


def resolve_suite(suite: Sequence[str]) -> tuple[str, ...]:
    """The suite's entries as a run keeps them: paths made absolute, packages as named (none: the portable
    suite)."""
    return tuple(str(Path(e).resolve()) if Path(e).exists() else e for e in (tuple(suite) or (SUITE_PACKAGE,)))


def new_run(hwmap: HardwareMap | Callable[[int], HardwareMap] | None, suite: Sequence[str], run_dir: Path,
            state_dir: Path, workers: int, *, pytest_args: Sequence[str] = (), targets: Sequence[str] = (),
            deadline_s: float | None = None, **options: Any) -> FarmRun:  # fmt: skip
    """The run of ``suite`` (empty: the portable suite, :data:`~tinyhil.fixtures.SUITE_PACKAGE`) on ``hwmap`` with
    ``workers`` shards at once, its reports in ``run_dir``: checked (:func:`check_run_arguments`; ``run_dir`` is
    created), suite paths made absolute (the run's pytest processes work in ``run_dir``). ``hwmap`` may be a
    function of the checked shard count that makes the map (emulated boards with a slot per shard), or ``None`` on
    Dask (what the workers offer). ``deadline_s`` ends the run that many seconds from now. ``options`` are the
    other fields of :class:`FarmRun`.

    Raises:
        InvalidArgument: ``workers`` < 1, ``reruns`` < 0, ``deadline_s`` <= 0, a ``test_timeout_s`` that is not
            seconds >= 0, or a problem
            :func:`check_run_arguments` finds.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidArgument(f"--workers {workers!r}, expected an integer >= 1")
    reruns = options.get("reruns", 0)
    if isinstance(reruns, bool) or not isinstance(reruns, int) or reruns < 0:
        raise InvalidArgument(f"--reruns {reruns!r}, expected an integer >= 0")
    if deadline_s is not None and not deadline_s > 0:
        raise InvalidArgument(f"--deadline {deadline_s!r} s, expected a duration > 0")
    if options.get("command", COMMANDS[0]) not in COMMANDS:
        raise InvalidArgument(f"command {options['command']!r}, expected one of {', '.join(COMMANDS)}")
    deadline_at = None if deadline_s is None else time.time() + deadline_s
    timeout_s = options.get("test_timeout_s", 0.0)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 <= timeout_s < float("inf"):
        raise InvalidArgument(f"--test-timeout {timeout_s!r}, expected seconds >= 0 (0: no limit)")
    entries = tuple(suite) or (SUITE_PACKAGE,)
    check_run_arguments(run_dir, entries, pytest_args)
    absolute = resolve_suite(entries)
    boards = hwmap(workers) if callable(hwmap) else hwmap
    return FarmRun(boards, absolute, run_dir.resolve(), state_dir, workers, pyargs=not suite,
                   pytest_args=tuple(pytest_args), targets=tuple(targets), deadline_at=deadline_at,
                   **options)  # fmt: skip


def resume_command(run: FarmRun) -> str:
    """The command that finishes ``run``: ``tinyhil farm run --resume DIR`` (or ``tinyhil run``)."""
    return f"tinyhil {run.command} --resume {shlex.quote(str(run.run_dir))}"


def _lease_wait(run: FarmRun) -> float | None:
    """How long a shard or probe of ``run`` waits for a busy board: ``lease_wait_s``, never past the deadline
    (``None``: as long as it takes)."""
    bounds = [b for b in (run.lease_wait_s, run.remaining_s()) if b is not None]
    return min(bounds) if bounds else None


def run_farm(run: FarmRun, out: TextIO | None = None, *, clock: Callable[[], float] = time.time) -> int:
    """Run ``run``; returns the exit status (0 passed, 1 a test failed, 3 a named target has no GOOD board, or a
    shard no online Dask worker can serve, 4 the Dask scheduler went away, 124 the deadline passed with pairs left
    without a result, 141 ``out`` closed mid-run: no further test started, the running shards finished, and the
    reports say whether every pair has its result).

    Raises:
        KeyboardInterrupt: Ctrl-C; the running shards were ended, the reports written (marked incomplete), and the
            command that finishes the run printed on stderr.
        RunChanged: resuming a run whose suite, map or pairs changed.
    """
    out = out or sys.stdout
    run.run_dir.mkdir(parents=True, exist_ok=True)
    if run.dask is None:
        if run.hwmap is None:
            raise InvalidArgument("a local farm run needs a hardware map (hwmap=None is for Dask runs)")
        return _run_farm(run, run.hwmap, out, clock, None)
    from tinyhil.device_farm.engine.dask_runner import DaskSession  # the farm extra: imported only for Dask runs

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


def _run_farm(run: FarmRun, hwmap: HardwareMap, out: TextIO, clock: Callable[[], float],
              session: DaskSession | None) -> int:  # fmt: skip
    started = clock()
    versions: dict[str, Mapping[str, str]] = {}  # what this run's probes read of each board
    health = HealthBook(hwmap.boards, clock=clock, state_dir=run.state_dir if session is None else None,
                        bad_after=run.bad_after)  # fmt: skip
    run_id = session.runner.run_id if session is not None else _run_id(run)
    locks = lock_dir(run.lock_dir)
    shown: list[Progress] = []  # the progress line, once it exists: a wait before it is printed as it is

    def waiting(board: str, holders: str) -> None:
        line = f"board {board}: busy, held by {holders}; waiting for it (not a fault, nothing is charged to it)"
        if shown:
            shown[0].note(line)
        else:
            print(printable(line, newlines=False), file=out, flush=True)

    prober = LeasedProbe(locks, run_id, wait_s=0.0, book=health, state_dir=run.state_dir,
                         on_wait=lambda board, holders: waiting(board.id, holders))  # fmt: skip
    if session is None:
        boards = good_boards(hwmap, health, out, recording(prober, versions))
    else:
        boards = offered_boards(hwmap, session.offered(), health, out)
    # On Dask a mapped board no worker offers is collected too: its shards fail the run with the precise message.
    served = sorted({t for b in (boards if session is None else hwmap.boards) for t in b.targets})
    missing = [t for t in run.targets if t not in served]
    if missing and not run.allow_unavailable:
        print(f"tinyhil farm run: no GOOD board serves {', '.join(missing)}; pass --allow-unavailable", file=out)
        return EXIT_UNAVAILABLE
    targets = [t for t in served if not run.targets or t in run.targets]
    if run.allow_unavailable:  # collected anyway: the plugin skips a target that cannot run here, naming why
        targets += [t for t in missing if t not in targets]
    journal_path = run.run_dir / JOURNAL_NAME
    header, previous = read_header(run.run_dir) if run.resume else (None, None)
    if header is not None:  # the run's own targets: a board gone BAD since leaves its pairs unroutable, not dropped
        check_sources(header)
        targets = list(header.collected)
    if not targets:
        print("tinyhil farm run: no GOOD board to run on", file=out)
        return EXIT_UNAVAILABLE
    if not run.resume:  # a new run in a directory used before starts its own journal
        journal_path.unlink(missing_ok=True)
    local: LocalRunner | None = None  # this host's runner, when its shards collected the suite as they started
    if session is None:
        runner = LocalRunner(shard_command(run.run_dir, ()), run.run_dir, locks, os.environ, run.workers)
        suite = (*(["--pyargs"] if run.pyargs else []), *run.suite)
        local = runner if runner.collect_suite(run_id, boards, suite, targets, run.pytest_args, run.test_timeout_s,
                                               run.run_dir / PAIRS_NAME) else None  # fmt: skip
    collected = (read_pairs(run.run_dir / PAIRS_NAME) if local is not None else
                 collect(run.run_dir, run.suite, targets, pyargs=run.pyargs, pytest_args=run.pytest_args))  # fmt: skip
    if local is not None and not collected:  # the shards collected nothing: an empty suite, as pytest says
        local.close()
        raise CollectionFailed(NO_TESTS_COLLECTED, "")
    collected = served_collection(collected, served_targets(boards))
    pairs = [Pair(p["arg"], p["target"], frozenset(p["requires"]), report_id(p, () if run.pyargs else run.suite))
             for p in collected if p["target"]]  # fmt: skip
    selected = select_pairs(pairs, quarantine=run.quarantine, quarantine_verify=run.quarantine_verify,
                            subset=run.subset, subset_seed=run.subset_seed)  # fmt: skip
    if header is None and run.history is not None and run.history.last_failed:
        selected = last_failed_pairs(selected, run.history, suite_key(run.suite), out)
    elif header is not None and header.last_failed and header.keys is not None:  # the pairs --last-failed chose then
        selected = [p for p in selected if p.key in set(header.keys)]
    if header is not None:
        check_pairs(header, [p.key for p in selected])
    with Journal(journal_path) as journal:
        if previous is None:
            journal.append(header_record(run, hwmap, run_id, started, targets, [p.key for p in selected]))
        elif previous.run is not None:  # a resumed run started when its first part did
            started = float(previous.run.get("started") or started)
        done = set(previous.final) if previous is not None else set()
        for line, problem in previous.corrupt if previous is not None else ():
            print(f"journal line {line} is corrupt ({problem}); its test runs again", file=out)
        todo = [p for p in selected if p.key not in done]
        skipped = {p["arg"]: p["skip"] for p in collected if p["skip"]}
        known = read_durations(run.state_dir) | durations_from_history(run.history, suite_key(run.suite))
        routed = [p for p in todo if p.node_id not in skipped]
        if session is not None:
            problems = session.unservable(routed, hwmap.boards, boards)
            if problems and not run.allow_unavailable:
                for problem in problems:
                    print(f"tinyhil farm run: {problem}", file=out)
                return EXIT_UNAVAILABLE
        work = plan(routed, boards, durations=known, workers=run.workers)
        today = dt.date.today()

        def quarantined(result: Result) -> bool:
            return quarantined_by(run.quarantine, result.record(), today) is not None

        progress = Progress(len(todo), out, quarantined=quarantined)
        decided = [Result(p.key, p.name, p.target, "-", "-", 1, "skipped", 0.0, skipped[p.node_id])
                   for p in todo if p.node_id in skipped]  # fmt: skip
        decided += [Result(u.pair.key, u.pair.name, u.pair.target, "-", "-", 1, "error", 0.0, u.reason)
                    for u in work.unroutable]  # fmt: skip
        for result in decided:  # results without a run: journaled and counted before any test starts
            journal.append(result.record())
            progress.show(result)
        shown.append(progress)

        def arrived(result: Result) -> None:
            journal.append(result.record())
            if result.final and result.outcome == "passed":
                known[result.key] = result.duration_s
            progress.show(result)

        engine: FarmEngine
        if session is None:
            lane_probe = LeasedProbe(locks, run_id, wait_s=_lease_wait(run), book=health, state_dir=run.state_dir,
                                     on_wait=lambda board, holders: waiting(board.id, holders))  # fmt: skip
            engine = LocalEngine(boards, command=shard_command(run.run_dir, ()), cwd=run.run_dir,
                                 lease_dir=locks, run_id=run_id, workers=run.workers, runner=local, health=health,
                                 probe=recording(lane_probe, versions), lease_timeout_s=_lease_wait(run),
                                 pytest_args=run.pytest_args, reruns=run.reruns,
                                 test_timeout_s=run.test_timeout_s)  # fmt: skip
        else:
            engine = FarmEngine(boards, session.runner, run_id=run_id, workers=run.workers, health=health,
                                probe=session.runner.probe, lease_timeout_s=_lease_wait(run),
                                pytest_args=run.pytest_args, reruns=run.reruns,
                                test_timeout_s=run.test_timeout_s)  # fmt: skip
        progress.on_closed = engine.stop
        interrupted = False
        deadline = _deadline_timer(run, engine)
        try:
            engine.run(work, arrived, progress.started, waiting)
        except EngineLost as exc:
            progress.close()
            final = len(read_journal(journal_path).final)
            print(f"tinyhil {run.command}: {exc}; the journal keeps the {final} results that arrived "
                  f"({journal_path}); finish the run with: {resume_command(run)}", file=out)  # fmt: skip
            return EXIT_ENGINE_LOST
        except KeyboardInterrupt:  # the engine ended the shards: the reports say what is missing
            interrupted = True
        finally:
            if deadline is not None:
                deadline.cancel()
        progress.close()
    save_durations(run.state_dir, known)
    journal_state = read_journal(journal_path)
    reports = pair_reports(journal_state, run.quarantine, today)
    status = OUTPUT_CLOSED_EXIT_STATUS if progress.closed else 1 if failed(reports) else 0
    completeness = run_completeness(todo, journal_state.final, engine.stopped)
    if "missing" in completeness and (engine.stopped or "").startswith(DEADLINE_PASSED):
        status = EXIT_DEADLINE
    status = EXIT_INTERRUPTED if interrupted else status
    states = [(b, health.record(b.id)) for b in hwmap.boards]
    described = described_targets(targets, served_targets(boards))
    extra = {"run_id": run_id, "exitstatus": status, "targets": described,
             "boards": [{"board": b.id, "host": b.host, "health": r.state.value, "reason": r.reason}
                        for b, r in states], **completeness}  # fmt: skip
    metadata = run_metadata(run_id=run_id, started=started, finished=clock(), command=run.command_line or sys.argv,
                            suite=run.suite, pyargs=run.pyargs, hosts=[b.host for b in hwmap.boards],
                            hwmap_path=hwmap.path, versions=versions)  # fmt: skip
    write_summary(run.run_dir / SUMMARY_NAME, farm_summary(reports, extra, metadata))
    write_junit(run.run_dir / JUNIT_NAME, reports, f"tinyhil farm run {run_id}", incomplete=extra.get("incomplete"),
                metadata=metadata)  # fmt: skip
    facts = run_facts(metadata, run.suite, run.run_dir / REPORT_NAME, exitstatus=status,
                      complete=bool(extra["complete"]))  # fmt: skip
    history = record(run.history, facts, reports, extra["boards"])
    write_report(run.run_dir / REPORT_NAME, reports, extra, metadata, history=history)
    if run.on_finish:
        run_on_finish(run.on_finish, run.run_dir / SUMMARY_NAME)
    if interrupted:  # the reports are written; the command line says it was interrupted (its exit status)
        print(f"tinyhil {run.command}: interrupted; finish the run with: {resume_command(run)}", file=sys.stderr)
        raise KeyboardInterrupt
    if not progress.closed:
        print_results(reports, described, out, run_dir=run.run_dir, quarantine=run.quarantine)
        if "incomplete" in extra:
            print(f"incomplete: {extra['incomplete']}; finish the run with: {resume_command(run)}", file=out)
    return status


def _deadline_timer(run: FarmRun, engine: FarmEngine) -> threading.Timer | None:
    """A timer that stops ``engine`` at the run's deadline, ending its running shards (``None``: no deadline)."""
    remaining = run.remaining_s()
    if remaining is None:
        return None
    reason = f"{DEADLINE_PASSED} ({dt.datetime.fromtimestamp(run.deadline_at or 0):%Y-%m-%d %H:%M:%S})"
    timer = threading.Timer(remaining, engine.stop, args=(reason,), kwargs={"kill": True})
    timer.daemon = True
    timer.start()
    return timer
