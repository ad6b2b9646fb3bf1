"""What a lab asks the history in the morning (docs/history.md, "Questions").

Every question looks at the runs of one suite (``runs.suite``), newest first, except the boards', which look at
every run. A pair's *status* in a run is its final attempt's: ``fail`` (failed or error, quarantined or not),
``flaky`` (passed after a lost or failed attempt), ``pass`` (passed, xfailed, xpassed) or ``skip`` (skipped: not
counted). Tonight is the newest run, last night the one before it.

- :func:`changes`: *new* failures (fail tonight, did not fail last night), *known* (fail both), *fixed* (failed last
  night, pass tonight).
- :func:`flake_rates`: per pair that both failed and passed in the window, its flake rate (runs that failed or were
  flaky / runs it ran) and its flips (status changes between consecutive runs); it is *flaky* with two flips or
  more (failed, passed again, failed) or when a run already found it flaky.
- :func:`board_rates`: per board its infrastructure-failure rate (attempts lost to the infrastructure / attempts)
  and its health timeline (every recorded change).
- :func:`duration_trends`: per pair its passing durations, oldest first, their median and the last.
- :func:`run_history`: for one run's report, each failure marked new, known or flaky, the pass/fail counts of the
  window's runs, and the previous run.
"""

from __future__ import annotations

import itertools
import sqlite3
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from tinyhil.device_farm.planning import Pair
from tinyhil.fixtures.outcomes import FAILING

__all__ = [
    "BoardRate",
    "Changes",
    "DurationTrend",
    "Flake",
    "RunHistory",
    "RunRow",
    "TrendPoint",
    "board_rates",
    "changes",
    "duration_trends",
    "expected_durations",
    "flake_rates",
    "last_failed",
    "latest_suite",
    "recent_runs",
    "run_history",
    "trend",
]

FAIL: Final = "fail"
FLAKY: Final = "flaky"
PASS: Final = "pass"
SKIP: Final = "skip"
_PASSING: Final = frozenset({"passed", "xfailed", "xpassed"})
_FLAKY_FLIPS: Final = 2  # failed, passed again, failed: no longer one change


@dataclass(frozen=True, slots=True)
class RunRow:
    """One ``runs`` row, as the questions use it."""

    id: int
    run_id: str
    suite: str
    started: float
    finished: float
    report: str
    exitstatus: int


@dataclass(frozen=True, slots=True)
class Changes:
    """Tonight against last night (``None`` when the suite ran once): pair keys, sorted."""

    tonight: str
    last_night: str | None
    new: tuple[str, ...]
    known: tuple[str, ...]
    fixed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Flake:
    """A pair that failed and passed within the window (``runs``: the runs it ran in, not skipped)."""

    key: str
    runs: int
    failures: int
    flips: int
    flaky: bool

    @property
    def rate(self) -> float:
        return self.failures / self.runs


@dataclass(frozen=True, slots=True)
class BoardRate:
    """A board's attempts in the window, those lost to the infrastructure, and its health changes ``(at, state,
    reason)``, oldest first."""

    board: str
    attempts: int
    infrastructure_failures: int
    timeline: tuple[tuple[float, str, str], ...] = ()

    @property
    def rate(self) -> float:
        return self.infrastructure_failures / self.attempts if self.attempts else 0.0


@dataclass(frozen=True, slots=True)
class DurationTrend:
    """A pair's passing durations in seconds, oldest first."""

    key: str
    durations_s: tuple[float, ...]

    @property
    def median_s(self) -> float:
        return float(statistics.median(self.durations_s))

    @property
    def last_s(self) -> float:
        return self.durations_s[-1]


@dataclass(frozen=True, slots=True)
class TrendPoint:
    """One run's counts of pairs by status."""

    run_id: str
    started: float
    passed: int
    failed: int


@dataclass(frozen=True, slots=True)
class RunHistory:
    """What a run's report shows of history: each failing pair's mark (``new``, ``known``, ``flaky``), the window's
    pass/fail counts (oldest first, the run last) and the previous run of the suite."""

    run_id: str
    marks: dict[str, str] = field(default_factory=dict)
    trend: tuple[TrendPoint, ...] = ()
    previous: RunRow | None = None


