"""A farm run: how one is made from what was asked for (:func:`new_run`, the one constructor behind ``tinyhil run``
and ``tinyhil farm run``), and how it runs (:func:`run_farm`).

Making a run checks everything before anything starts: the targets (:func:`choose_targets`: ``--target``, else
``$DEV``, else the default), the shard count, the suites, the report directory and the pytest arguments (none that
the run sets itself, :data:`MANAGED_PYTEST_OPTIONS`). Running it:

1. The inventory: the hardware map, or one emulated board per available emulated target (``--workers`` slots).
2. Health: every board that needs a probe is probed; BAD, maintenance and retired boards take no work. A target
   named with ``--target`` that no GOOD board serves fails the run at start (:data:`EXIT_UNAVAILABLE`) unless
   ``allow_unavailable``.
3. Collection (:mod:`~tinyhil.device_farm.collection`): ``pytest --collect-only --hil-collect`` over the targets
   the GOOD boards serve (``pairs.json``).
4. The plan (:mod:`~tinyhil.device_farm.planning`), with durations kept from earlier runs in the farm's state.
5. The engine (:mod:`~tinyhil.device_farm.engine`) runs it; every attempt is appended to ``journal.jsonl`` as it
   arrives. ``resume`` runs only the pairs of that run with no final result.
6. Reports from the journal (:mod:`~tinyhil.device_farm.reports`): ``summary.json``, ``junit.xml`` and the
   self-contained ``report.html``. ``summary.json`` says ``"complete": true`` when every pair has its final result;
   a run its closed output stopped (``tinyhil run | head -1``: no further shard starts, the running ones finish,
   exit status 141) says ``false``, with the reason (``incomplete``) and the pairs left without a result
   (``missing``), and the HTML page and junit.xml say so too.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from tinyhil.device_farm.cluster.dask_cluster import DEFAULT_BOARD_GRACE_S, DEFAULT_SCHEDULER_GRACE_S
from tinyhil.device_farm.collection import PAIRS_NAME, collect, read_pairs, report_id
from tinyhil.device_farm.engine import EngineLost, FarmEngine, Result
from tinyhil.device_farm.engine.local import LocalEngine, LocalRunner
from tinyhil.device_farm.health.probes import probe_board
from tinyhil.device_farm.health.states import HealthBook, ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board, BoardKind, HardwareMap
from tinyhil.device_farm.journal import JOURNAL_NAME, Journal, read_journal
from tinyhil.device_farm.planning import Pair, plan, read_durations, save_durations, select_pairs
from tinyhil.device_farm.quarantine import Quarantine
from tinyhil.device_farm.reports import JUNIT_NAME, REPORT_NAME, SUMMARY_NAME
from tinyhil.device_farm.reports.html import write_report
from tinyhil.device_farm.reports.progress import Progress, print_results
from tinyhil.device_farm.reports.summary import failed, farm_summary, pair_reports, write_junit
from tinyhil.device_farm.shard.parent import ShardJob, shard_command
from tinyhil.device_farm.state import leases_dir
from tinyhil.errors import InvalidArgument, TinyHilError
from tinyhil.fixtures import SUITE_PACKAGE
from tinyhil.fixtures.options import ENV_TARGET, read_targets_from_environment
from tinyhil.fixtures.summary import target_entry, write_summary
from tinyhil.pipes import OUTPUT_CLOSED_EXIT_STATUS
from tinyhil.registry import SELECT_EMULATED, Target, TargetRegistry, default_registry

if TYPE_CHECKING:
    from tinyhil.device_farm.engine.dask_runner import DaskSession

__all__ = [
    "EXIT_ENGINE_LOST",
    "EXIT_UNAVAILABLE",
    "MANAGED_PYTEST_OPTIONS",
    "DaskOptions",
    "FarmRun",
    "TargetChoice",
    "TargetsUnavailable",
    "check_run_arguments",
    "choose_targets",
    "new_run",
    "run_farm",
]

EXIT_UNAVAILABLE: Final = 3
"""A run cannot go where it was asked to: a target named explicitly cannot run here, or no GOOD board (no online
Dask worker) serves it; ``tinyhil farm worker`` exits with it when no scheduler answers."""
EXIT_ENGINE_LOST: Final = 4
"""The Dask scheduler went away mid-run; the journal keeps what arrived (``--resume`` finishes the run)."""
# Options a run sets itself: given again through pytest_args they would run targets, or write reports, that the
# run's header, matrix and report directory do not name.
MANAGED_PYTEST_OPTIONS: Final = {
    "--hil-target": "--target",
    "--hil-summary": "--report",
    "--junitxml": "--report",
    "--junit-xml": "--report",
}
SOURCE_DEFAULT: Final = "default"


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
    test_timeout_s: float = 0.0  # --test-timeout: each test's limit unless its hil marker gives one; 0: none


class TargetsUnavailable(TinyHilError, LookupError):
    """Targets named explicitly cannot run here (the run exits :data:`EXIT_UNAVAILABLE`)."""


@dataclass(frozen=True, slots=True)
class TargetChoice:
    """The targets a run was asked for, and where the ask came from (``--target``, ``$DEV`` or ``default``)."""

    targets: tuple[Target, ...]
    source: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.targets)

    def unavailable(self) -> dict[str, str]:
        """The chosen targets that cannot run on this host, with the reason of each."""
        return {t.name: reason for t in self.targets if (reason := t.unavailable_reason()) is not None}

    def check_here(self, *, allow_unavailable: bool) -> None:
        """Check that every target named explicitly can run on this host (a default choice holds only available
        ones); ``allow_unavailable`` runs them anyway, their tests counted as skipped.

        Raises:
            TargetsUnavailable: one line naming each target, where it was named, and why it cannot run.
        """
        unavailable = self.unavailable()
        if self.source == SOURCE_DEFAULT or allow_unavailable or not unavailable:
            return
        reasons = "; ".join(f"target {name} ({self.source}) cannot run here: {why}" for name, why in unavailable.items()
                            )  # fmt: skip
        raise TargetsUnavailable(f"{reasons}; pass --allow-unavailable to run anyway and count its tests as skipped")


def choose_targets(registry: TargetRegistry, selectors: Sequence[str] | None, *, environment: bool = True,
                   default: Sequence[str] = (SELECT_EMULATED,)) -> TargetChoice:  # fmt: skip
    """The targets ``selectors`` (``--target``) name, else ``$DEV`` (with ``environment``), else ``default``.

    Raises:
        InvalidArgument: a malformed or unknown selector, or selectors that match no available target.
    """
    from_env = read_targets_from_environment() if environment else None
    if selectors:
        chosen, source = tuple(selectors), "--target"
    elif from_env:
        chosen, source = from_env, f"${ENV_TARGET}"
    else:
        chosen, source = tuple(default), SOURCE_DEFAULT
    targets = tuple(registry.select(chosen)) if chosen else ()
    if chosen and not targets:
        raise InvalidArgument(f"no available target matches {list(chosen)}; see `tinyhil targets`")
    return TargetChoice(targets, source)


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


def new_run(hwmap: HardwareMap | Callable[[int], HardwareMap] | None, suite: Sequence[str], run_dir: Path,
            state_dir: Path, workers: int, *, pytest_args: Sequence[str] = (), targets: Sequence[str] = (),
            **options: Any) -> FarmRun:  # fmt: skip
    """The run of ``suite`` (empty: the portable suite, :data:`~tinyhil.fixtures.SUITE_PACKAGE`) on ``hwmap`` with
    ``workers`` shards at once, its reports in ``run_dir``: checked (:func:`check_run_arguments`; ``run_dir`` is
    created), suite paths made absolute (the run's pytest processes work in ``run_dir``). ``hwmap`` may be a
    function of the checked shard count that makes the map (emulated boards with a slot per shard), or ``None`` on
    Dask (what the workers offer). ``options`` are the other fields of :class:`FarmRun`.

    Raises:
        InvalidArgument: ``workers`` < 1, a ``test_timeout_s`` that is not seconds >= 0, or a problem
            :func:`check_run_arguments` finds.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidArgument(f"--workers {workers!r}, expected an integer >= 1")
    timeout_s = options.get("test_timeout_s", 0.0)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 <= timeout_s < float("inf"):
        raise InvalidArgument(f"--test-timeout {timeout_s!r}, expected seconds >= 0 (0: no limit)")
    entries = tuple(suite) or (SUITE_PACKAGE,)
    check_run_arguments(run_dir, entries, pytest_args)
    absolute = tuple(str(Path(e).resolve()) if Path(e).exists() else e for e in entries)
    boards = hwmap(workers) if callable(hwmap) else hwmap
    return FarmRun(boards, absolute, run_dir.resolve(), state_dir, workers, pyargs=not suite,
                   pytest_args=tuple(pytest_args), targets=tuple(targets), **options)  # fmt: skip


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
        return EXIT_UNAVAILABLE
    targets = [t for t in served if not run.targets or t in run.targets]
    if run.allow_unavailable:  # collected anyway: the plugin skips a target that cannot run here, naming why
        targets += [t for t in missing if t not in targets]
    if not targets:
        print("tinyhil farm run: no GOOD board to run on", file=out)
        return EXIT_UNAVAILABLE
    journal_path = run.run_dir / JOURNAL_NAME
    if not run.resume:  # a new run in a directory used before starts its own journal
        journal_path.unlink(missing_ok=True)
    previous = read_journal(journal_path) if run.resume else None
    run_id = session.runner.run_id if session is not None else _run_id(run)
    local: LocalRunner | None = None  # this host's runner, when its shards collected the suite as they started
    if session is None:
        runner = LocalRunner(shard_command(run.run_dir, ()), run.run_dir, leases_dir(run.state_dir), os.environ,
                             run.workers)  # fmt: skip
        local = runner if _collect_in_shards(runner, run, run_id, boards, targets) else None
    collected = (read_pairs(run.run_dir / PAIRS_NAME) if local is not None else
                 collect(run.run_dir, run.suite, targets, pyargs=run.pyargs, pytest_args=run.pytest_args))  # fmt: skip
    pairs = [Pair(p["arg"], p["target"], frozenset(p["requires"]), report_id(p, () if run.pyargs else run.suite))
             for p in collected if p["target"]]  # fmt: skip
    with Journal(journal_path) as journal:
        if previous is None or previous.run is None:
            journal.append({"kind": "run", "run_id": run_id, "started": clock(), "pairs": len(pairs)})
        done = set(previous.final) if previous is not None else set()
        for line, problem in previous.corrupt if previous is not None else ():
            print(f"journal line {line} is corrupt ({problem}); its test runs again", file=out)
        todo = [
            p
            for p in select_pairs(
                pairs,
                quarantine=run.quarantine,
                quarantine_verify=run.quarantine_verify,
                subset=run.subset,
                subset_seed=run.subset_seed,
            )
            if p.key not in done
        ]
        skipped = {p["arg"]: p["skip"] for p in collected if p["skip"]}
        known = read_durations(run.state_dir)
        routed = [p for p in todo if p.node_id not in skipped]
        if session is not None:
            problems = session.unservable(routed, hwmap.boards, boards)
            if problems and not run.allow_unavailable:
                for problem in problems:
                    print(f"tinyhil farm run: {problem}", file=out)
                return EXIT_UNAVAILABLE
        work = plan(routed, boards, durations=known, workers=run.workers)
        for pair in todo:
            if pair.node_id in skipped:
                journal.append(Result(pair.key, pair.name, pair.target, "-", "-", 1, "skipped", 0.0,
                                      skipped[pair.node_id]).record())  # fmt: skip
        for unroutable in work.unroutable:
            pair = unroutable.pair
            journal.append(Result(pair.key, pair.name, pair.target, "-", "-", 1, "error", 0.0,
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
                                 lease_dir=leases_dir(run.state_dir), run_id=run_id, workers=run.workers,
                                 runner=local,
                                 health=health, probe=probe_board, pytest_args=run.pytest_args,
                                 test_timeout_s=run.test_timeout_s)  # fmt: skip
        else:
            engine = FarmEngine(boards, session.runner, run_id=run_id, workers=run.workers, health=health,
                                probe=session.runner.probe, pytest_args=run.pytest_args,
                                test_timeout_s=run.test_timeout_s)  # fmt: skip
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
    save_durations(run.state_dir, known)
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
        print_results(reports, described, out, run_dir=run.run_dir, quarantine=run.quarantine)
    return status


def _collect_in_shards(local: LocalRunner, run: FarmRun, run_id: str, boards: Sequence[Board],
                       targets: Sequence[str]) -> bool:  # fmt: skip
    """Collect the suite in the emulated boards' first shards (:meth:`LocalRunner.collect`), when there are any:
    the run then pays one process start-up before its first test, as pytest-xdist does. False: collect apart."""
    emulated = [board for board in boards if board.kind is BoardKind.EMULATED]
    if not emulated:
        return False
    suite = (*(["--pyargs"] if run.pyargs else []), *run.suite)
    job = ShardJob(run_id, emulated[0], emulated[0].targets[0], suite, run.pytest_args,
                   test_timeout_s=run.test_timeout_s, targets=tuple(targets))  # fmt: skip
    if local.collect(job, run.run_dir / PAIRS_NAME, sum(min(board.slots, run.workers) for board in emulated)):
        return True
    local.close()
    return False


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
