"""Emulator-level USB outcomes of the ASM2464 model (the usb1 mock turns them into usb1's exception classes)."""

from __future__ import annotations

from tinyhil.errors import DeviceError, DeviceTimeout

__all__ = ["UsbBabble", "UsbError", "UsbNoDevice", "UsbStall", "UsbTimeout"]


class UsbError(DeviceError):
    """A USB transfer to the emulated bridge failed the way it would on the wire."""


class UsbStall(UsbError):
    """The device answered with STALL (a rejected control request, a halted endpoint)."""


class UsbTimeout(UsbError, DeviceTimeout):
    """The transfer did not complete within its (virtual) timeout; ``partial`` holds the bytes moved before that."""

    def __init__(self, message: str, *, partial: bytes = b"", op: str = "") -> None:
        super().__init__(message, op=op)
        self.partial = partial


class UsbNoDevice(UsbError):
    """The device is gone (unplugged): this and every later request fails."""


class UsbBabble(UsbError):
    """The device sent more than the IN transfer asked for (babble): the host controller reports an overflow."""