def _status(outcome: str, flaky: bool) -> str:
    if outcome in FAILING:
        return FAIL
    if flaky:
        return FLAKY
    return PASS if outcome in _PASSING else SKIP


def latest_suite(db: sqlite3.Connection) -> str | None:
    """The suite of the newest run, or ``None`` for an empty history."""
    row = db.execute("SELECT suite FROM runs ORDER BY started DESC, id DESC LIMIT 1").fetchone()
    return None if row is None else str(row[0])


def recent_runs(db: sqlite3.Connection, suite: str | None, runs: int, *, upto: str | None = None) -> list[RunRow]:
    """The newest ``runs`` runs of ``suite`` (every suite: ``None``), newest first; ``upto`` (a run id): that run
    and those before it."""
    query = "SELECT id, run_id, suite, started, finished, report, exitstatus FROM runs WHERE 1 = 1"
    params: list[object] = []
    if suite is not None:
        query += " AND suite = ?"
        params.append(suite)
    if upto is not None:
        query += " AND id <= (SELECT id FROM runs WHERE run_id = ?)"
        params.append(upto)
    query += " ORDER BY started DESC, id DESC LIMIT ?"
    return [RunRow(*row) for row in db.execute(query, (*params, runs))]


def _statuses(db: sqlite3.Connection, rows: Sequence[RunRow]) -> dict[int, dict[str, str]]:
    """Each run's pairs with their status, by the run's row id."""
    found: dict[int, dict[str, str]] = {row.id: {} for row in rows}
    marks = ", ".join("?" * len(rows))
    for run, test, target, outcome, flaky in db.execute(
        f"SELECT run, test, target, outcome, flaky FROM attempts WHERE final = 1 AND run IN ({marks})",
        [row.id for row in rows],
    ):
        found[run][Pair(test, target).key] = _status(outcome, bool(flaky))
    return found


def changes(db: sqlite3.Connection, suite: str) -> Changes | None:
    """Tonight's failures against last night's (``None``: the suite never ran)."""
    rows = recent_runs(db, suite, 2)
    if not rows:
        return None
    statuses = _statuses(db, rows)
    tonight = statuses[rows[0].id]
    last = statuses[rows[1].id] if len(rows) > 1 else {}
    failing = {key for key, status in tonight.items() if status == FAIL}
    failed_before = {key for key, status in last.items() if status == FAIL}
    fixed = {key for key in failed_before if tonight.get(key) in (PASS, FLAKY)}
    return Changes(rows[0].run_id, rows[1].run_id if len(rows) > 1 else None, tuple(sorted(failing - failed_before)),
                   tuple(sorted(failing & failed_before)), tuple(sorted(fixed)))  # fmt: skip


def _flakes(statuses: Sequence[dict[str, str]]) -> dict[str, Flake]:
    """Flake figures of each pair over ``statuses`` (oldest first), for pairs that both failed and passed."""
    keys = {key for run in statuses for key in run}
    found = {}
    for key in sorted(keys):
        seen = [run[key] for run in statuses if run.get(key, SKIP) != SKIP]
        failures = sum(1 for status in seen if status in (FAIL, FLAKY))
        if not failures or (failures == len(seen) and FLAKY not in seen):
            continue
        failed = [status == FAIL for status in seen]
        flips = sum(1 for before, after in itertools.pairwise(failed) if before != after)
        found[key] = Flake(key, len(seen), failures, flips, flips >= _FLAKY_FLIPS or FLAKY in seen)
    return found


def _window(db: sqlite3.Connection, suite: str, runs: int, upto: str | None = None) -> list[dict[str, str]]:
    rows = recent_runs(db, suite, runs, upto=upto)
    statuses = _statuses(db, rows)
    return [statuses[row.id] for row in reversed(rows)]


def flake_rates(db: sqlite3.Connection, suite: str, runs: int) -> list[Flake]:
    """The flake figures of every pair that failed and passed in the suite's last ``runs`` runs, highest rate
    first."""
    return sorted(_flakes(_window(db, suite, runs)).values(), key=lambda f: (-f.rate, f.key))


