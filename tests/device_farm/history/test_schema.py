"""The history database's schema: WAL mode, the version table, migrations from an older version, and a newer
version refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.history_runs import record

from tinyhil.device_farm.history.queries import recent_runs
from tinyhil.device_farm.history.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    HistoryVersionError,
    open_history,
    schema_version,
)


def test_a_new_database_is_at_the_current_version_in_wal_mode(tmp_path: Path) -> None:
    db = open_history(tmp_path / "deep" / "history.db")
    try:
        assert schema_version(db) == SCHEMA_VERSION == len(MIGRATIONS)
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"schema_version", "runs", "attempts", "board_health"} <= tables
    finally:
        db.close()


def test_an_older_database_migrates_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    old = open_history(path, upto=1)  # as the first schema wrote it: no board_health table
    assert schema_version(old) == 1
    assert old.execute("SELECT name FROM sqlite_master WHERE name = 'board_health'").fetchone() is None
    old.execute(
        "INSERT INTO runs (run_id, suite, started, finished, command, version, hosts, report, exitstatus, complete) "
        "VALUES ('old', 's', 1.0, 2.0, 'tinyhil run', '0.0.9', '[]', '/r/report.html', 0, 1)"
    )
    old.close()
    record(path, "new", {"t.py::test_a": "passed"}, started=10.0, suite="s",
           boards=({"board": "null-a", "host": "lab-1", "health": "GOOD", "reason": "probed"},))  # fmt: skip
    db = open_history(path)
    try:
        assert schema_version(db) == SCHEMA_VERSION
        assert [row.run_id for row in recent_runs(db, "s", 10)] == ["new", "old"]
        assert db.execute("SELECT board, state FROM board_health").fetchall() == [("null-a", "GOOD")]
    finally:
        db.close()


def test_a_database_from_a_later_tinyhil_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    open_history(path).close()
    later = SCHEMA_VERSION + 1
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE schema_version SET version = ?", (later,))
    raw.close()
    with pytest.raises(HistoryVersionError, match=f"schema version {later}, expected at most {SCHEMA_VERSION}"):
        open_history(path)
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT version FROM schema_version").fetchone()[0] == later
    raw.close()
