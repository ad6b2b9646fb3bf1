"""The emulated ``usb1.USBDeviceHandle``: the same methods and signatures, over one emulated ASM2464 board."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import usb1  # type: ignore[import-untyped]  # libusb1 ships no type information

from tinyhil.emulators.asm2464 import Urb, UsbError
from tinyhil.emulators.asm2464.front import CONTROL_EP, StandardRequest
from tinyhil.mocks.usb._errors import usb1_error
from tinyhil.mocks.usb.request_checks import (
    BULK_ENDPOINTS,
    DIRECTION_IN,
    DIRECTION_OUT,
    U8,
    check_bulk,
    check_control,
    check_field,
    no_such_endpoint,
)
from tinyhil.mocks.usb.transfer import EmulatedUsbTransfer
from tinyhil.usb.state import TransportState, requires_open

if TYPE_CHECKING:
    from tinyhil.mocks.usb.device import EmulatedUsbDevice

__all__ = ["EmulatedUsbDeviceHandle"]

_INTERFACE: Final = 0
_CONFIGURATIONS: Final = (0, 1)
_STANDARD_OUT_ENDPOINT: Final = usb1.ENDPOINT_OUT | usb1.TYPE_STANDARD | usb1.RECIPIENT_ENDPOINT
_STANDARD_OUT_DEVICE: Final = usb1.ENDPOINT_OUT | usb1.TYPE_STANDARD | usb1.RECIPIENT_DEVICE
_STANDARD_OUT_INTERFACE: Final = usb1.ENDPOINT_OUT | usb1.TYPE_STANDARD | usb1.RECIPIENT_INTERFACE
_FEATURE_ENDPOINT_HALT: Final = 0
_SETUP_TIMEOUT_MS: Final = 1000


class EmulatedUsbDeviceHandle:
    """An open handle on an emulated board, a drop-in for ``usb1.USBDeviceHandle``.

    Reads return ``bytearray``; failures raise usb1's own exceptions (``USBErrorPipe`` for a stall,
    ``USBErrorTimeout`` with ``.transferred`` / ``.received``, ``USBErrorNoDevice``, ``USBErrorOverflow`` for a
    babble), each with a note that says what the emulator saw. Synchronous calls run the board's virtual clock until
    the transfer is done.
    """

    def __init__(self, device: EmulatedUsbDevice) -> None:
        self._device = device
        self._bridge = device._bridge
        self._context = device._context
        self._claimed: set[int] = set()
        self._inflight: set[EmulatedUsbTransfer] = set()
        self.closed = False

    # --- plumbing shared with transfers ---
    def _run(self, urb: Urb) -> Urb:
        try:
            return self._bridge.front.transfer(urb)
        except UsbError as error:
            raise usb1_error(error, is_in=urb.is_in) from None

    def _cancel_transfer(self, urb: Urb) -> None:
        self._bridge.front.cancel(urb)

    def _control(self, request_type: int, request: int, value: int, index: int, data: Any, timeout: int) -> Urb:
        """A control request of the handle's own (SET_CONFIGURATION, CLEAR_FEATURE...), checked like the caller's."""
        setup, length, payload, deadline_ns = check_control(request_type, request, value, index, data, timeout, None)
        return self._run(Urb(CONTROL_EP, length, deadline_ns, setup, payload))

    # --- usb1.USBDeviceHandle ---
    @requires_open
    def claimInterface(self, interface: int) -> Any:
        """Claim interface 0 (the only one); usable as a context manager that releases it."""
        if interface != _INTERFACE:
            error = usb1.USBErrorNotFound(usb1.ERROR_NOT_FOUND)
            error.add_note(f"interface={interface!r}, expected {_INTERFACE} (the bridge has one interface)")
            raise error
        self._claimed.add(interface)
        return _ReleaseInterface(self, interface)

    @requires_open
    def releaseInterface(self, interface: int) -> None:
        if interface not in self._claimed:
            error = usb1.USBErrorNotFound(usb1.ERROR_NOT_FOUND)
            error.add_note(f"interface={interface!r} is not claimed")
            raise error
        self._claimed.discard(interface)

    @requires_open
    def getConfiguration(self) -> int:
        """The active configuration (1 after enumeration, 0 once unconfigured), read without a transfer as libusb
        reads ``bConfigurationValue`` from sysfs."""
        return int(self._bridge.front.configuration)

    @requires_open
    def setConfiguration(self, configuration: int) -> None:
        """SET_CONFIGURATION (resets the bridge's DMA engine)."""
        if configuration not in _CONFIGURATIONS:
            error = usb1.USBErrorNotFound(usb1.ERROR_NOT_FOUND)
            error.add_note(f"configuration={configuration!r}, expected 1 (or 0 to unconfigure)")
            raise error
        request = StandardRequest.SET_CONFIGURATION
        self._control(_STANDARD_OUT_DEVICE, request, configuration, 0, b"", _SETUP_TIMEOUT_MS)

    @requires_open
    def setInterfaceAltSetting(self, interface: int, alt_setting: int) -> None:
        """SET_INTERFACE (resets the bridge's DMA engine); the interface must be claimed, as in libusb."""
        if interface not in self._claimed or alt_setting != 0:
            error = usb1.USBErrorNotFound(usb1.ERROR_NOT_FOUND)
            error.add_note(f"interface={interface!r} alt_setting={alt_setting!r}, expected claimed interface 0, alt 0")
            raise error
        request = StandardRequest.SET_INTERFACE
        self._control(_STANDARD_OUT_INTERFACE, request, alt_setting, interface, b"", _SETUP_TIMEOUT_MS)

    # Each transfer checks its request with the one validator the transfers use (request_checks.py), forcing the
    # direction as usb1 does.
    @requires_open
    def controlWrite(self, request_type: int, request: int, value: int, index: int, data: Any, timeout: int = 0) -> int:
        """Synchronous control write; returns the number of bytes sent."""
        setup, length, payload, deadline_ns = check_control(
            request_type, request, value, index, data, timeout, DIRECTION_OUT
        )
        return self._run(Urb(CONTROL_EP, length, deadline_ns, setup, payload)).actual_length

    @requires_open
    def controlRead(
        self, request_type: int, request: int, value: int, index: int, length: int, timeout: int = 0
    ) -> bytearray:
        """Synchronous control read; returns the bytes received."""
        setup, wlength, _, deadline_ns = check_control(
            request_type, request, value, index, length, timeout, DIRECTION_IN
        )
        return bytearray(self._run(Urb(CONTROL_EP, wlength, deadline_ns, setup)).data)

    @requires_open
    def bulkWrite(self, endpoint: int, data: Any, timeout: int = 0) -> int:
        """Synchronous bulk write; returns the number of bytes sent (a short write returns fewer)."""
        endpoint, length, view, deadline_ns = check_bulk(endpoint, data, timeout, DIRECTION_OUT)
        if endpoint not in BULK_ENDPOINTS:
            raise no_such_endpoint(endpoint)
        return self._run(Urb(endpoint, length, deadline_ns, payload=view)).actual_length

    @requires_open
    def bulkRead(self, endpoint: int, length: int, timeout: int = 0) -> bytearray:
        """Synchronous bulk read; returns the bytes received."""
        endpoint, length, _, deadline_ns = check_bulk(endpoint, length, timeout, DIRECTION_IN)
        if endpoint not in BULK_ENDPOINTS:
            raise no_such_endpoint(endpoint)
        data = self._run(Urb(endpoint, length, deadline_ns)).data
        return data if type(data) is bytearray else bytearray(data)  # usb1 returns a bytearray the caller owns

    @requires_open
    def clearHalt(self, endpoint: int) -> None:
        """CLEAR_FEATURE(ENDPOINT_HALT) on ``endpoint`` (also resets the bridge's DMA engine)."""
        endpoint = check_field("endpoint", endpoint, U8)
        request = StandardRequest.CLEAR_FEATURE
        self._control(_STANDARD_OUT_ENDPOINT, request, _FEATURE_ENDPOINT_HALT, endpoint, b"", _SETUP_TIMEOUT_MS)

    @requires_open
    def resetDevice(self) -> None:
        """A USB port reset: halts clear, the DMA engine forgets its arms; PCIe and memories are untouched."""
        front = self._bridge.front
        if front.gone:
            raise usb1.USBErrorNoDevice(usb1.ERROR_NO_DEVICE)
        front.port_reset()

    @requires_open
    def getTransfer(self, iso_packets: int = 0, short_is_error: bool = False, add_zero_packet: bool = False) -> Any:
        """A new asynchronous transfer bound to this handle."""
        if iso_packets < 0:
            raise ValueError("Cannot request a negative number of iso packets.")
        return EmulatedUsbTransfer(self, iso_packets, short_is_error)

    @property
    def state(self) -> TransportState:
        """``OPEN`` until :meth:`close`."""
        return TransportState.CLOSED if self.closed else TransportState.OPEN

    @requires_open
    def submit_transfer(self, transfer: EmulatedUsbTransfer, urb: Urb) -> None:
        """Put ``transfer`` (carrying ``urb``) in flight on the board; closing the handle waits for it to complete.

        Raises:
            StateError: the handle is closed.
        """
        self._inflight.add(transfer)
        try:
            self._context._submit(self._bridge, transfer, urb)
        except BaseException:  # not submitted after all (an emulator event raised): closing must not wait for it
            self._inflight.discard(transfer)
            raise

    def transfer_done(self, transfer: EmulatedUsbTransfer) -> None:
        """``transfer`` has completed (its callback is about to fire): closing no longer waits for it."""
        self._inflight.discard(transfer)

    def close(self) -> None:
        """Cancel transfers in flight, pump events until they are reaped, release the handle."""
        if self.closed:
            return
        for transfer in list(self._inflight):
            if transfer._urb is not None:
                self._bridge.front.cancel(transfer._urb)
        while self._inflight:
            self._context.handleEventsTimeout(0)
        self._claimed.clear()
        self.closed = True

    def getDevice(self) -> Any:
        return self._device

    def getProduct(self) -> str:
        return self._device.getProduct()

    def getSerialNumber(self) -> str:
        return self._device.getSerialNumber()

    def getManufacturer(self) -> str:
        return self._device.getManufacturer()


class _ReleaseInterface:
    """What ``claimInterface`` returns: ``with handle.claimInterface(0):`` releases the interface on exit."""

    def __init__(self, handle: EmulatedUsbDeviceHandle, interface: int) -> None:
        self._handle, self._interface = handle, interface

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        self._handle.releaseInterface(self._interface)
