"""Run history: every run recorded in a SQLite database, and the questions a lab asks of it (docs/history.md).

- :mod:`~tinyhil.device_farm.history.schema`: the tables, the version table and the migrations;
- :mod:`~tinyhil.device_farm.history.settings`: where the database is, and what a run asks of it;
- :mod:`~tinyhil.device_farm.history.store`, :mod:`~tinyhil.device_farm.history.facts`: writing a run;
- :mod:`~tinyhil.device_farm.history.queries`: new, known and fixed failures, flake rates, boards, durations;
- :mod:`~tinyhil.device_farm.history.recorder`: the run's side (read before planning, record at the end);
- :mod:`~tinyhil.device_farm.history.export`: CSV or JSON lines for a team's own dashboards;
- :mod:`~tinyhil.device_farm.history.html`: the trend chart and the marks in ``report.html``.
"""

from __future__ import annotations

from tinyhil.device_farm.history.export import export_history
from tinyhil.device_farm.history.queries import RunHistory, run_history
from tinyhil.device_farm.history.recorder import durations_from_history, failed_last_time, last_failed_pairs, record
from tinyhil.device_farm.history.schema import SCHEMA_VERSION, HistoryVersionError, open_history
from tinyhil.device_farm.history.settings import HistorySettings, history_path
from tinyhil.device_farm.history.store import RunFacts, record_run

__all__ = [
    "SCHEMA_VERSION",
    "HistorySettings",
    "HistoryVersionError",
    "RunFacts",
    "RunHistory",
    "durations_from_history",
    "export_history",
    "failed_last_time",
    "history_path",
    "last_failed_pairs",
    "open_history",
    "record",
    "record_run",
    "run_history",
]
