"""A run's reports, written from its journal: ``summary.json`` and ``junit.xml``
(:mod:`~tinyhil.device_farm.reports.summary`), the self-contained ``report.html``
(:mod:`~tinyhil.device_farm.reports.html`, its timeline :mod:`~tinyhil.device_farm.reports.timeline`), the run's
metadata every report shows (:mod:`~tinyhil.device_farm.reports.metadata`), the target-by-test matrix
(:mod:`~tinyhil.device_farm.reports.matrix`) and the run's progress and closing lines on the terminal
(:mod:`~tinyhil.device_farm.reports.progress`)."""

from __future__ import annotations

from typing import Final

from tinyhil.device_farm.reports.html import write_report
from tinyhil.device_farm.reports.matrix import render_matrix
from tinyhil.device_farm.reports.summary import PairReport, farm_summary, pair_reports, write_junit

__all__ = [
    "JUNIT_NAME",
    "REPORT_NAME",
    "SUMMARY_NAME",
    "PairReport",
    "farm_summary",
    "pair_reports",
    "render_matrix",
    "write_junit",
    "write_report",
]

# The reports' file names in a run's directory.
JUNIT_NAME: Final = "junit.xml"
SUMMARY_NAME: Final = "summary.json"
REPORT_NAME: Final = "report.html"
