"""A served board's processes run under ``tinyhil serve``: the one place that wraps a command for such a board.

A shard (and the board's probe) on a ``kind = "served"`` board (:mod:`~tinyhil.device_farm.inventory.served_boards`)
runs as ``tinyhil serve usb|kfd --target T --option KEY=VALUE... -- COMMAND``, so COMMAND's tinyhil opens the
real-interface target (``USB+AMD`` over libusb, ``KFD+AMD`` over ``/dev/kfd``) and reaches the emulator through the
operating system's interfaces (docs/serve.md). Every other board's command runs as it is.

Whether a served board's target can run is the board's probe's verdict (under ``tinyhil serve``), not that of the
farm's own process, where ``/dev/kfd`` or the bridge does not exist: :func:`served_collection` and
:func:`unavailable_here` say so for the run's collection and its summary.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tinyhil.device_farm.inventory.hwmap import Board
from tinyhil.device_farm.inventory.served_boards import ServedLocator, ServeKind, serve_arguments
from tinyhil.fixtures.selection import HilRequirement, TargetStatus, ineligible_reason
from tinyhil.fixtures.summary import target_entry
from tinyhil.registry import Target, TargetRegistry, default_registry

__all__ = [
    "described_targets",
    "served_collection",
    "served_command",
    "served_shard",
    "served_targets",
    "served_unavailable_reason",
    "unavailable_here",
]


def served_command(board: Board, command: Sequence[str], *, record: bool = True) -> list[str]:
    """``command`` as it runs on ``board``: under ``tinyhil serve`` (this interpreter's tinyhil) on a served board,
    else unchanged; without ``record``, the board's ``record`` option is left out."""
    if not isinstance(board.locator, ServedLocator):
        return list(command)
    serve = serve_arguments(board.locator, record=record)
    return [sys.executable, "-m", "tinyhil.cli", "serve", *serve, "--", *command]


def served_shard(board: Board, command: Sequence[str], parent_pid: int) -> tuple[list[str], int]:
    """A shard's command line on ``board`` (:func:`served_command`) and the process the shard's plugin dies with:
    ``parent_pid`` (the engine), or on a served board 0, none: the shard's parent is ``tinyhil serve``, which the
    engine ends (SIGTERM) and which ends the shard with it."""
    served = isinstance(board.locator, ServedLocator)
    return served_command(board, command), 0 if served else parent_pid


def served_unavailable_reason(locator: ServedLocator) -> str | None:
    """``None`` when ``tinyhil serve`` can serve ``locator`` here, else why not, naming the Debian package (umockdev
    and its typelib, or PyGObject, for ``usb``; a C compiler for ``kfd``)."""
    if locator.serve is ServeKind.USB:
        from tinyhil.mocks.serve.usb import umockdev_unavailable_reason

        return umockdev_unavailable_reason()
    from tinyhil.mocks.serve.kfd.build import COMPILER_PACKAGE, compiler

    if compiler() is None:
        return (f"tinyhil serve kfd builds its LD_PRELOAD library with a C compiler and none is on PATH; install the "
                f"Debian package {COMPILER_PACKAGE}")  # fmt: skip
    return None


def served_targets(boards: Iterable[Board]) -> frozenset[str]:
    """The targets the served boards among ``boards`` present."""
    return frozenset(t for board in boards if isinstance(board.locator, ServedLocator) for t in board.targets)


def unavailable_here(target: Target, served: frozenset[str]) -> str | None:
    """Why ``target`` cannot run in this process (``None``: it can, or a served board in ``served`` presents it)."""
    return None if target.name in served else target.unavailable_reason()


def served_collection(pairs: Sequence[Mapping[str, Any]], served: frozenset[str],
                      registry: TargetRegistry | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """``pairs`` as collected (:func:`~tinyhil.device_farm.collection.read_pairs`), with the skip of a pair of a
    ``served`` target decided as if the target were available here: a pair skipped only because the collecting
    process cannot open the target runs on its served board; one its target cannot run for another reason (a missing
    capability, a pattern, a skip of its own) keeps its skip."""
    registry = default_registry() if registry is None else registry
    reasons: dict[str, str | None] = {}
    kept = []
    for pair in pairs:
        name = pair["target"]
        if name not in served or not pair["skip"]:
            kept.append(dict(pair))
            continue
        target = registry.resolve(name)
        if name not in reasons:
            reasons[name] = target.unavailable_reason()
        need = HilRequirement(frozenset(pair["requires"]), tuple(tuple(group) for group in pair["targets"]))
        if pair["skip"] == ineligible_reason(TargetStatus(target, reasons[name]), need):
            kept.append({**pair, "skip": ineligible_reason(TargetStatus(target, None), need)})
        else:
            kept.append(dict(pair))
    return kept


def described_targets(targets: Sequence[str], served: frozenset[str]) -> list[dict[str, Any]]:
    """The run's targets as the summary lists them: availability here (a target of a served board's, ``served``,
    is available), with the reason, and capabilities."""
    described = []
    for name in targets:
        resolved = default_registry().resolve(name)
        described.append(target_entry(name, unavailable_here(resolved, served), resolved.capabilities))
    return described
