"""Board health: the five states, when a probe must run, and the record the farm keeps of every board.

``GOOD | UNKNOWN | BAD | MAINTENANCE | RETIRED``. A board the map puts in maintenance or retires keeps that state
whatever a probe says, and so does one an operator set so (:meth:`HealthBook.set_state`, ``tinyhil farm set``);
every other board starts UNKNOWN. A probe runs before a board takes work when it is UNKNOWN, after an
infrastructure failure on it (which makes it UNKNOWN again), and when its last probe is older than the probe
interval. ``bad_after`` consecutive infrastructure failures (no attempt that the board carried through in between)
make it BAD at once. A passing probe makes it GOOD; a failing one makes it BAD. A BAD board takes no work; it is
probed again on a backoff (:data:`REPROBE_BACKOFF_S`, doubling with each failed probe, up to the probe interval)
and returns to GOOD when a probe passes. Only GOOD boards are scheduled. Waiting for a busy board is never
recorded here.

The record (``health.json`` in the farm's state directory) is rewritten atomically after each change, under a lock,
from the file's latest content, so ``tinyhil farm status``, ``farm probe`` and ``farm set`` in other processes
neither read a torn record nor lose each other's changes. Every change of a board's state is appended to
``health.jsonl`` beside it with its reason and, for an operator's change, who made it
(:mod:`~tinyhil.device_farm.health.log`).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from tinyhil._files import write_atomically
from tinyhil.device_farm.health.log import HealthChange, append_change
from tinyhil.device_farm.inventory.hwmap import Board, MapState
from tinyhil.device_farm.leases import LeaseTimeout
from tinyhil.errors import InvalidArgument
from tinyhil.loading import LIMITS, Fields, FileFormatError, parse_json, read_capped

__all__ = [
    "DEFAULT_BAD_AFTER",
    "DEFAULT_PROBE_INTERVAL_S",
    "REPROBE_BACKOFF_S",
    "BoardHealth",
    "HealthBook",
    "HealthState",
    "ProbeResult",
]

DEFAULT_PROBE_INTERVAL_S: Final = 3600.0
DEFAULT_BAD_AFTER: Final = 3  # consecutive infrastructure failures that make a board BAD at once
REPROBE_BACKOFF_S: Final = 60.0  # a BAD board's first re-probe; each failed probe doubles it, up to the interval
HEALTH_FILE: Final = "health.json"
_LOCK_FILE: Final = "health.json.lock"


class HealthState(StrEnum):
    GOOD = "GOOD"
    UNKNOWN = "UNKNOWN"
    BAD = "BAD"
    MAINTENANCE = "MAINTENANCE"
    RETIRED = "RETIRED"


_FROM_MAP: Final[Mapping[MapState, HealthState]] = {
    MapState.MAINTENANCE: HealthState.MAINTENANCE,
    MapState.RETIRED: HealthState.RETIRED,
}


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What a health probe saw: ``ok``, a one-line ``detail`` (why not, or what was checked), and the versions it
    read of the board (``firmware``, ``driver``: what the run's reports show), where it could."""

    ok: bool
    detail: str
    versions: Mapping[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class BoardHealth:
    """One board's record: state, why, when it was last probed and when its state last changed (seconds since the
    epoch), and failure counts: all of them, and those in a row (``consecutive_failures``: infrastructure failures
    since the board last carried an attempt through; ``bad_probes``: failed probes since one last passed)."""

    state: HealthState = HealthState.UNKNOWN
    reason: str = "never probed"
    probed_at: float | None = None
    probes_failed: int = 0
    infrastructure_failures: int = 0
    consecutive_failures: int = 0
    bad_probes: int = 0
    changed_at: float | None = None


_REASON_MAX_CHARS: Final = LIMITS["health"].max_bytes  # a probe's detail is kept whole: the file's cap bounds it
_RECORD_FIELDS: Final = ("state", "reason", "probed_at", "probes_failed", "infrastructure_failures",
                         "consecutive_failures", "bad_probes", "changed_at")  # fmt: skip
_COUNTS: Final = ("probes_failed", "infrastructure_failures", "consecutive_failures", "bad_probes")
_HELD_STATES: Final = (HealthState.MAINTENANCE, HealthState.RETIRED)  # no probe or failure changes them


def _record(records: Fields, board_id: str) -> BoardHealth:
    """One board's record from ``health.json``, every field typed (a missing optional one takes its default)."""
    record = records.table_of(board_id)
    assert record is not None
    record.only(_RECORD_FIELDS)
    state = record.choice("state", HealthState)
    assert state is not None
    counts = {name: record.integer(name, required=False, minimum=0) or 0 for name in _COUNTS}
    return BoardHealth(
        state,
        record.string("reason", required=False, max_len=_REASON_MAX_CHARS, empty=True) or "",
        record.number("probed_at", required=False),
        changed_at=record.number("changed_at", required=False),
        **counts,
    )


class HealthBook:
    """The health of every board of a map, kept in ``state_dir/health.json`` when a directory is given.

    ``clock`` gives the current time in seconds (``time.time`` in the farm; a test passes its own).
    """

    def __init__(
        self,
        boards: tuple[Board, ...],
        *,
        clock: Callable[[], float],
        state_dir: Path | None = None,
        probe_interval_s: float = DEFAULT_PROBE_INTERVAL_S,
        bad_after: int = DEFAULT_BAD_AFTER,
    ) -> None:
        if not probe_interval_s > 0:
            raise InvalidArgument(f"probe_interval_s={probe_interval_s!r}, expected a number of seconds > 0")
        if type(bad_after) is not int or bad_after < 1:
            raise InvalidArgument(f"bad_after={bad_after!r}, expected an integer >= 1 (infrastructure failures)")
        self.bad_after = bad_after
        self._boards = {board.id: board for board in boards}
        self._clock = clock
        self._path = None if state_dir is None else Path(state_dir) / HEALTH_FILE
        self.probe_interval_s = probe_interval_s
        self._records: dict[str, BoardHealth] = {board_id: BoardHealth() for board_id in self._boards}
        if self._path is not None and self._path.exists():
            self._records.update(self._read(self._path, self._boards))

    @staticmethod
    def _read(path: Path, boards: Mapping[str, Board]) -> dict[str, BoardHealth]:
        """The records of ``boards`` in ``path`` (other boards' records are kept out of this book).

        Raises:
            FileFormatError: naming the file and the field, and that deleting it starts every board from UNKNOWN.
        """
        try:
            document = Fields(parse_json(read_capped(path, "health"), path), path)
            records = document.table_of("boards")
            assert records is not None
            return {board_id: _record(records, board_id) for board_id in records.table if board_id in boards}
        except FileFormatError as exc:
            why = f"{exc.why} (not a health record; delete it to start every board from UNKNOWN)"
            raise FileFormatError(exc.path, exc.line, exc.field, why) from None

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """Hold the record's lock and start from the file's latest content (another process may have changed it)."""
        if self._path is None:
            yield
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path.parent / _LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if self._path.exists():
                self._records.update(self._read(self._path, self._boards))
            yield
        finally:
            os.close(fd)

    def _change(self, board_id: str, record: BoardHealth, by: str = "", *, always: bool = False) -> BoardHealth:
        """Store ``record`` (under :meth:`_changing`), journal a change of state (``always``: even to the same
        state), and return the board's record."""
        before = self._records[board_id]
        if record.state is not before.state or always:
            record = replace(record, changed_at=self._clock())
            if self._path is not None:
                change = HealthChange(record.changed_at or 0.0, board_id, before.state.value, record.state.value,
                                      record.reason, by)  # fmt: skip
                append_change(self._path.parent, change)
        self._records[board_id] = record
        self._save()
        return self.record(board_id)

    def _save(self) -> None:
        if self._path is None:
            return
        document: dict[str, Any] = {
            "boards": {k: {**asdict(v), "state": v.state.value} for k, v in self._records.items()}
        }
        write_atomically(self._path, json.dumps(document, indent=1, sort_keys=True), durable=True)

    def _board(self, board_id: str) -> Board:
        board = self._boards.get(board_id)
        if board is None:
            known = ", ".join(self._boards) or "none"
            raise InvalidArgument(f"board {board_id!r} is not in this farm's map; boards: {known}")
        return board

    def record(self, board_id: str) -> BoardHealth:
        """The board's record, with the map's maintenance or retired state overriding the probes'."""
        board, record = self._board(board_id), self._records[board_id]
        if board.state is not None:
            return replace(record, state=_FROM_MAP[board.state], reason=f"{board.state.value} in the hardware map")
        return record

    def state(self, board_id: str) -> HealthState:
        return self.record(board_id).state

    def reprobe_after_s(self, board_id: str) -> float:
        """How long after its last probe (or its fall) a BAD board is probed again: the backoff, doubled per failed
        probe in a row, never past the probe interval."""
        doublings = max(self._records[board_id].bad_probes - 1, 0)
        return float(min(REPROBE_BACKOFF_S * 2.0 ** min(doublings, 32), self.probe_interval_s))

    def needs_probe(self, board_id: str) -> bool:
        """True when the board must be probed before it takes work (never for maintenance or retired boards)."""
        record = self.record(board_id)
        if record.state in _HELD_STATES:
            return False
        if record.state is HealthState.UNKNOWN or record.probed_at is None:
            return True
        if record.state is HealthState.BAD:
            last = max(record.probed_at, record.changed_at or 0.0)
            return self._clock() - last >= self.reprobe_after_s(board_id)
        return self._clock() - record.probed_at >= self.probe_interval_s

    def schedulable(self, board_id: str) -> bool:
        """True when the board may take work now: GOOD, and its probe is not due."""
        return self.state(board_id) is HealthState.GOOD and not self.needs_probe(board_id)

    def ready(self, board: Board, probe: Callable[[Board], ProbeResult]) -> bool:
        """Probe ``board`` if its probe is due, then whether it may take work (the one place that rule lives).
        What ``probe`` raises (the board was busy: no probe ran) propagates, and nothing is recorded."""
        if self.needs_probe(board.id):
            self.record_probe(board.id, probe(board))
        return self.schedulable(board.id)

    def ready_unless_busy(self, board: Board, probe: Callable[[Board], ProbeResult]) -> bool:
        """:meth:`ready`, where a board whose due probe could not run because it is busy (``probe`` raised
        :class:`~tinyhil.device_farm.leases.LeaseTimeout`) counts as ready unless held out: busy is not a fault, and
        its next user probes it first."""
        try:
            return self.ready(board, probe)
        except LeaseTimeout:
            return self.state(board.id) not in _HELD_STATES

    def record_probe(self, board_id: str, result: ProbeResult) -> BoardHealth:
        """Record a probe's result: GOOD when it passed, BAD (with its detail as the reason) when it failed; a board
        an operator holds in maintenance or retired keeps that state (the probe's time is still recorded)."""
        self._board(board_id)
        with self._changing():
            record = replace(self._records[board_id], probed_at=self._clock())
            if record.state in _HELD_STATES:
                pass
            elif result.ok:  # a board that lost its device between tests may probe fine: only a BAD board's streak
                streak = 0 if record.state is HealthState.BAD else record.consecutive_failures  # starts afresh here
                record = replace(record, state=HealthState.GOOD, reason=result.detail, bad_probes=0,
                                 consecutive_failures=streak)  # fmt: skip
            else:
                record = replace(record, state=HealthState.BAD, reason=f"probe failed: {result.detail}",
                                 probes_failed=record.probes_failed + 1, bad_probes=record.bad_probes + 1)  # fmt: skip
            return self._change(board_id, record)

    def record_infrastructure_failure(self, board_id: str, cause: str) -> BoardHealth:
        """An infrastructure failure on the board (lost, worker killed): UNKNOWN until re-probed, or BAD at once when
        it is the ``bad_after``-th in a row."""
        self._board(board_id)
        with self._changing():
            record = self._records[board_id]
            if record.state in _HELD_STATES:
                return self.record(board_id)
            streak = record.consecutive_failures + 1
            record = replace(record, infrastructure_failures=record.infrastructure_failures + 1,
                             consecutive_failures=streak)  # fmt: skip
            if streak >= self.bad_after:
                why = f"{streak} infrastructure failures in a row (at most {self.bad_after - 1}), the last: {cause}"
                record = replace(record, state=HealthState.BAD, reason=why)
            elif record.state is not HealthState.BAD:
                record = replace(record, state=HealthState.UNKNOWN, reason=f"infrastructure failure: {cause}")
            return self._change(board_id, record)

    def record_carried(self, board_id: str) -> None:
        """The board carried an attempt through (the test passed or failed on its own): its infrastructure failures
        are no longer in a row. Writes nothing when there were none."""
        self._board(board_id)
        if self._records[board_id].consecutive_failures == 0:
            return
        with self._changing():
            self._change(board_id, replace(self._records[board_id], consecutive_failures=0))

    def set_state(self, board_id: str, state: HealthState, reason: str, by: str) -> BoardHealth:
        """An operator's decision (``tinyhil farm set``): MAINTENANCE or RETIRED hold the board out of scheduling
        whatever probes say; GOOD returns it to service, probed again before its next work.

        Raises:
            InvalidArgument: a state other than GOOD, MAINTENANCE or RETIRED, an empty reason, or a board the
                hardware map itself holds out (the map wins: change it there).
        """
        board = self._board(board_id)
        if state not in (HealthState.GOOD, *_HELD_STATES):
            raise InvalidArgument(f"state {state.value!r}, expected one of good, maintenance, retired")
        if not reason.strip():
            raise InvalidArgument("reason '', expected a few words saying why (--reason TEXT)")
        if board.state is not None:
            raise InvalidArgument(f"board {board_id!r} is {board.state.value} in the hardware map (line {board.line}); "
                                  "change its state there")  # fmt: skip
        with self._changing():
            record = replace(self._records[board_id], state=state, reason=f"{state.value.lower()}: {reason} ({by})",
                             consecutive_failures=0, bad_probes=0)  # fmt: skip
            if state is HealthState.GOOD:
                record = replace(record, probed_at=None)
            return self._change(board_id, record, by, always=True)  # an operator's word is kept, changed or not
