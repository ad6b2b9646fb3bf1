"""One call to a fresh emulated board, its context and an opened, claimed handle (for tests and mocks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.emulators.kernel import EventKernel
from tinyhil.mocks.usb.context import EmulatedUsbContext, TransferMode
from tinyhil.mocks.usb.device import EmulatedUsbDevice
from tinyhil.mocks.usb.handle import EmulatedUsbDeviceHandle

__all__ = ["EmulatedBoard", "open_emulated_board"]


@dataclass(frozen=True, slots=True)
class EmulatedBoard:
    """A board with its context, device and handle; ``with open_emulated_board() as board:`` closes it."""

    context: EmulatedUsbContext
    device: EmulatedUsbDevice
    handle: EmulatedUsbDeviceHandle
    bridge: Asm2464

    @property
    def kernel(self) -> EventKernel:
        return self.bridge.kernel

    def close(self) -> None:
        self.handle.close()
        self.context.close()

    def __enter__(self) -> EmulatedBoard:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_emulated_board(
    *, mode: TransferMode | str = TransferMode.SYNC, claim: bool = True, **bridge_options: Any
) -> EmulatedBoard:
    """Build a fresh :class:`Asm2464` from ``bridge_options`` (quirks, faults, timing, function, seed, ...), put it
    on a new context in ``mode``, open it and (by default) claim interface 0."""
    bridge = Asm2464(**bridge_options)
    context = EmulatedUsbContext(bridge, mode=mode)
    device = context.getDeviceList()[0]
    handle = device.open()
    if claim:
        handle.claimInterface(0)
    return EmulatedBoard(context, device, handle, bridge)
