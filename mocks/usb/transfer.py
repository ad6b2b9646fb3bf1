"""The emulated ``usb1.USBTransfer``: asynchronous control and bulk transfers on the emulated bridge."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import usb1  # type: ignore[import-untyped]  # libusb1 ships no type information

from tinyhil.emulators.asm2464 import Urb, UsbStatus
from tinyhil.emulators.asm2464.front import CONTROL_EP
from tinyhil.mocks.usb._errors import STATUS_TO_USB1
from tinyhil.mocks.usb.request_checks import BULK_ENDPOINTS, check_bulk, check_control, no_such_endpoint

if TYPE_CHECKING:
    from tinyhil.mocks.usb.handle import EmulatedUsbDeviceHandle

__all__ = ["EmulatedUsbTransfer"]

_CONTROL_SETUP_SIZE: Final = 8
_SETUP_ZEROS: Final = bytearray(_CONTROL_SETUP_SIZE)  # only ever concatenated (a new bytearray each time)


class EmulatedUsbTransfer:
    """An asynchronous transfer with the signatures of ``usb1.USBTransfer``.

    In ``sync`` mode the transfer completes inside :meth:`submit`; in ``timed`` mode on the virtual clock. Either
    way the callback fires from the context's ``handleEvents*``, as in libusb, and :meth:`isSubmitted` stays true
    until then. The OUT payload of a writable buffer is read when the transfer moves (timed mode: at completion).
    """

    __slots__ = (
        "__weakref__",
        "_actual_length",
        "_buffer",
        "_callback",
        "_deadline_ns",
        "_doomed",
        "_endpoint",
        "_handle",
        "_initialized",
        "_setup",
        "_short_is_error",
        "_status",
        "_submitted",
        "_timeout",
        "_type",
        "_urb",
        "_user_data",
    )

    def __init__(self, handle: EmulatedUsbDeviceHandle, iso_packets: int, short_is_error: bool) -> None:
        if iso_packets:
            raise NotImplementedError("isochronous transfers: the bridge has no isochronous endpoints")
        self._handle = handle
        self._short_is_error = short_is_error
        self._urb: Urb | None = None
        self._callback: Callable[[EmulatedUsbTransfer], Any] | None = None
        self._user_data: Any = None
        self._buffer: bytearray | memoryview = bytearray()
        self._endpoint = 0
        self._type = usb1.TRANSFER_TYPE_BULK
        self._status: int = usb1.TRANSFER_COMPLETED
        self._actual_length = 0
        self._submitted = False
        self._initialized = False
        self._doomed = False
        self._setup: tuple[int, int, int, int] | None = None  # control: the setup fields; bulk: None
        self._deadline_ns = 0
        self._timeout = 0

    def _check_alterable(self) -> None:
        """What usb1 checks before a transfer is set up again: neither submitted nor doomed."""
        if self._submitted:
            raise ValueError("Cannot alter a submitted transfer")
        if self._doomed:
            raise usb1.DoomedTransferError("Cannot reuse a doomed transfer")

    def _set(
        self,
        kind: int,
        endpoint: int,
        buffer: bytearray | memoryview,
        setup: tuple[int, int, int, int] | None,
        deadline_ns: int,
        callback: Callable[[EmulatedUsbTransfer], Any] | None,
        user_data: Any,
    ) -> None:
        """Record a checked set-up (``setBulk`` or ``setControl``), unless the transfer may not be altered."""
        if self._submitted or self._doomed:
            self._check_alterable()
        self._type, self._endpoint, self._buffer, self._setup = kind, endpoint, buffer, setup
        self._deadline_ns, self._callback, self._user_data, self._initialized = deadline_ns, callback, user_data, True

    def setBulk(
        self,
        endpoint: int,
        buffer_or_len: Any,
        callback: Callable[[EmulatedUsbTransfer], Any] | None = None,
        user_data: Any = None,
        timeout: int = 0,
    ) -> None:
        """Set up a bulk transfer (OUT: a buffer to send; IN: a length or a writable buffer to fill)."""
        endpoint, _, buffer, deadline_ns = check_bulk(endpoint, buffer_or_len, timeout, None)
        self._set(usb1.TRANSFER_TYPE_BULK, endpoint, buffer, None, deadline_ns, callback, user_data)
        self._timeout = timeout

    def setControl(
        self,
        request_type: int,
        request: int,
        value: int,
        index: int,
        buffer_or_len: Any,
        callback: Callable[[EmulatedUsbTransfer], Any] | None = None,
        user_data: Any = None,
        timeout: int = 0,
    ) -> None:
        """Set up a control transfer (the direction comes from bit 7 of ``request_type``)."""
        setup, length, data, deadline_ns = check_control(
            request_type, request, value, index, buffer_or_len, timeout, None
        )
        # usb1 keeps the 8 setup bytes in front of the data: getBuffer() is a view past them.
        storage = bytearray(_CONTROL_SETUP_SIZE + length) if data is None else _SETUP_ZEROS + data
        self._set(
            usb1.TRANSFER_TYPE_CONTROL,
            CONTROL_EP,
            memoryview(storage)[_CONTROL_SETUP_SIZE:],
            setup,
            deadline_ns,
            callback,
            user_data,
        )

    def setBuffer(self, buffer_or_len: Any) -> None:
        """Replace the buffer of a bulk transfer (usb1 refuses this on control transfers)."""
        self._check_alterable()
        if self._type == usb1.TRANSFER_TYPE_CONTROL:
            raise ValueError("To alter control transfer buffer, use setControl")
        if not self._initialized:
            raise ValueError("Cannot set the buffer of a transfer before setBulk")
        self.setBulk(self._endpoint, buffer_or_len, self._callback, self._user_data, self._timeout)

    def submit(self) -> None:
        """Submit; the callback fires from the next event pump after completion."""
        if self._submitted:
            raise ValueError("Cannot submit a submitted transfer")
        if not self._initialized:
            raise ValueError("Cannot submit a transfer until it has been initialized")
        if self._doomed:
            raise usb1.DoomedTransferError("Cannot submit doomed transfer")
        buffer, setup, endpoint = self._buffer, self._setup, self._endpoint
        if setup is None and endpoint not in BULK_ENDPOINTS:  # libusb_submit_transfer fails: nothing is submitted
            raise no_such_endpoint(endpoint)
        # An OUT payload is a view of the buffer (the buffer itself when it is one), read when the transfer moves.
        # A bulk IN fills the buffer in place, as libusb does (a control IN's buffer sits behind its setup bytes).
        into = None
        if (endpoint if setup is None else setup[0]) & usb1.ENDPOINT_DIR_MASK:
            payload = None
            if setup is None:
                into = buffer
        else:
            payload = buffer if type(buffer) is memoryview else memoryview(buffer)
        urb = Urb(endpoint, len(buffer), self._deadline_ns, setup, payload, into)
        self._handle.submit_transfer(self, urb)
        self._urb, self._submitted = urb, True

    def _completed(self) -> None:
        """Called by the context's event pump: record the outcome and fire the callback."""
        urb = self._urb
        assert urb is not None and urb.status is not None
        self._submitted = False
        status = urb.status
        self._status = usb1.TRANSFER_COMPLETED if status is UsbStatus.COMPLETED else STATUS_TO_USB1[status]
        self._actual_length = urb.actual_length
        data = urb.data
        if data and urb.is_in and urb.into is None:  # a bulk IN's bytes are already in the buffer (urb.into)
            self._buffer[: len(data)] = data
        self._handle.transfer_done(self)
        if self._callback is not None:
            self._callback(self)
        if self._doomed:
            self.close()

    def cancel(self) -> None:
        """Cancel a submitted transfer; its callback then fires with ``TRANSFER_CANCELLED``."""
        if not self._submitted or self._urb is None:
            raise usb1.USBErrorNotFound(usb1.ERROR_NOT_FOUND)
        self._handle._cancel_transfer(self._urb)

    def getStatus(self) -> int:
        return self._status

    def getActualLength(self) -> int:
        return self._actual_length

    def getBuffer(self) -> bytearray | memoryview:
        return self._buffer

    def getUserData(self) -> Any:
        return self._user_data

    def setUserData(self, user_data: Any) -> None:
        self._user_data = user_data

    def setCallback(self, callback: Callable[[EmulatedUsbTransfer], Any] | None) -> None:
        self._callback = callback

    def getCallback(self) -> Callable[[EmulatedUsbTransfer], Any] | None:
        return self._callback

    def getEndpoint(self) -> int:
        return self._endpoint

    def getType(self) -> int:
        return int(self._type)

    def isSubmitted(self) -> bool:
        return self._submitted

    def isShortAnError(self) -> bool:
        return self._short_is_error

    def doom(self) -> None:
        self._doomed = True

    def close(self) -> None:
        """Free the transfer; raises on a submitted one, like usb1."""
        if self._submitted:
            raise ValueError("Cannot close a submitted transfer")
        self._doomed = True
        self._initialized = False
        self._callback = self._user_data = None
