"""Board health: the five states, when a probe must run, and the record the farm keeps of every board.

``GOOD | UNKNOWN | BAD | MAINTENANCE | RETIRED``. A board the map puts in maintenance or retires keeps that state
whatever a probe says; every other board starts UNKNOWN. A probe runs before a board takes work when it is
UNKNOWN, after an infrastructure failure on it (which makes it UNKNOWN again), and when its last probe is older
than the probe interval. A passing probe makes it GOOD; a failing one makes it BAD, and a BAD board takes no work
until a later probe passes. Only GOOD boards are scheduled.

The record (``health.json`` in the farm's state directory) is rewritten atomically after each change, so
``tinyhil farm status`` in another process reads a whole one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from tinyhil._files import write_atomically
from tinyhil.device_farm.inventory.hwmap import Board, MapState
from tinyhil.errors import InvalidArgument
from tinyhil.loading import LIMITS, Fields, FileFormatError, parse_json, read_capped

__all__ = ["DEFAULT_PROBE_INTERVAL_S", "BoardHealth", "HealthBook", "HealthState", "ProbeResult"]

DEFAULT_PROBE_INTERVAL_S: Final = 3600.0
HEALTH_FILE: Final = "health.json"


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
    """One board's record: state, why, when it was last probed (seconds since the epoch) and failure counts."""

    state: HealthState = HealthState.UNKNOWN
    reason: str = "never probed"
    probed_at: float | None = None
    probes_failed: int = 0
    infrastructure_failures: int = 0


_REASON_MAX_CHARS: Final = LIMITS["health"].max_bytes  # a probe's detail is kept whole: the file's cap bounds it
_RECORD_FIELDS: Final = ("state", "reason", "probed_at", "probes_failed", "infrastructure_failures")


def _record(records: Fields, board_id: str) -> BoardHealth:
    """One board's record from ``health.json``, every field typed (a missing optional one takes its default)."""
    record = records.table_of(board_id)
    assert record is not None
    record.only(_RECORD_FIELDS)
    state = record.choice("state", HealthState)
    assert state is not None
    return BoardHealth(
        state,
        record.string("reason", required=False, max_len=_REASON_MAX_CHARS, empty=True) or "",
        record.number("probed_at", required=False),
        record.integer("probes_failed", required=False, minimum=0) or 0,
        record.integer("infrastructure_failures", required=False, minimum=0) or 0,
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
    ) -> None:
        if not probe_interval_s > 0:
            raise InvalidArgument(f"probe_interval_s={probe_interval_s!r}, expected a number of seconds > 0")
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

    def needs_probe(self, board_id: str) -> bool:
        """True when the board must be probed before it takes work (never for maintenance or retired boards)."""
        record = self.record(board_id)
        if record.state in (HealthState.MAINTENANCE, HealthState.RETIRED):
            return False
        if record.state is HealthState.UNKNOWN or record.probed_at is None:
            return True
        return self._clock() - record.probed_at >= self.probe_interval_s

    def schedulable(self, board_id: str) -> bool:
        """True when the board may take work now: GOOD, and its probe is not due."""
        return self.state(board_id) is HealthState.GOOD and not self.needs_probe(board_id)

    def ready(self, board: Board, probe: Callable[[Board], ProbeResult]) -> bool:
        """Probe ``board`` if its probe is due, then whether it may take work (the one place that rule lives)."""
        if self.needs_probe(board.id):
            self.record_probe(board.id, probe(board))
        return self.schedulable(board.id)

    def record_probe(self, board_id: str, result: ProbeResult) -> BoardHealth:
        """Record a probe's result: GOOD when it passed, BAD (with its detail as the reason) when it failed."""
        self._board(board_id)
        record = self._records[board_id]
        if result.ok:
            record = replace(record, state=HealthState.GOOD, reason=result.detail, probed_at=self._clock())
        else:
            record = replace(record, state=HealthState.BAD, reason=f"probe failed: {result.detail}",
                             probed_at=self._clock(), probes_failed=record.probes_failed + 1)  # fmt: skip
        self._records[board_id] = record
        self._save()
        return self.record(board_id)

    def record_infrastructure_failure(self, board_id: str, cause: str) -> BoardHealth:
        """An infrastructure failure on the board (lost, lease timeout, worker killed): UNKNOWN until re-probed."""
        self._board(board_id)
        record = self._records[board_id]
        record = replace(record, state=HealthState.UNKNOWN, reason=f"infrastructure failure: {cause}",
                         infrastructure_failures=record.infrastructure_failures + 1)  # fmt: skip
        self._records[board_id] = record
        self._save()
        return self.record(board_id)
