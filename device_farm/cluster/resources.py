"""Boards as Dask worker resources (issue 17's engine builds on this), and the check that fails a run fast.

A farm worker advertises, for every GOOD board of its host, one resource per board (``board:<id>``, as many
units as the board has slots: Dask then never runs more shards on it at once) and capability counts by kind:
``usb3`` (USB bridges and emulated MOCKUSB boards), ``amd_kfd``, ``nv``, ``emu`` (emulated and served boards). A shard
asks for one unit of its board's resource. Before a run submits anything, :func:`unservable` names every shard
that no online worker can ever serve, so the run fails at once instead of waiting on Dask's ``no-worker`` state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from tinyhil.device_farm.inventory.hwmap import Board, BoardKind

__all__ = ["BOARD_PREFIX", "board_resource", "unservable", "worker_resources"]

BOARD_PREFIX: Final = "board:"
_KIND_COUNTS: Final[Mapping[BoardKind, str]] = {
    BoardKind.USB_BRIDGE: "usb3",
    BoardKind.AMD_KFD: "amd_kfd",
    BoardKind.NV: "nv",
    BoardKind.EMULATED: "emu",
    BoardKind.SERVED: "emu",  # an emulator, served to a real interface's target
}


def board_resource(board: Board) -> str:
    """The resource a shard on ``board`` asks one unit of."""
    return f"{BOARD_PREFIX}{board.id}"


def worker_resources(boards: Iterable[Board]) -> dict[str, float]:
    """What a worker whose GOOD boards are ``boards`` advertises: per board its slots, per kind the total slots
    (an emulated MOCKUSB board counts toward ``usb3`` as well as ``emu``)."""
    resources: dict[str, float] = {}
    for board in boards:
        resources[board_resource(board)] = float(board.slots)
        kinds = {_KIND_COUNTS[board.kind]}
        if board.kind is BoardKind.EMULATED and "usb3" in board.capabilities:
            kinds.add("usb3")
        for kind in kinds:
            resources[kind] = resources.get(kind, 0.0) + board.slots
    return resources


def unservable(
    needs: Mapping[str, tuple[Board, frozenset[str]]], workers: Mapping[str, Mapping[str, float]]
) -> list[str]:
    """One message per shard that no worker can serve: ``needs`` maps a shard's name to its board and the
    capabilities its tests require; ``workers`` maps a worker's address to the resources it advertises.

    ``no board with capabilities ['copyin', 'usb3'] on any worker for shard S (board bridge-a; workers:
    tcp://10.0.0.2:4001 offers board:emu, emu)``.
    """
    offered = (
        ", ".join(
            f"{address} offers {', '.join(sorted(resources)) or 'nothing'}"
            for address, resources in sorted(workers.items())
        )
        or "none online"
    )
    problems = []
    for shard, (board, requires) in sorted(needs.items()):
        resource = board_resource(board)
        if not any(resources.get(resource, 0) >= 1 for resources in workers.values()):
            problems.append(f"no board with capabilities {sorted(requires)} on any worker for shard {shard} "
                            f"(board {board.id}; workers: {offered})")  # fmt: skip
    return problems
