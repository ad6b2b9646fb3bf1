"""The questions history answers, over runs written straight into a database: new, known and fixed failures, flake
rates, boards, duration trends, expected durations, the pairs ``--last-failed`` keeps, and a report's marks."""

from __future__ import annotations

import sqlite3
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.history_runs import SUITE, TARGET, record

from tinyhil.device_farm.history import open_history
from tinyhil.device_farm.history.queries import (
    board_rates,
    changes,
    duration_trends,
    expected_durations,
    flake_rates,
    last_failed,
    latest_suite,
    run_history,
    trend,
)

STEADY, BROKE, FLAPPY, HEALED = "t.py::test_steady", "t.py::test_broke", "t.py::test_flappy", "t.py::test_healed"
# Four nights: test_broke starts failing on the third, test_flappy fails every other night, test_healed is fixed on
# the fourth.
NIGHTS = (
    {STEADY: "passed", BROKE: "passed", FLAPPY: "failed", HEALED: "failed"},
    {STEADY: "passed", BROKE: "passed", FLAPPY: "passed", HEALED: "failed"},
    {STEADY: "passed", BROKE: "failed", FLAPPY: "failed", HEALED: "error"},
    {STEADY: "passed", BROKE: "failed", FLAPPY: "passed", HEALED: "passed"},
)


def key(test: str) -> str:
    return f"{test}@{TARGET}"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    path = tmp_path / "history.db"
    for night, outcomes in enumerate(NIGHTS, 1):
        record(path, f"night{night}", outcomes, started=night * 86_400.0, durations={STEADY: float(night)})
    connection = open_history(path)
    yield connection
    connection.close()


def test_tonight_against_last_night(db: sqlite3.Connection, tmp_path: Path) -> None:
    found = changes(db, SUITE)
    assert found is not None
    assert (found.tonight, found.last_night) == ("night4", "night3")
    assert found.new == ()
    assert found.known == (key(BROKE),)
    assert found.fixed == (key(FLAPPY), key(HEALED))
    path = tmp_path / "three.db"
    for night, outcomes in enumerate(NIGHTS[:3], 1):
        record(path, f"night{night}", outcomes, started=night * 86_400.0)
    three = open_history(path)
    try:
        third = changes(three, SUITE)
        assert third is not None
        assert third.new == (key(BROKE), key(FLAPPY))
        assert third.known == (key(HEALED),)
    finally:
        three.close()


def test_a_suite_that_never_ran_has_no_changes(db: sqlite3.Connection) -> None:
    assert changes(db, "/another/suite") is None
    assert last_failed(db, "/another/suite") is None
    assert latest_suite(db) == SUITE


def test_the_flake_rate_of_a_test_that_fails_half_the_nights(db: sqlite3.Connection) -> None:
    rates = {flake.key: flake for flake in flake_rates(db, SUITE, 10)}
    flappy = rates[key(FLAPPY)]
    assert (flappy.failures, flappy.runs, flappy.rate, flappy.flips, flappy.flaky) == (2, 4, 0.5, 3, True)
    broke = rates[key(BROKE)]  # failed, then stayed failed: one change, not flaky
    assert (broke.rate, broke.flips, broke.flaky) == (0.5, 1, False)
    assert key(STEADY) not in rates
    window = {flake.key: flake for flake in flake_rates(db, SUITE, 2)}  # nights 3 and 4 only
    assert window[key(FLAPPY)].runs == 2 and not window[key(FLAPPY)].flaky


def test_a_pair_found_flaky_within_a_run_is_flaky_by_history(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    record(path, "one", {STEADY: "passed"}, started=1.0)
    record(path, "two", {STEADY: "passed"}, started=2.0, flaky=frozenset({STEADY}))
    db = open_history(path)
    try:
        (flake,) = flake_rates(db, SUITE, 10)
        assert (flake.key, flake.failures, flake.runs, flake.flaky) == (key(STEADY), 1, 2, True)
        (board,) = board_rates(db, 10)
        assert (board.attempts, board.infrastructure_failures, board.rate) == (3, 1, 1 / 3)
    finally:
        db.close()


def test_boards_keep_a_health_timeline_of_changes_only(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    states = ["GOOD", "GOOD", "BAD", "GOOD"]
    for n, state in enumerate(states, 1):
        health = {"board": "null-a", "host": "lab-1", "health": state, "reason": f"probe said {state}"}
        record(path, f"run{n}", {STEADY: "passed"}, started=float(n), boards=(health,))
    db = open_history(path)
    try:
        (board,) = board_rates(db, 10)
        assert [state for _, state, _ in board.timeline] == ["GOOD", "BAD", "GOOD"]
        assert (board.attempts, board.infrastructure_failures) == (len(states), 0)
    finally:
        db.close()


def test_durations_trend_and_the_planners_expectation(db: sqlite3.Connection) -> None:
    trends = {t.key: t for t in duration_trends(db, SUITE, 10)}
    assert trends[key(STEADY)].durations_s == (1.0, 2.0, 3.0, 4.0)
    assert trends[key(STEADY)].last_s == 4.0
    assert key(HEALED) in trends and trends[key(HEALED)].durations_s == (0.5,)
    expected = expected_durations(db, SUITE, 3)  # nights 2 to 4
    assert expected[key(STEADY)] == statistics.median(trends[key(STEADY)].durations_s[-3:])


def test_last_failed_is_the_newest_runs_failures(db: sqlite3.Connection) -> None:
    assert last_failed(db, SUITE) == {key(BROKE)}


def test_a_reports_marks_trend_and_previous_run(db: sqlite3.Connection) -> None:
    third = run_history(db, "night3", 10)
    assert third.marks == {key(BROKE): "new", key(FLAPPY): "flaky", key(HEALED): "known"}  # failed, passed, failed
    assert third.previous is not None and third.previous.run_id == "night2"
    assert [(p.run_id, p.passed, p.failed) for p in third.trend] == [("night1", 2, 2), ("night2", 3, 1),
                                                                        ("night3", 1, 3)]  # fmt: skip
    assert trend(db, SUITE, 2) == list(run_history(db, "night4", 2).trend)
    fourth = run_history(db, "night4", 10)
    assert fourth.marks == {key(BROKE): "known"}
    first = run_history(db, "night1", 10)
    assert first.previous is None
    assert first.marks == {key(FLAPPY): "new", key(HEALED): "new"}
    assert run_history(db, "no-such-run", 10).marks == {}