def board_rates(db: sqlite3.Connection, runs: int) -> list[BoardRate]:
    """Every board that ran an attempt in the last ``runs`` runs (of any suite), or changed health then."""
    ids = [row.id for row in recent_runs(db, None, runs)]
    if not ids:
        return []
    marks = ", ".join("?" * len(ids))
    counts = {board: (total, lost) for board, total, lost in db.execute(
        f"SELECT board, COUNT(*), COUNT(infrastructure) FROM attempts WHERE run IN ({marks}) AND board != '-' "
        "GROUP BY board", ids)}  # fmt: skip
    timelines: dict[str, list[tuple[float, str, str]]] = {}
    for board, at, state, reason in db.execute(
        f"SELECT board, at, state, reason FROM board_health WHERE run IN ({marks}) ORDER BY at, id", ids
    ):
        timelines.setdefault(board, []).append((at, state, reason))
    return [BoardRate(board, *counts.get(board, (0, 0)), tuple(timelines.get(board, ())))
            for board in sorted(counts.keys() | timelines.keys())]  # fmt: skip


def duration_trends(db: sqlite3.Connection, suite: str, runs: int) -> list[DurationTrend]:
    """Every pair's passing durations over the suite's last ``runs`` runs, oldest first."""
    ids = [row.id for row in reversed(recent_runs(db, suite, runs))]
    if not ids:
        return []
    marks = ", ".join("?" * len(ids))
    order = {run: n for n, run in enumerate(ids)}
    found: dict[str, list[tuple[int, float]]] = {}
    for run, test, target, duration in db.execute(
        f"SELECT run, test, target, duration_s FROM attempts WHERE final = 1 AND outcome = 'passed' "
        f"AND run IN ({marks})",
        ids,
    ):
        found.setdefault(Pair(test, target).key, []).append((order[run], duration))
    return [DurationTrend(key, tuple(d for _, d in sorted(found[key]))) for key in sorted(found)]


def expected_durations(db: sqlite3.Connection, suite: str, runs: int) -> dict[str, float]:
    """Each pair's expected duration for the planner: the median of its passing durations in the suite's last
    ``runs`` runs."""
    return {trend.key: trend.median_s for trend in duration_trends(db, suite, runs)}


def last_failed(db: sqlite3.Connection, suite: str) -> set[str] | None:
    """The pairs that failed in the suite's newest run (``None``: the suite never ran)."""
    rows = recent_runs(db, suite, 1)
    if not rows:
        return None
    return {key for key, status in _statuses(db, rows)[rows[0].id].items() if status == FAIL}


def trend(db: sqlite3.Connection, suite: str, runs: int, *, upto: str | None = None) -> list[TrendPoint]:
    """Pass and fail counts of the suite's last ``runs`` runs (up to run ``upto``), oldest first."""
    rows = list(reversed(recent_runs(db, suite, runs, upto=upto)))
    statuses = _statuses(db, rows)
    points = []
    for row in rows:
        counted = list(statuses[row.id].values())
        points.append(TrendPoint(row.run_id, row.started, sum(1 for s in counted if s in (PASS, FLAKY)),
                                 counted.count(FAIL)))  # fmt: skip
    return points


def run_history(db: sqlite3.Connection, run_id: str, runs: int) -> RunHistory:
    """What the report of run ``run_id`` shows of history, over the last ``runs`` runs of its suite up to it."""
    row = db.execute("SELECT suite FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return RunHistory(run_id)
    suite = str(row[0])
    rows = recent_runs(db, suite, runs, upto=run_id)
    statuses = _statuses(db, rows)
    window = [statuses[r.id] for r in reversed(rows)]
    tonight, last = window[-1], window[-2] if len(window) > 1 else {}
    flakes = _flakes(window)
    marks = {}
    for key, status in tonight.items():
        if status != FAIL:
            continue
        flake = flakes.get(key)
        marks[key] = FLAKY if flake is not None and flake.flaky else "known" if last.get(key) == FAIL else "new"
    return RunHistory(run_id, marks, tuple(trend(db, suite, runs, upto=run_id)), rows[1] if len(rows) > 1 else None)
