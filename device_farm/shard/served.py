"""A served board's processes run under ``tinyhil serve``: the one place that wraps a command for such a board.

A shard (and the board's probe) on a ``kind = "served"`` board (:mod:`~tinyhil.device_farm.inventory.served_boards`)
runs as ``tinyhil serve usb|kfd --target T --option KEY=VALUE... -- COMMAND``, so COMMAND's tinyhil opens the
real-interface target (``USB+AMD`` over libusb, ``KFD+AMD`` over ``/dev/kfd``) and reaches the emulator through the
operating system's interfaces (docs/serve.md). Every other board's command runs as it is.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tinyhil.device_farm.inventory.hwmap import Board
from tinyhil.device_farm.inventory.served_boards import ServedLocator, ServeKind, serve_arguments

__all__ = ["served_command", "served_unavailable_reason"]


def served_command(board: Board, command: Sequence[str]) -> list[str]:
    """``command`` as it runs on ``board``: under ``tinyhil serve`` (this interpreter's tinyhil) on a served board,
    else unchanged."""
    if not isinstance(board.locator, ServedLocator):
        return list(command)
    return [sys.executable, "-m", "tinyhil.cli", "serve", *serve_arguments(board.locator), "--", *command]


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
