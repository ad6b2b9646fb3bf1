"""The history's part of report.html: the trend chart, the previous run's link, and the marks beside failures."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from support.history_runs import TARGET, pair_report, record

from tinyhil.device_farm.history import open_history, run_history
from tinyhil.device_farm.history.html import failure_mark, history_header
from tinyhil.device_farm.reports.html import render_report


def _history(tmp_path: Path, same_dir: bool = False) -> sqlite3.Connection:
    path = tmp_path / "history.db"
    shared = str(tmp_path / "run" / "report.html") if same_dir else None
    record(path, "one", {"t.py::test_a": "passed", "t.py::test_b": "passed"}, started=1.0, report=shared)
    record(path, "two", {"t.py::test_a": "failed", "t.py::test_b": "passed"}, started=2.0,
           report=str(tmp_path / "run" / "report.html"))  # fmt: skip
    return open_history(path)


def test_the_page_marks_a_new_failure_and_draws_the_trend(tmp_path: Path) -> None:
    db = _history(tmp_path)
    try:
        history = run_history(db, "two", 10)
    finally:
        db.close()
    page = tmp_path / "run" / "report.html"
    reports = [pair_report("t.py::test_a", "failed"), pair_report("t.py::test_b", "passed")]
    html = render_report(reports, {"run_id": "two", "boards": []}, history=history, page=page)
    assert 'data-history="new"' in html and html.count("data-history=") == 1
    assert '<svg id="trend" data-runs="2"' in html
    assert 'data-run="one" data-passed="2" data-failed="0"' in html
    assert 'data-run="two" data-passed="1" data-failed="1"' in html
    assert 'href="file:///lab/runs/one/report.html"' in html
    assert "http://" not in html and "https://" not in html


def test_a_previous_report_in_the_same_directory_is_named_not_linked(tmp_path: Path) -> None:
    db = _history(tmp_path, same_dir=True)
    try:
        history = run_history(db, "two", 10)
    finally:
        db.close()
    header = history_header(history, tmp_path / "run" / "report.html")
    assert 'id="previous-run"' not in header and "previous run one" in header


def test_without_history_the_page_says_so_and_marks_nothing() -> None:
    assert 'data-recorded="false"' in history_header(None, Path("report.html"))
    assert failure_mark(None, f"t.py::test_a@{TARGET}") == ""
