"""Writing a run into the history database: :class:`RunFacts` (one ``runs`` row), its attempts, and the health
changes of its boards (:func:`record_run`).

A run is written in one transaction, so a reader sees all of it or none. Another process holding the write lock
(a second run finishing at the same moment, a ``farm history`` reading) is waited for: each statement waits
:data:`~tinyhil.device_farm.history.schema.BUSY_TIMEOUT_MS`, and the whole write is tried again
:data:`LOCKED_RETRIES` times before it gives up.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from tinyhil.device_farm.history.schema import open_history

if TYPE_CHECKING:
    from tinyhil.device_farm.reports.summary import PairReport

__all__ = ["LOCKED_RETRIES", "RunFacts", "record_run"]

LOCKED_RETRIES: Final = 5
_RETRY_PAUSE_S: Final = 0.5  # doubled after each locked try


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the ``runs`` row says of a run: its id, the suite (the key ``--last-failed`` and the comparisons use),
    start and end (seconds since the epoch), the command line, the tinyhil version, the revision of the suite's
    checkout (``None`` outside git), the hosts that ran it, the hardware map's hash (``None`` without a map file),
    the report page (report.html), the exit status and whether every pair has its result."""

    run_id: str
    suite: str
    started: float
    finished: float
    command: str
    version: str
    revision: str | None
    hosts: tuple[str, ...]
    map_hash: str | None
    report: str
    exitstatus: int
    complete: bool


def _attempt_rows(run: int, report: PairReport) -> list[tuple[Any, ...]]:
    rows = []
    for attempt in (*report.earlier, report.final):
        final = attempt is report.final
        message = str(attempt.get("reason") or "") if final else str(attempt.get("infrastructure") or "")
        rows.append((run, str(attempt["nodeid"]), str(attempt["target"]), str(attempt.get("board") or "-"),
                     str(attempt.get("host") or "-"), int(attempt.get("attempt") or 1), final,
                     str(attempt["outcome"]), final and report.flaky, final and report.quarantined is not None,
                     attempt.get("infrastructure"), float(attempt.get("duration_s") or 0.0),
                     attempt.get("started"), message))  # fmt: skip
    return rows


def _health_changes(db: sqlite3.Connection, run: int, at: float, boards: Sequence[Mapping[str, Any]]) -> None:
    """A ``board_health`` row for each board whose state or reason differs from its last one recorded."""
    for board in boards:
        last = db.execute("SELECT state, reason FROM board_health WHERE board = ? ORDER BY at DESC, id DESC LIMIT 1",
                          (board["board"],)).fetchone()  # fmt: skip
        now = (str(board["health"]), str(board.get("reason") or ""))
        if last is None or tuple(last) != now:
            db.execute("INSERT INTO board_health (run, board, host, at, state, reason) VALUES (?, ?, ?, ?, ?, ?)",
                       (run, board["board"], str(board.get("host") or "-"), at, *now))  # fmt: skip


def _write(db: sqlite3.Connection, facts: RunFacts, reports: Sequence[PairReport],
           boards: Sequence[Mapping[str, Any]]) -> None:  # fmt: skip
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("DELETE FROM runs WHERE run_id = ?", (facts.run_id,))  # a resumed run replaces its first part
        cursor = db.execute(
            "INSERT INTO runs (run_id, suite, started, finished, command, version, revision, hosts, map_hash, "
            "report, exitstatus, complete) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (facts.run_id, facts.suite, facts.started, facts.finished, facts.command, facts.version, facts.revision,
             json.dumps(list(facts.hosts)), facts.map_hash, facts.report, facts.exitstatus, facts.complete),
        )  # fmt: skip
        run = cursor.lastrowid
        assert run is not None  # an INSERT always sets it
        db.executemany(
            "INSERT INTO attempts (run, test, target, board, host, attempt, final, outcome, flaky, quarantined, "
            "infrastructure, duration_s, started, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [row for report in reports for row in _attempt_rows(run, report)],
        )
        _health_changes(db, run, facts.finished, boards)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _locked(exc: sqlite3.OperationalError) -> bool:
    return exc.sqlite_errorcode in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def record_run(path: Path, facts: RunFacts, reports: Sequence[PairReport],
               boards: Sequence[Mapping[str, Any]]) -> None:  # fmt: skip
    """Write the run ``facts`` describes, every attempt of ``reports``, and the health changes of ``boards`` (the
    summary's ``boards`` entries: ``board``, ``host``, ``health``, ``reason``) into the database at ``path``.

    Raises:
        HistoryVersionError: the database was written by a later tinyhil.
        sqlite3.Error, OSError: it cannot be opened or written, or stayed locked through every retry.
    """
    pause = _RETRY_PAUSE_S
    for tries_left in range(LOCKED_RETRIES, -1, -1):
        try:
            db = open_history(path)
            try:
                _write(db, facts, reports, boards)
            finally:
                db.close()
            return
        except sqlite3.OperationalError as exc:
            if not _locked(exc) or not tries_left:
                raise
        time.sleep(pause)
        pause *= 2
