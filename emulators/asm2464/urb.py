"""A USB transfer as the bridge's device front sees it, and how it ended."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Final

from tinyhil.emulators.asm2464.errors import UsbBabble, UsbError, UsbNoDevice, UsbStall, UsbTimeout
from tinyhil.emulators.asm2464.sram import Arm
from tinyhil.emulators.faults import Fault
from tinyhil.emulators.kernel import EventHandle
from tinyhil.spec.asm2464 import BULK_IN_EP

__all__ = ["Urb", "UsbStatus"]

_DIRECTION_IN: Final = 0x80


class UsbStatus(Enum):
    """How a transfer ended (the mock maps these to usb1's ``TRANSFER_*``)."""

    COMPLETED = "completed"
    TIMED_OUT = "timed_out"
    STALL = "stall"
    NO_DEVICE = "no_device"
    CANCELLED = "cancelled"
    BABBLE = "babble"  # the device overran an IN data stage, after the bytes asked for (docs/faults.md "Babble")


_COMPLETED: Final = UsbStatus.COMPLETED


@dataclass(eq=False, slots=True, init=False)
class Urb:
    """One transfer: control (``setup`` = bmRequestType, bRequest, wValue, wIndex) or bulk on ``endpoint``.

    ``length`` is wLength / the bulk length; ``payload`` the OUT bytes (read when they move). On completion
    ``status`` is set, ``data`` holds the IN bytes received (also a partial read) and ``actual_length`` the count.
    The constructor takes the inputs; the other fields are the outcome and the front's bookkeeping (below). An IN
    transfer may name ``into``, the buffer its bytes belong in (an asynchronous libusb transfer on the caller's
    buffer): the front then delivers them there, and ``data`` is a view of them.
    """

    endpoint: int
    length: int
    timeout_ns: int
    setup: tuple[int, int, int, int] | None
    payload: memoryview | None
    into: memoryview | bytearray | None
    on_complete: Callable[[Urb], None] | None
    status: UsbStatus | None
    data: bytes | bytearray | memoryview
    actual_length: int
    message: str
    submitted_ns: int
    completed_ns: int
    # the front's bookkeeping (emulators/asm2464/front.py and the parts it owns)
    deadline: EventHandle | None  # the timeout event, scheduled only when it can matter
    moving: EventHandle | None  # the next event that moves it: arrival, EP0 service, the bulk's last packet
    arm: Arm | None  # a bulk: the arm it claimed and has not yet delivered against
    started_ns: int  # when it started moving (a bulk cut short delivers the whole packets since)
    planned: int  # a paired bulk: the bytes it will move
    limit: int | None  # a fault moves at most this many bytes (short write, partial timeout)
    stuck: bool  # the transfer will not complete: its deadline ends it
    fault: Fault | None
    is_in: bool

    def __init__(
        self,
        endpoint: int,
        length: int,
        timeout_ns: int,
        setup: tuple[int, int, int, int] | None = None,
        payload: memoryview | None = None,
        into: memoryview | bytearray | None = None,
        on_complete: Callable[[Urb], None] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.length = length
        self.timeout_ns = timeout_ns
        self.setup = setup
        self.payload = payload
        self.on_complete = on_complete
        self.into = into
        self.status = self.deadline = self.moving = self.arm = self.limit = self.fault = None
        self.data = b""
        self.actual_length = self.submitted_ns = self.completed_ns = self.started_ns = self.planned = 0
        self.message = ""
        self.stuck = False
        self.is_in = setup[0] & _DIRECTION_IN != 0 if setup is not None else endpoint == BULK_IN_EP

    def error(self) -> UsbError | None:
        """The emulator error a synchronous call raises for this outcome (``None`` when completed)."""
        if self.status is _COMPLETED:
            return None
        if self.status is UsbStatus.STALL:
            return UsbStall(self.message or "the endpoint stalled", op=self.describe())
        if self.status is UsbStatus.NO_DEVICE:
            return UsbNoDevice(self.message or "the device is gone", op=self.describe())
        if self.status is UsbStatus.CANCELLED:
            return UsbError(self.message or "cancelled", op=self.describe())
        if self.status is UsbStatus.BABBLE:
            return UsbBabble(self.message or "the device sent more than asked for", op=self.describe())
        moved = bytes(self.data) if self.is_in else bytes(self.payload[: self.actual_length]) if self.payload else b""
        return UsbTimeout(self.message or f"{self.describe()} timed out", partial=moved, op=self.describe())

    def describe(self) -> str:
        if self.setup is not None:
            _rt, request, value, index = self.setup
            direction = "IN" if self.is_in else "OUT"
            return f"control {direction} {request:#04x} (wValue={value:#x} wIndex={index:#x} wLength={self.length})"
        return f"bulk {'IN' if self.is_in else 'OUT'} {self.endpoint:#04x} of {self.length} bytes"
