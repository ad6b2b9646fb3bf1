"""Which of a run's boards take work: those whose health is ready (probed when due, under the board's lease), or on
Dask those some online farm worker offers; and a probe that keeps what it read of each board's versions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from tinyhil.device_farm.health.states import HealthBook, ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board, HardwareMap

__all__ = ["good_boards", "offered_boards", "recording"]


def recording(probe: Callable[[Board], ProbeResult],
               versions: dict[str, Mapping[str, str]]) -> Callable[[Board], ProbeResult]:  # fmt: skip
    """``probe``, keeping in ``versions`` what each probe read of its board (firmware, driver)."""

    def probed(board: Board) -> ProbeResult:
        result = probe(board)
        versions[board.id] = result.versions
        return result

    return probed


def good_boards(hwmap: HardwareMap, health: HealthBook, out: TextIO,
                 probe: Callable[[Board], ProbeResult]) -> list[Board]:  # fmt: skip
    """The boards that may take work; one whose probe is due but is busy now stays in: its lane probes it, under its
    lease, before its first shard."""
    good = []
    for board in hwmap.boards:
        if health.ready_unless_busy(board, probe):
            good.append(board)
        else:
            record = health.record(board.id)
            print(f"board {board.id}: {record.state.value} ({record.reason}); it takes no work", file=out)
    return good


def offered_boards(hwmap: HardwareMap, offered: Sequence[Board], health: HealthBook, out: TextIO) -> list[Board]:
    """The map's boards some online worker offers (GOOD: the worker probed them); the others take no work."""
    ids = {board.id for board in offered}
    for board in hwmap.boards:
        if board.id in ids:
            health.record_probe(board.id, ProbeResult(True, "offered by a farm worker"))
        else:
            print(f"board {board.id}: no online worker offers it; it takes no work", file=out)
    return [board for board in hwmap.boards if board.id in ids]
