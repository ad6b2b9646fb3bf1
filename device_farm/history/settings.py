"""Where a run's history goes, and what a run asks of it: :class:`HistorySettings` and :func:`history_path`.

The database is ``--history PATH``, else ``$TINYHIL_HISTORY``, else ``history.db`` in the farm's state directory
when ``$TINYHIL_FARM_STATE`` names one, else ``$XDG_STATE_HOME/tinyhil/history.db``, else
``~/.local/state/tinyhil/history.db``; ``none`` (in the option or the variable) records nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tinyhil.device_farm.state import STATE_ENV
from tinyhil.errors import InvalidArgument

__all__ = ["DEFAULT_RUNS", "HISTORY_ENV", "HISTORY_NAME", "NO_HISTORY", "HistorySettings", "history_path"]

HISTORY_ENV: Final = "TINYHIL_HISTORY"
HISTORY_NAME: Final = "history.db"
NO_HISTORY: Final = "none"
DEFAULT_RUNS: Final = 10  # the window of runs that flake rates, trends and expected durations look at


@dataclass(frozen=True, slots=True)
class HistorySettings:
    """A run's history: the database (``None``: record nothing), whether the run covers only the pairs that failed
    in the previous run of its suite (``--last-failed``), and the window of runs its report looks back over."""

    path: Path | None
    last_failed: bool = False
    runs: int = DEFAULT_RUNS

    def __post_init__(self) -> None:
        if isinstance(self.runs, bool) or not isinstance(self.runs, int) or self.runs < 1:
            raise InvalidArgument(f"history runs={self.runs!r} (--runs), expected an integer >= 1")
        if self.last_failed and self.path is None:
            raise InvalidArgument("--last-failed reads the previous run from history, expected --history other than "
                                  f"{NO_HISTORY!r}")  # fmt: skip


def history_path(given: str | None) -> Path | None:
    """The history database ``given`` (``--history``) names, else the default (see the module docstring); ``None``
    for ``none``."""
    chosen = given or os.environ.get(HISTORY_ENV)
    if chosen:
        return None if chosen == NO_HISTORY else Path(chosen)
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV]) / HISTORY_NAME
    base = Path(os.environ["XDG_STATE_HOME"]) if os.environ.get("XDG_STATE_HOME") else Path.home() / ".local" / "state"
    return base / "tinyhil" / HISTORY_NAME
