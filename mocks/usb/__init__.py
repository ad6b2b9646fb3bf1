"""The emulated ``usb1`` stack: context, devices, handles and transfers over emulated ASM2464 boards.

A drop-in for the ``usb1`` objects the USB transport uses: method names and signatures match ``usb1``'s, reads
return ``bytearray``, failures raise ``usb1``'s exception classes and transfers report ``usb1.TRANSFER_*`` statuses.

    with open_emulated_board(mode="timed", quirks=Quirks(full_window_corruption=True)) as board:
        board.handle.controlWrite(0x40, 0xF2, 512, 16 << 8, b"")      # arm window 0 (256 KB)
        board.handle.bulkWrite(0x02, payload)                          # lands in SRAM 0x0-0x3FFFF
        board.bridge.read_sram(0, len(payload))                        # the emulator behind the handle

Several boards on one bus: ``EmulatedUsbContext(Asm2464(kernel=k, serial="A"), Asm2464(kernel=k, serial="B"))``.
"""

from __future__ import annotations

from tinyhil.mocks.usb.context import EmulatedUsbContext, TransferMode
from tinyhil.mocks.usb.device import EmulatedUsbDevice
from tinyhil.mocks.usb.handle import EmulatedUsbDeviceHandle
from tinyhil.mocks.usb.session import EmulatedBoard, open_emulated_board
from tinyhil.mocks.usb.transfer import EmulatedUsbTransfer

__all__ = [
    "EmulatedBoard",
    "EmulatedUsbContext",
    "EmulatedUsbDevice",
    "EmulatedUsbDeviceHandle",
    "EmulatedUsbTransfer",
    "TransferMode",
    "open_emulated_board",
]
