"""``farm history --export``: every attempt with its run's facts, as CSV or JSON lines, chosen by extension or
format."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from support.history_runs import record

from tinyhil.device_farm.history import open_history
from tinyhil.device_farm.history.export import EXPORT_COLUMNS, export_format, export_history
from tinyhil.errors import InvalidArgument


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "history.db"
    record(path, "r1", {"t.py::test_a": "passed", "t.py::test_b": "failed"}, started=1.0)
    record(path, "r2", {"t.py::test_a": "passed"}, started=2.0, flaky=frozenset({"t.py::test_a"}))
    return path


def _attempts(database: Path) -> int:
    db = open_history(database)
    try:
        return int(db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0])
    finally:
        db.close()


def test_csv_and_json_lines_carry_the_same_rows(database: Path, tmp_path: Path) -> None:
    db = open_history(database)
    try:
        written = export_history(db, tmp_path / "out.csv", export_format(tmp_path / "out.csv", None))
        export_history(db, tmp_path / "out.jsonl", export_format(tmp_path / "out.jsonl", None))
    finally:
        db.close()
    with (tmp_path / "out.csv").open(newline="") as table:
        rows = list(csv.DictReader(table))
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert written == len(rows)
    assert list(rows[0]) == list(EXPORT_COLUMNS)
    assert len(rows) == len(lines) == _attempts(database)
    assert [(r["run_id"], r["test"], r["outcome"]) for r in rows] == [(j["run_id"], j["test"], j["outcome"])
                                                                      for j in lines]  # fmt: skip
    lost = [j for j in lines if not j["final"]]
    assert len(lost) == 1 and lost[0]["infrastructure"] == "board lost" and lost[0]["run_id"] == "r2"
    assert lines[0]["hosts"] == ["lab-1"] and rows[0]["hosts"] == "lab-1"


def test_the_format_comes_from_the_extension_unless_given(tmp_path: Path) -> None:
    assert export_format(tmp_path / "x.CSV", None) == "csv"
    assert export_format(tmp_path / "x.json", None) == "jsonl"
    assert export_format(tmp_path / "x.txt", "csv") == "csv"
    with pytest.raises(InvalidArgument, match=r"extension '\.txt' names no format"):
        export_format(tmp_path / "x.txt", None)
