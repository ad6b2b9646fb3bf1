"""Board health over time: infrastructure failures in a row make a board BAD, a BAD board is re-probed on a backoff,
an operator's decision holds, and every change of state is journaled with its reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyhil.device_farm.health.log import read_changes
from tinyhil.device_farm.health.states import REPROBE_BACKOFF_S, HealthBook, HealthState, ProbeResult
from tinyhil.device_farm.inventory.hwmap import parse_hwmap
from tinyhil.device_farm.leases import LeaseTimeout
from tinyhil.errors import InvalidArgument

HWMAP = parse_hwmap(
    '[[board]]\nid = "b"\nkind = "emulated"\nemulated = { target = "NULL" }\n\n'
    '[[board]]\nid = "held"\nkind = "emulated"\nemulated = { target = "NULL" }\nstate = "retired"\n'
)
BOARD = HWMAP.board("b")
OK, BROKEN = ProbeResult(True, "fine"), ProbeResult(False, "SRAM round trip: byte 3 reads 0x00")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _book(tmp_path: Path, clock: Clock, **options: int) -> HealthBook:
    return HealthBook(HWMAP.boards, clock=clock, state_dir=tmp_path, **options)  # type: ignore[arg-type]


def test_failures_in_a_row_make_a_board_bad_at_once_even_when_its_probes_pass(tmp_path: Path) -> None:
    book = _book(tmp_path, Clock())
    book.record_probe("b", OK)
    for _ in range(2):
        assert book.record_infrastructure_failure("b", "board lost: ENODEV").state is HealthState.UNKNOWN
        book.record_probe("b", OK)  # the device comes back between tests: the streak goes on
    record = book.record_infrastructure_failure("b", "board lost: ENODEV")
    assert (record.state, record.consecutive_failures, record.infrastructure_failures) == (HealthState.BAD, 3, 3)
    assert record.reason == "3 infrastructure failures in a row (at most 2), the last: board lost: ENODEV"
    assert not book.schedulable("b")


def test_a_carried_attempt_ends_the_streak(tmp_path: Path) -> None:
    book = _book(tmp_path, Clock(), bad_after=2)
    book.record_probe("b", OK)
    book.record_infrastructure_failure("b", "lost")
    book.record_probe("b", OK)
    book.record_carried("b")  # a test passed (or failed on its own) on it
    assert book.record_infrastructure_failure("b", "lost").state is HealthState.UNKNOWN
    assert _book(tmp_path, Clock(), bad_after=2).record("b").consecutive_failures == 1  # kept on disk


def test_a_bad_board_is_reprobed_on_a_doubling_backoff_and_returns_when_a_probe_passes(tmp_path: Path) -> None:
    clock = Clock()
    book = _book(tmp_path, clock)
    book.record_probe("b", BROKEN)
    assert not book.needs_probe("b")
    clock.now += REPROBE_BACKOFF_S
    assert book.needs_probe("b")
    book.record_probe("b", BROKEN)  # still broken: the next try waits twice as long
    clock.now += REPROBE_BACKOFF_S
    assert not book.needs_probe("b") and book.reprobe_after_s("b") == 2 * REPROBE_BACKOFF_S
    clock.now += REPROBE_BACKOFF_S
    assert book.ready(BOARD, lambda board: OK) and book.state("b") is HealthState.GOOD
    assert [(c.before, c.after) for c in read_changes(tmp_path)] == [("UNKNOWN", "BAD"), ("BAD", "GOOD")]


def test_the_backoff_never_passes_the_probe_interval(tmp_path: Path) -> None:
    book = _book(tmp_path, Clock())
    for _ in range(40):
        book.record_probe("b", BROKEN)
    assert book.reprobe_after_s("b") == book.probe_interval_s


def test_an_operators_maintenance_holds_whatever_probes_and_failures_say(tmp_path: Path) -> None:
    book = _book(tmp_path, Clock())
    record = book.set_state("b", HealthState.MAINTENANCE, "reflow", "ann@lab-1")
    assert (record.state, record.reason) == (HealthState.MAINTENANCE, "maintenance: reflow (ann@lab-1)")
    book.record_probe("b", OK)
    book.record_infrastructure_failure("b", "lost")
    assert book.state("b") is HealthState.MAINTENANCE and not book.needs_probe("b")
    back = book.set_state("b", HealthState.GOOD, "fixed", "bob@lab-1")
    assert back.state is HealthState.GOOD and book.needs_probe("b")  # probed before its next work
    [held, returned] = read_changes(tmp_path)
    assert (held.after, held.by, returned.after, returned.by) == ("MAINTENANCE", "ann@lab-1", "GOOD", "bob@lab-1")


@pytest.mark.parametrize(
    ("board", "state", "reason", "expected"),
    [
        ("b", HealthState.BAD, "x", "state 'BAD', expected one of good, maintenance, retired"),
        ("b", HealthState.RETIRED, "  ", "reason '', expected a few words"),
        ("held", HealthState.GOOD, "x", "board 'held' is retired in the hardware map (line 6); change its state there"),
        ("nope", HealthState.GOOD, "x", "board 'nope' is not in this farm's map"),
    ],
)
def test_bad_operator_decisions_are_named(
    tmp_path: Path, board: str, state: HealthState, reason: str, expected: str
) -> None:
    with pytest.raises(InvalidArgument, match=expected.replace("(", r"\(").replace(")", r"\)")):
        _book(tmp_path, Clock()).set_state(board, state, reason, "ann@lab-1")


def test_two_books_on_one_state_directory_never_lose_each_others_changes(tmp_path: Path) -> None:
    first, second = _book(tmp_path, Clock()), _book(tmp_path, Clock())
    first.record_probe("b", BROKEN)
    second.set_state("b", HealthState.RETIRED, "gone", "ann@lab-1")  # read from disk first: it saw the probe
    assert _book(tmp_path, Clock()).record("b").probes_failed == 1
    assert _book(tmp_path, Clock()).state("b") is HealthState.RETIRED


def test_a_busy_board_is_ready_unless_held_out_and_nothing_is_recorded(tmp_path: Path) -> None:
    book = _book(tmp_path, Clock())

    def busy(board: object) -> ProbeResult:
        raise LeaseTimeout("b", 0.0, [None])

    assert book.ready_unless_busy(BOARD, busy) and book.state("b") is HealthState.UNKNOWN
    assert not book.ready_unless_busy(HWMAP.board("held"), busy)
    assert read_changes(tmp_path) == []
    with pytest.raises(InvalidArgument, match="bad_after=0, expected an integer >= 1"):
        _book(tmp_path, Clock(), bad_after=0)
