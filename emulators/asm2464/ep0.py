"""The bridge's control endpoint (EP0): the control-transfer step and the USB chapter 9 standard requests.

A control transfer runs on the 8051 once it reaches the head of the EP0 queue (the front reserves the core and
schedules :meth:`ControlEndpoint.run`); vendor requests go to the bridge (``Asm2464.vendor_request``), standard
requests are answered here, against the device state the front holds (configuration, alternate setting, halts).
:class:`ControlEndpoint` is the ``ep0`` part of :class:`~tinyhil.emulators.asm2464.front.UsbFront`, which owns it.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, Final

from tinyhil.emulators.asm2464.errors import UsbStall
from tinyhil.emulators.asm2464.urb import Urb, UsbStatus
from tinyhil.spec.asm2464 import ENDPOINTS

if TYPE_CHECKING:
    from tinyhil.emulators.asm2464.front import UsbFront

__all__ = ["ControlEndpoint", "StandardRequest"]

_DIRECTION_IN: Final = 0x80
_COMPLETED: Final = UsbStatus.COMPLETED
_TYPE_MASK: Final = 0x60  # bmRequestType bits 6:5: 0 standard, 1 class, 2 vendor
_RECIPIENT_MASK: Final = 0x1F
_RECIPIENT_DEVICE, _RECIPIENT_INTERFACE, _RECIPIENT_ENDPOINT = 0, 1, 2
_FEATURE_ENDPOINT_HALT: Final = 0
_CONFIGURATIONS: Final = (0, 1)  # unconfigured, and configuration 1 (docs/asm2464.md "Identity and endpoints")


class StandardRequest(IntEnum):
    """USB 2.0 chapter 9 standard requests the front answers."""

    GET_STATUS = 0x00
    CLEAR_FEATURE = 0x01
    GET_CONFIGURATION = 0x08
    SET_CONFIGURATION = 0x09
    SET_INTERFACE = 0x0B


class ControlEndpoint:
    """EP0 of a :class:`~tinyhil.emulators.asm2464.front.UsbFront`: control transfers and standard requests."""

    def __init__(self, front: UsbFront) -> None:
        self.front = front

    def run(self, urb: Urb) -> None:
        """The control transfer at the head of EP0 has had its 8051 time: run its request, end the transfer."""
        urb.moving = None
        setup = urb.setup
        assert setup is not None
        front = self.front
        bridge = front.bridge
        if bridge.wedged:
            urb.stuck = True
            front.ensure_deadline(urb)
            return
        request_type, request, value, index = setup
        if urb.stuck and not urb.is_in:  # a timed-out control OUT never reaches the firmware
            urb.actual_length = urb.limit or 0
            return
        payload = urb.payload
        data = payload.tobytes() if payload else b""
        try:
            if request_type & _TYPE_MASK:
                result = bridge.vendor_request(request_type, request, value, index, data, urb.length)
            else:
                result = self._standard_request(request_type, request, value, index, data, urb.length)
        except UsbStall as stall:
            front.finish(urb, UsbStatus.STALL, str(stall))
            return
        if urb.is_in:
            urb.data = result if urb.limit is None else result[: urb.limit]
            urb.actual_length = len(urb.data)
        else:
            urb.actual_length = len(data)
        if not urb.stuck:
            front.finish(urb, _COMPLETED)

    def _standard_request(
        self, request_type: int, request: int, value: int, index: int, data: bytes, length: int
    ) -> bytes:
        """EP0 standard requests; CLEAR_FEATURE(HALT), SET_CONFIGURATION and SET_INTERFACE reset the engine."""
        front = self.front
        engine = front.bridge.engine
        recipient = request_type & _RECIPIENT_MASK
        is_in = bool(request_type & _DIRECTION_IN)
        setup = (is_in, request, recipient)
        if data:
            pass  # no standard request the bridge answers has an OUT data stage
        elif setup == (False, StandardRequest.CLEAR_FEATURE, _RECIPIENT_ENDPOINT) and value == _FEATURE_ENDPOINT_HALT:
            if index in ENDPOINTS:
                front.halted.discard(index)
                engine.drop_arms()
                return b""
        elif setup == (False, StandardRequest.SET_CONFIGURATION, _RECIPIENT_DEVICE):
            if value in _CONFIGURATIONS and index == 0:
                front.configuration = value
                engine.drop_arms()
                return b""
        elif setup == (False, StandardRequest.SET_INTERFACE, _RECIPIENT_INTERFACE):
            if (value, index) == (0, 0):
                front.alt_setting = value
                engine.drop_arms()
                return b""
        elif setup == (True, StandardRequest.GET_CONFIGURATION, _RECIPIENT_DEVICE):
            return bytes([front.configuration])[:length]
        elif is_in and request == StandardRequest.GET_STATUS:
            halted = recipient == _RECIPIENT_ENDPOINT and index in front.halted
            return int(halted).to_bytes(2, "little")[:length]
        raise UsbStall(
            f"standard request bmRequestType={request_type:#04x} bRequest={request:#04x} wValue={value:#x} "
            f"wIndex={index:#x} with {len(data)} data bytes: not supported with these arguments"
        )
