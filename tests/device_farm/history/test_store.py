"""Writing runs: every attempt and health change kept, a resumed run replacing its first part, a locked database
waited for, and a database that cannot be written costing one warning line, never the run."""

from __future__ import annotations

import io
import sqlite3
import statistics
from pathlib import Path

import pytest
from support.history_runs import SUITE, pair_report, record

from tinyhil.device_farm.history import HistorySettings, RunFacts, open_history
from tinyhil.device_farm.history import recorder as recorder_module
from tinyhil.device_farm.history import store as store_module
from tinyhil.device_farm.history.recorder import durations_from_history, failed_last_time
from tinyhil.device_farm.history.recorder import record as record_and_read

FACTS = RunFacts("r1", SUITE, 1.0, 2.0, "tinyhil run", "0.1.0", "abc123", ("lab-1", "lab-2"), "f00d", "/r/report.html",
                 1, True)  # fmt: skip


def test_every_attempt_is_kept_with_its_run(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    record(path, "r1", {"t.py::test_a": "passed", "t.py::test_b": "failed"}, started=5.0,
           flaky=frozenset({"t.py::test_a"}))  # fmt: skip
    db = open_history(path)
    try:
        rows = db.execute("SELECT test, attempt, final, outcome, flaky, infrastructure FROM attempts ORDER BY id")
        assert rows.fetchall() == [("t.py::test_a", 1, 0, "error", 0, "board lost"),
                                   ("t.py::test_a", 2, 1, "passed", 1, None),
                                   ("t.py::test_b", 1, 1, "failed", 0, None)]  # fmt: skip
        run = db.execute("SELECT run_id, suite, started, hosts FROM runs").fetchone()
        assert run == ("r1", SUITE, 5.0, '["lab-1"]')
    finally:
        db.close()


def test_a_resumed_run_replaces_what_its_first_part_recorded(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    record(path, "r1", {"t.py::test_a": "passed"}, started=1.0)
    record(path, "r1", {"t.py::test_a": "passed", "t.py::test_b": "passed"}, started=1.0)
    db = open_history(path)
    try:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
        assert db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 2
    finally:
        db.close()


def test_a_locked_database_is_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "history.db"
    open_history(path).close()
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")  # another process mid-write
    tries: list[int] = []
    real_open = store_module.open_history

    def counting_open(where: Path) -> sqlite3.Connection:
        tries.append(1)
        if len(tries) == 2:  # the holder lets go while the recorder waits for its second try
            holder.execute("COMMIT")
        connection = real_open(where)
        connection.execute("PRAGMA busy_timeout = 0")  # no waiting inside a statement: the retry is what is tested
        return connection

    monkeypatch.setattr(store_module, "open_history", counting_open)
    monkeypatch.setattr(store_module, "_RETRY_PAUSE_S", 0.0)
    store_module.record_run(path, FACTS, [pair_report("t.py::test_a", "passed")], [])
    holder.close()
    assert len(tries) == 2
    db = open_history(path)
    try:
        assert db.execute("SELECT run_id FROM runs").fetchall() == [("r1",)]
    finally:
        db.close()


def test_a_database_locked_through_every_retry_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "history.db"
    open_history(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    real_open = store_module.open_history

    def impatient(where: Path) -> sqlite3.Connection:
        connection = real_open(where)
        connection.execute("PRAGMA busy_timeout = 0")
        return connection

    monkeypatch.setattr(store_module, "open_history", impatient)
    monkeypatch.setattr(store_module, "_RETRY_PAUSE_S", 0.0)
    err = io.StringIO()
    assert record_and_read(HistorySettings(path), FACTS, [pair_report("t.py::test_a", "passed")], [], err) is None
    holder.close()
    (line,) = err.getvalue().splitlines()
    assert line.startswith(f"tinyhil: history {path}: run r1 not recorded (database is locked)")


def test_an_unwritable_database_is_one_warning_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    settings = HistorySettings(blocker / "history.db", last_failed=True)
    err = io.StringIO()
    assert record_and_read(settings, FACTS, [pair_report("t.py::test_a", "failed")], [], err) is None
    assert failed_last_time(settings, SUITE, err) is None
    assert durations_from_history(settings, SUITE, err) == {}
    lines = err.getvalue().splitlines()
    assert len(lines) == 3 and all(str(blocker / "history.db") in line for line in lines)
    assert "run r1 not recorded" in lines[0] and "the run goes on without it" in lines[0]


def test_no_history_records_and_reads_nothing(tmp_path: Path) -> None:
    err = io.StringIO()
    settings = HistorySettings(None)
    assert record_and_read(settings, FACTS, [pair_report("t.py::test_a", "failed")], [], err) is None
    assert failed_last_time(settings, SUITE, err) is None
    assert err.getvalue() == ""
    assert recorder_module.record(None, FACTS, [], [], err) is None


def test_the_planner_reads_the_median_passing_duration(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    seconds = (3.0, 1.0, 2.0)
    for n, duration in enumerate(seconds, 1):
        record(path, f"r{n}", {"t.py::test_a": "passed"}, started=float(n), durations={"t.py::test_a": duration})
    record(path, "r4", {"t.py::test_a": "failed"}, started=4.0, durations={"t.py::test_a": 99.0})
    found = durations_from_history(HistorySettings(path), SUITE)
    assert found == {"t.py::test_a@NULL": statistics.median(seconds)}
    assert durations_from_history(HistorySettings(path), "/another/suite") == {}
