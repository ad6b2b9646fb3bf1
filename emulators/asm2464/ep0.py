"""The bridge's control endpoint (EP0): the control-transfer step and the USB chapter 9 standard requests.

A control transfer runs on the 8051 once it reaches the head of the EP0 queue (``UsbFront._start`` reserves the
core and schedules :meth:`_ControlEndpoint._run_control`); vendor requests go to the bridge
(``Asm2464.vendor_request``), standard requests are answered here. :class:`_ControlEndpoint` is the EP0 part of
:class:`~tinyhil.emulators.asm2464.front.UsbFront`, which inherits it (no call layer on the transfer path).
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, Final

from tinyhil.emulators.asm2464.errors import UsbStall
from tinyhil.emulators.asm2464.urb import Urb, UsbStatus
from tinyhil.spec.asm2464 import BULK_IN_EP, BULK_OUT_EP

if TYPE_CHECKING:
    from tinyhil.emulators.asm2464.device import Asm2464

__all__ = ["CONTROL_EP", "StandardRequest"]

CONTROL_EP: Final = 0x00
_ENDPOINTS: Final = (CONTROL_EP, BULK_OUT_EP, BULK_IN_EP)  # every endpoint of the bridge
_DIRECTION_IN: Final = 0x80
_COMPLETED: Final = UsbStatus.COMPLETED
_TYPE_MASK: Final = 0x60  # bmRequestType bits 6:5: 0 standard, 1 class, 2 vendor
_RECIPIENT_MASK: Final = 0x1F
_RECIPIENT_DEVICE, _RECIPIENT_INTERFACE, _RECIPIENT_ENDPOINT = 0, 1, 2
_FEATURE_ENDPOINT_HALT: Final = 0
_CONFIGURATIONS: Final = (0, 1)  # unconfigured, and configuration 1 (spec/asm24.md "Identity and link")


class StandardRequest(IntEnum):
    """USB 2.0 chapter 9 standard requests the front answers."""

    GET_STATUS = 0x00
    CLEAR_FEATURE = 0x01
    GET_CONFIGURATION = 0x08
    SET_CONFIGURATION = 0x09
    SET_INTERFACE = 0x0B


class _ControlEndpoint:
    """EP0 of :class:`~tinyhil.emulators.asm2464.front.UsbFront` (its base): control transfers, standard requests."""

    bridge: Asm2464
    halted: set[int]
    configuration: int
    alt_setting: int

    if TYPE_CHECKING:  # defined by UsbFront

        def _ensure_deadline(self, urb: Urb, busy_until_ns: int | None = None) -> None: ...

        def _finish(self, urb: Urb, status: UsbStatus, message: str = "") -> None: ...

    def _run_control(self, urb: Urb) -> None:
        urb._moving = None
        setup = urb.setup
        assert setup is not None
        bridge = self.bridge
        if bridge.wedged:
            urb._stuck = True
            self._ensure_deadline(urb)
            return
        request_type, request, value, index = setup
        if urb._stuck and not urb.is_in:  # a timed-out control OUT never reaches the firmware
            urb.actual_length = urb._limit or 0
            return
        payload = urb.payload
        data = payload.tobytes() if payload else b""
        try:
            if request_type & _TYPE_MASK:
                result = bridge.vendor_request(request_type, request, value, index, data, urb.length)
            else:
                result = self._standard_request(request_type, request, value, index, data, urb.length)
        except UsbStall as stall:
            self._finish(urb, UsbStatus.STALL, str(stall))
            return
        if urb.is_in:
            urb.data = result if urb._limit is None else result[: urb._limit]
            urb.actual_length = len(urb.data)
        else:
            urb.actual_length = len(data)
        if not urb._stuck:
            self._finish(urb, _COMPLETED)

    def _standard_request(
        self, request_type: int, request: int, value: int, index: int, data: bytes, length: int
    ) -> bytes:
        """EP0 standard requests; CLEAR_FEATURE(HALT), SET_CONFIGURATION and SET_INTERFACE reset the engine."""
        recipient = request_type & _RECIPIENT_MASK
        is_in = bool(request_type & _DIRECTION_IN)
        setup = (is_in, request, recipient)
        if data:
            pass  # no standard request the bridge answers has an OUT data stage
        elif setup == (False, StandardRequest.CLEAR_FEATURE, _RECIPIENT_ENDPOINT) and value == _FEATURE_ENDPOINT_HALT:
            if index in _ENDPOINTS:
                self.halted.discard(index)
                self.bridge.engine.drop_arms()
                return b""
        elif setup == (False, StandardRequest.SET_CONFIGURATION, _RECIPIENT_DEVICE):
            if value in _CONFIGURATIONS and index == 0:
                self.configuration = value
                self.bridge.engine.drop_arms()
                return b""
        elif setup == (False, StandardRequest.SET_INTERFACE, _RECIPIENT_INTERFACE):
            if (value, index) == (0, 0):
                self.alt_setting = value
                self.bridge.engine.drop_arms()
                return b""
        elif setup == (True, StandardRequest.GET_CONFIGURATION, _RECIPIENT_DEVICE):
            return bytes([self.configuration])[:length]
        elif is_in and request == StandardRequest.GET_STATUS:
            halted = recipient == _RECIPIENT_ENDPOINT and index in self.halted
            return int(halted).to_bytes(2, "little")[:length]
        raise UsbStall(
            f"standard request bmRequestType={request_type:#04x} bRequest={request:#04x} wValue={value:#x} "
            f"wIndex={index:#x} with {len(data)} data bytes: not supported with these arguments"
        )
