"""Emulator outcomes in usb1's vocabulary: transfer statuses and exception classes."""

from __future__ import annotations

from typing import Final

import usb1  # type: ignore[import-untyped]  # libusb1 ships no type information

from tinyhil.emulators.asm2464 import UsbBabble, UsbError, UsbNoDevice, UsbStall, UsbStatus, UsbTimeout

__all__ = ["STATUS_TO_USB1", "invalid_param", "usb1_error"]

STATUS_TO_USB1: Final = {
    UsbStatus.COMPLETED: usb1.TRANSFER_COMPLETED,
    UsbStatus.TIMED_OUT: usb1.TRANSFER_TIMED_OUT,
    UsbStatus.STALL: usb1.TRANSFER_STALL,
    UsbStatus.NO_DEVICE: usb1.TRANSFER_NO_DEVICE,
    UsbStatus.CANCELLED: usb1.TRANSFER_CANCELLED,
    UsbStatus.BABBLE: usb1.TRANSFER_OVERFLOW,
}


def usb1_error(error: UsbError, *, is_in: bool) -> usb1.USBError:
    """The usb1 exception a real device would produce, with the emulator's diagnosis as a note."""
    result: usb1.USBError
    if isinstance(error, UsbStall):
        result = usb1.USBErrorPipe(usb1.ERROR_PIPE)
    elif isinstance(error, UsbNoDevice):
        result = usb1.USBErrorNoDevice(usb1.ERROR_NO_DEVICE)
    elif isinstance(error, UsbBabble):  # libusb's LIBUSB_ERROR_OVERFLOW; usb1 attaches no data to it
        result = usb1.USBErrorOverflow(usb1.ERROR_OVERFLOW)
    elif isinstance(error, UsbTimeout):
        result = usb1.USBErrorTimeout(usb1.ERROR_TIMEOUT)
        result.transferred = len(error.partial)
        if is_in:
            result.received = bytearray(error.partial)
    else:
        result = usb1.USBErrorInterrupted(usb1.ERROR_INTERRUPTED)
    result.add_note(f"emulated ASM2464: {error}")
    return result


def invalid_param(message: str) -> usb1.USBError:
    """``USBErrorInvalidParam`` with ``message`` as its note."""
    error = usb1.USBErrorInvalidParam(usb1.ERROR_INVALID_PARAM)
    error.add_note(message)
    return error
