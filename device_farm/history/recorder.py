"""The run's side of history: what a run reads before it plans (the pairs ``--last-failed`` keeps, expected
durations) and the run it records at its end, each a one-line warning on standard error when the database cannot
be used, never the run's failure."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO, TypeVar

from tinyhil.device_farm.history.queries import RunHistory, expected_durations, last_failed, run_history
from tinyhil.device_farm.history.schema import open_history
from tinyhil.device_farm.history.settings import DEFAULT_RUNS, HistorySettings
from tinyhil.device_farm.history.store import RunFacts, record_run
from tinyhil.errors import TinyHilError
from tinyhil.printable import printable

if TYPE_CHECKING:
    from tinyhil.device_farm.reports.summary import PairReport

__all__ = ["durations_from_history", "failed_last_time", "last_failed_pairs", "record"]

_T = TypeVar("_T")


class _Keyed(Protocol):
    @property
    def key(self) -> str: ...


_P = TypeVar("_P", bound=_Keyed)


def _warn(path: Path, doing: str, exc: BaseException, err: TextIO | None) -> None:
    why = printable(str(exc) or type(exc).__name__, newlines=False)
    print(f"tinyhil: history {path}: {doing} ({why}); the run goes on without it", file=err or sys.stderr, flush=True)


def _read(settings: HistorySettings | None, doing: str, ask: Callable[[sqlite3.Connection], _T],
          err: TextIO | None) -> _T | None:  # fmt: skip
    if settings is None or settings.path is None:
        return None
    try:
        db = open_history(settings.path)
        try:
            return ask(db)
        finally:
            db.close()
    except (sqlite3.Error, OSError, TinyHilError) as exc:
        _warn(settings.path, doing, exc, err)
        return None


def failed_last_time(settings: HistorySettings | None, suite: str, err: TextIO | None = None) -> set[str] | None:
    """The pair keys that failed in the previous run of ``suite``; ``None`` when history has no run of it or
    cannot be read (the run then covers everything)."""
    return _read(settings, "cannot read the previous run", lambda db: last_failed(db, suite), err)


def durations_from_history(settings: HistorySettings | None, suite: str, err: TextIO | None = None) -> dict[str, float]:
    """Expected durations of the pairs of ``suite`` by history (empty without history)."""
    runs = settings.runs if settings is not None else DEFAULT_RUNS
    return _read(settings, "cannot read durations", lambda db: expected_durations(db, suite, runs), err) or {}


def record(settings: HistorySettings | None, facts: RunFacts, reports: Sequence[PairReport],
           boards: Sequence[Mapping[str, Any]], err: TextIO | None = None) -> RunHistory | None:  # fmt: skip
    """Record the run and read back what its report shows of history; ``None`` when recording is off or failed
    (said in one line on ``err``, standard error by default)."""
    if settings is None or settings.path is None:
        return None
    try:
        record_run(settings.path, facts, reports, boards)
    except (sqlite3.Error, OSError, TinyHilError) as exc:
        _warn(settings.path, f"run {facts.run_id} not recorded", exc, err)
        return None
    return _read(settings, "cannot read it back", lambda db: run_history(db, facts.run_id, settings.runs), err)


def last_failed_pairs(pairs: list[_P], settings: HistorySettings, suite: str, out: TextIO) -> list[_P]:
    """``--last-failed``: the ``pairs`` (what the run selected; its journal header records the choice) whose key
    failed in the previous run of ``suite``; all of them, said in one line, when history has no run of it or none of
    its failures is among them."""
    failed_before = failed_last_time(settings, suite)
    if failed_before is None:
        print("tinyhil: --last-failed: no previous run of this suite in history; running everything", file=out)
        return pairs
    chosen = [pair for pair in pairs if pair.key in failed_before]
    if not chosen:
        print("tinyhil: --last-failed: nothing failed in the previous run of this suite; running everything",
              file=out)  # fmt: skip
        return pairs
    print(f"tinyhil: --last-failed: running the {len(chosen)} of {len(pairs)} pairs that failed in the previous run",
          file=out)  # fmt: skip
    return chosen
