"""A USB transfer as the bridge's device front sees it, and how it ended."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from tinyhil.emulators.asm2464.errors import UsbError, UsbNoDevice, UsbStall, UsbTimeout
from tinyhil.emulators.asm2464.sram import Arm
from tinyhil.emulators.faults import Fault
from tinyhil.emulators.kernel import EventHandle
from tinyhil.spec.asm24 import BULK_IN_EP

__all__ = ["Urb", "UsbStatus"]

_DIRECTION_IN: Final = 0x80


class UsbStatus(Enum):
    """How a transfer ended (the mock maps these to usb1's ``TRANSFER_*``)."""

    COMPLETED = "completed"
    TIMED_OUT = "timed_out"
    STALL = "stall"
    NO_DEVICE = "no_device"
    CANCELLED = "cancelled"


_COMPLETED: Final = UsbStatus.COMPLETED  # an Enum class attribute lookup goes through the metaclass


@dataclass(eq=False, slots=True)
class Urb:
    """One transfer: control (``setup`` = bmRequestType, bRequest, wValue, wIndex) or bulk on ``endpoint``.

    ``length`` is wLength / the bulk length; ``payload`` the OUT bytes (read when they move). On completion
    ``status`` is set, ``data`` holds the IN bytes received (also a partial read) and ``actual_length`` the count.
    """

    endpoint: int
    length: int
    timeout_ns: int
    setup: tuple[int, int, int, int] | None = None
    payload: memoryview | None = None
    on_complete: Callable[[Urb], None] | None = None
    status: UsbStatus | None = None
    data: bytes | bytearray = b""
    actual_length: int = 0
    message: str = ""
    submitted_ns: int = 0
    completed_ns: int = 0
    _deadline: EventHandle | None = None
    _moving: EventHandle | None = None
    _arm: Arm | None = None
    _started_ns: int = 0
    _planned: int = 0
    _limit: int | None = None  # a fault moves at most this many bytes (short write, partial timeout)
    _stuck: bool = False  # the transfer will not complete: its deadline ends it
    _fault: Fault | None = None
    is_in: bool = field(init=False)

    def __post_init__(self) -> None:
        self.is_in = bool(self.setup[0] & _DIRECTION_IN) if self.setup is not None else self.endpoint == BULK_IN_EP

    def error(self) -> UsbError | None:
        """The emulator error a synchronous call raises for this outcome (``None`` when completed)."""
        if self.status is _COMPLETED:  # hot: every synchronous transfer asks
            return None
        if self.status is UsbStatus.STALL:
            return UsbStall(self.message or "the endpoint stalled", op=self.describe())
        if self.status is UsbStatus.NO_DEVICE:
            return UsbNoDevice(self.message or "the device is gone", op=self.describe())
        if self.status is UsbStatus.CANCELLED:
            return UsbError(self.message or "cancelled", op=self.describe())
        moved = bytes(self.data) if self.is_in else bytes(self.payload[: self.actual_length]) if self.payload else b""
        return UsbTimeout(self.message or f"{self.describe()} timed out", partial=moved, op=self.describe())

    def describe(self) -> str:
        if self.setup is not None:
            _rt, request, value, index = self.setup
            direction = "IN" if self.is_in else "OUT"
            return f"control {direction} {request:#04x} (wValue={value:#x} wIndex={index:#x} wLength={self.length})"
        return f"bulk {'IN' if self.is_in else 'OUT'} {self.endpoint:#04x} of {self.length} bytes"
