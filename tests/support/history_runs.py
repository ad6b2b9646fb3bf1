"""Runs written straight into a history database, for the history's tests: each pair's final outcome (and, for a
flaky pair, an attempt lost to the infrastructure before it), as the farm's reports hand them to the recorder."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tinyhil.device_farm.history import RunFacts, record_run
from tinyhil.device_farm.reports.summary import PairReport

SUITE = "/lab/suite"
TARGET = "NULL"


def pair_report(test: str, outcome: str, *, board: str = "null-a", duration_s: float = 0.5, flaky: bool = False,
                started: float = 0.0) -> PairReport:  # fmt: skip
    final: dict[str, Any] = {"key": f"{test}@{TARGET}", "nodeid": test, "target": TARGET, "board": board,
                             "host": "lab-1", "attempt": 2 if flaky else 1, "outcome": outcome,
                             "duration_s": duration_s, "reason": f"{outcome} here", "started": started,
                             "final": True}  # fmt: skip
    earlier = ({**final, "attempt": 1, "outcome": "error", "final": False, "infrastructure": "board lost"},)
    return PairReport(final, earlier if flaky else ())


def record(db: Path, run_id: str, outcomes: Mapping[str, str], *, started: float, suite: str = SUITE,
           boards: tuple[Mapping[str, Any], ...] = (), durations: Mapping[str, float] | None = None,
           flaky: frozenset[str] = frozenset(), report: str | None = None) -> None:  # fmt: skip
    """Record run ``run_id`` of ``suite`` with each test's final ``outcomes``."""
    reports = [pair_report(test, outcome, duration_s=(durations or {}).get(test, 0.5), flaky=test in flaky,
                           started=started) for test, outcome in outcomes.items()]  # fmt: skip
    facts = RunFacts(run_id, suite, started, started + 60.0, "tinyhil run", "0.1.0", None, ("lab-1",), None,
                     report or f"/lab/runs/{run_id}/report.html", 0, True)  # fmt: skip
    record_run(db, facts, reports, boards)
