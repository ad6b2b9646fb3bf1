"""tinyhil's own errors on the USB path (``usb1``'s exception classes pass through untouched)."""

from __future__ import annotations

from tinyhil.errors import DeviceError, TinyHilError

__all__ = ["BridgeUnavailable", "ShortTransfer"]


class BridgeUnavailable(TinyHilError, RuntimeError):
    """No ASM2464 bridge can be opened as asked; ``reason`` (also ``str()``) says precisely why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ShortTransfer(DeviceError):
    """A transfer completed without error but moved fewer bytes than asked (the bridge always moves them all)."""

    def __init__(self, op: str, what: str, expected: int, actual: int) -> None:
        super().__init__(f"{what} moved {actual:#x} of {expected:#x} bytes (short transfer)", op=op)
        self.expected = expected
        self.actual = actual
