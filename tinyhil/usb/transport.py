"""The USB3 transport to an ASM2464-class bridge: vendor control requests and bulk transfers over the USB seam.

The transport is built over any :class:`~tinyhil.usb.handle.UsbHandle` and :class:`~tinyhil.usb.handle.EventPump`
(``usb1`` on a real board, the emulated handle in tests) and does not care which. It speaks the wire format of
``docs/asm2464.md``: vendor requests with bmRequestType ``0x40`` (OUT) / ``0xC0`` (IN) to the device, bulk OUT on
endpoint ``0x02`` and bulk IN on ``0x81``. Timeouts are in milliseconds, ``1..MAX_TIMEOUT_MS`` (2 h; checked by
:func:`~tinyhil.usb.bridge_io.check_timeout_ms`), or 0, libusb's "wait forever" (the emulator gives up after one
virtual hour). Zero-length transfers go to the device as asked. ``strict=True`` refuses both, and a wait on a tag
that is not in flight, as likely mistakes (docs/usb3-compat.md).

Errors: ``usb1``'s exception classes pass through unchanged (``USBErrorPipe`` on a stall, ``USBErrorTimeout`` with
``.transferred`` / ``.received``, ``USBErrorNoDevice``, ``USBErrorOverflow`` on a babble), none of them retried; the
bridge always moves exactly the bytes asked for, so a transfer that completes short raises
:class:`~tinyhil.usb.errors.ShortTransfer`; bad arguments raise :class:`~tinyhil.errors.InvalidArgument` before
anything is sent; any operation on a closed transport raises :class:`~tinyhil.errors.StateError`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Final, Literal, overload

from tinyhil._check import as_readonly_bytes, as_writable_bytes, check_int
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm2464 import BRIDGE_INTERFACE, BULK_IN_EP, BULK_OUT_EP, REQUEST_TYPE_IN, REQUEST_TYPE_OUT
from tinyhil.usb import typed_usb1
from tinyhil.usb.bot import CSW_BYTES, check_csw, pack_cbw
from tinyhil.usb.bridge_io import MAX_TIMEOUT_MS, check_timeout_ms
from tinyhil.usb.errors import ShortTransfer
from tinyhil.usb.handle import EventPump, UsbHandle
from tinyhil.usb.state import TransportState, requires_open
from tinyhil.usb.transfer_pool import TransferPool

__all__ = ["Usb3Transport"]

U8_MAX: Final = 0xFF
U16_MAX: Final = 0xFFFF  # wValue, wIndex, wLength
DEFAULT_TIMEOUT_MS: Final = 1000
DEFAULT_ASYNC_TIMEOUT_MS: Final = 10_000
DEFAULT_MAX_IN_FLIGHT: Final = 64  # strict mode's cap when none is given (a board, and the default, have none)
DEFAULT_PUMP_INTERVAL_S: Final = 0.05
BOT_STATUS_TIMEOUT_MS: Final = 2000  # how long send_batch waits for a command's CSW


# The synchronous control calls of the USB3 class this transport mirrors stage their data in a 0x1000-byte buffer and
# refuse more; its asynchronous ones take up to wLength (U16_MAX).
SYNC_CONTROL_MAX: Final = 0x1000


def _refuse(call: str, what: str, why: str) -> InvalidArgument:
    """The error of strict mode: a call a board accepts, refused because it is most likely a mistake."""
    return InvalidArgument(f"{call}({what}): strict mode refuses it, {why}; a board accepts it (docs/usb3-compat.md)")


def _check_timeout(call: str, timeout: object, strict: bool) -> int:
    """``timeout`` in ms: ``1..MAX_TIMEOUT_MS``, or 0 (libusb's "wait forever", which strict mode refuses)."""
    if timeout == 0 and type(timeout) is int:
        if strict:
            raise _refuse(call, "timeout=0", f"0 is libusb's 'wait forever', expected 1..{MAX_TIMEOUT_MS} ms")
        return 0
    return check_timeout_ms(timeout)


def _check_length(call: str, length: object, max_value: int | None, strict: bool) -> int:
    """A transfer length in bytes: ``0..max_value`` (0, a zero-length transfer, refused by strict mode)."""
    length = check_int("length", length, min_value=0, max_value=max_value)
    if strict and not length:
        raise _refuse(call, "length=0", "a zero-length transfer moves nothing, expected at least 1 byte")
    return length


@overload
def _check_control(
    call: str,
    strict: bool,
    request: object,
    value: object,
    index: object,
    timeout: object,
    data_or_length: object,
    direction_in: Literal[True],
) -> tuple[int, int, int, int, int]: ...
@overload
def _check_control(
    call: str,
    strict: bool,
    request: object,
    value: object,
    index: object,
    timeout: object,
    data_or_length: object,
    direction_in: Literal[False],
) -> tuple[int, int, int, int, bytes | memoryview]: ...
def _check_control(
    call: str,
    strict: bool,
    request: object,
    value: object,
    index: object,
    timeout: object,
    data_or_length: object,
    direction_in: bool,
) -> tuple[int, int, int, int, int | bytes | memoryview]:
    """The one check of a vendor control request: ``(request, value, index, timeout, length or data)``.

    The setup fields come back as plain ints (an ``IntEnum`` member such as ``Request.TLP`` is an int like any
    other); an IN takes a length, an OUT data (``bytes`` as they are, any other flat byte buffer as a view), of at most
    :data:`SYNC_CONTROL_MAX` bytes for a synchronous call and ``U16_MAX`` (wLength) for an asynchronous one.

    Raises:
        InvalidArgument: naming the first bad argument (the timeout first).
    """
    timeout = _check_timeout(call, timeout, strict)
    if not (
        isinstance(request, int)
        and isinstance(value, int)
        and isinstance(index, int)
        and 0 <= request <= U8_MAX
        and 0 <= value <= U16_MAX
        and 0 <= index <= U16_MAX
        and type(request) is not bool
        and type(value) is not bool
        and type(index) is not bool
    ):
        request = check_int("request", request, min_value=0, max_value=U8_MAX)
        value = check_int("value", value, min_value=0, max_value=U16_MAX)
        index = check_int("index", index, min_value=0, max_value=U16_MAX)
    limit = U16_MAX if call.endswith("_async") else SYNC_CONTROL_MAX
    if direction_in:
        length = _check_length(call, data_or_length, U16_MAX, strict)
        if length > limit:
            raise _over_limit(call, f"length={length:#x}", limit)
        return int(request), int(value), int(index), timeout, length
    data = data_or_length
    payload = data if type(data) is bytes else _check_payload(call, "data", data, strict=False)
    if len(payload) > limit:
        raise _over_limit(call, f"data of {len(payload):#x} bytes", limit)
    return int(request), int(value), int(index), timeout, payload


def _over_limit(call: str, what: str, limit: int) -> InvalidArgument:
    where = "wLength" if limit == U16_MAX else "the synchronous control buffer; the _async call takes up to 0xffff"
    return InvalidArgument(f"{call}({what}): expected at most {limit:#x} bytes ({where})")


def _check_payload(call: str, name: str, data: object, *, strict: bool) -> memoryview:
    try:  # a flat, contiguous byte buffer (bytes, bytearray, uint8 array) is used as it is
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        view = as_readonly_bytes(name, data)  # raises the InvalidArgument
    if view.format != "B" or view.ndim != 1 or not view.c_contiguous:
        view = as_readonly_bytes(name, data)
    if strict and not len(view):
        raise _refuse(call, f"{name} of 0 bytes", "a zero-length packet moves nothing, expected at least 1 byte")
    return view


def _describe(direction: str, request: int, value: int, index: int) -> str:
    return f"control {direction} {request:#04x} (wValue={value:#06x}, wIndex={index:#06x})"


class Usb3Transport:
    """Vendor control and bulk transfers to one bridge, synchronous and asynchronous (pooled, tagged).

    Construction claims interface 0 (the caller has selected configuration 1); ``close()`` (or leaving a ``with``
    block) cancels what is in flight, frees the pooled transfers, releases the interface, closes the handle and
    then calls ``on_close`` (the real backend closes its libusb context there).

    Asynchronous transfers (``bulk_write_async``, ``control_write_async``, ``control_read_async``) return distinct
    integer tags and are reaped with :meth:`bulk_wait`; see :mod:`tinyhil.usb.transfer_pool` for how errors latch.

    It accepts what the USB3 class of the driver this project grew from accepts (docs/usb3-compat.md has the table).
    ``strict=True`` also reports, with :class:`~tinyhil.errors.InvalidArgument`, the calls a board tolerates but that
    are most likely mistakes: a wait on a tag that is not in flight, a timeout of 0 (forever), a zero-length bulk
    transfer or control IN; and it caps the asynchronous transfers in flight at 64 unless ``max_in_flight`` says
    otherwise (by default, as on a board, there is no cap).
    """

    def __init__(
        self,
        handle: UsbHandle,
        events: EventPump,
        *,
        on_close: Callable[[], object] | None = None,
        max_in_flight: int | None = None,
        pump_interval_s: float = DEFAULT_PUMP_INTERVAL_S,
        strict: bool = False,
    ) -> None:
        if not isinstance(handle, UsbHandle):
            raise InvalidArgument(f"handle={handle!r}, expected a usb1.USBDeviceHandle-like object (UsbHandle)")
        if not isinstance(events, EventPump):
            raise InvalidArgument(f"events={events!r}, expected an object with handleEventsTimeout (a USB context)")
        if not isinstance(pump_interval_s, (int, float)) or not 0 < pump_interval_s <= 1:
            raise InvalidArgument(f"pump_interval_s={pump_interval_s!r}, expected a number of seconds in (0, 1]")
        if type(strict) is not bool:
            raise InvalidArgument(f"strict={strict!r}, expected True or False")
        self.strict = strict
        self._bot_tags = itertools.count(1)  # Bulk-Only Transport command tags, apart from the async transfer tags
        self._handle = handle
        self._events = events
        self._on_close = on_close
        self._pool = TransferPool(
            handle,
            events,
            max_in_flight=DEFAULT_MAX_IN_FLIGHT if max_in_flight is None and strict else max_in_flight,
            pump_interval_s=pump_interval_s,
            strict=strict,
        )
        handle.claimInterface(BRIDGE_INTERFACE)
        self.closed = False

    @property
    def state(self) -> TransportState:
        """``OPEN`` until :meth:`close`."""
        return TransportState.CLOSED if self.closed else TransportState.OPEN

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.state.value}, in flight {self._pool.in_flight}>"

    def __enter__(self) -> Usb3Transport:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- synchronous ---
    @requires_open
    def control_write(
        self, request: int, value: int = 0, index: int = 0, data: Any = b"", timeout: int = DEFAULT_TIMEOUT_MS
    ) -> None:
        """Vendor control OUT (bmRequestType ``0x40``) with an optional data stage.

        Raises:
            usb1.USBError: as the device answered (a stall is ``USBErrorPipe``).
            ShortTransfer: fewer data-stage bytes were accepted than sent.
        """
        request, value, index, timeout, payload = _check_control(
            "control_write", self.strict, request, value, index, timeout, data, False
        )
        sent = self._handle.controlWrite(REQUEST_TYPE_OUT, request, value, index, payload, timeout)
        if sent != len(payload):
            raise ShortTransfer("control_write", _describe("OUT", request, value, index), len(payload), sent)

    @requires_open
    def control_read(
        self, request: int, length: int, value: int = 0, index: int = 0, timeout: int = DEFAULT_TIMEOUT_MS
    ) -> Any:
        """Vendor control IN (bmRequestType ``0xC0``) of exactly ``length`` bytes; returns them (a bytearray).

        Raises:
            usb1.USBError: as the device answered.
            ShortTransfer: fewer than ``length`` bytes came back.
        """
        request, value, index, timeout, length = _check_control(
            "control_read", self.strict, request, value, index, timeout, length, True
        )
        data = self._handle.controlRead(REQUEST_TYPE_IN, request, value, index, length, timeout)
        if len(data) != length:
            raise ShortTransfer("control_read", _describe("IN", request, value, index), length, len(data))
        return data

    @requires_open
    def bulk_write(self, payload: Any, timeout: int = DEFAULT_TIMEOUT_MS) -> None:
        """Bulk OUT of ``payload`` (any bytes-like object) on endpoint ``0x02``.

        Raises:
            usb1.USBError: as the device answered (``USBErrorTimeout.transferred`` says how much went out).
            ShortTransfer: the transfer completed short.
        """
        view = _check_payload("bulk_write", "payload", payload, strict=self.strict)
        timeout = _check_timeout("bulk_write", timeout, self.strict)
        sent = self._handle.bulkWrite(BULK_OUT_EP, view, timeout)
        if sent != len(view):
            raise ShortTransfer("bulk_write", f"bulk OUT to {BULK_OUT_EP:#04x}", len(view), sent)

    @requires_open
    def bulk_read(self, length: int, timeout: int = DEFAULT_TIMEOUT_MS) -> Any:
        """Bulk IN of exactly ``length`` bytes on endpoint ``0x81``; returns them (a bytearray).

        Raises:
            usb1.USBError: as the device answered (``USBErrorTimeout.received`` holds what arrived).
            ShortTransfer: fewer than ``length`` bytes came back.
        """
        length = _check_length("bulk_read", length, None, self.strict)
        timeout = _check_timeout("bulk_read", timeout, self.strict)
        data = self._handle.bulkRead(BULK_IN_EP, length, timeout)
        if len(data) != length:
            raise ShortTransfer("bulk_read", f"bulk IN from {BULK_IN_EP:#04x}", length, len(data))
        return data

    @requires_open
    def bulk_read_into(self, buffer: Any, timeout: int = DEFAULT_TIMEOUT_MS) -> None:
        """Bulk IN on ``0x81`` of exactly ``len(buffer)`` bytes, straight into ``buffer`` (a writable flat buffer).

        An asynchronous transfer on the caller's buffer, reaped before this returns: the bytes land where they belong,
        without the copy out of the new buffer :meth:`bulk_read` (libusb's synchronous call) returns.

        Raises:
            InvalidArgument: ``buffer`` is not a writable, non-empty byte buffer.
            usb1.USBError / ShortTransfer: as :meth:`bulk_wait` raises them (``USBErrorTimeout.received`` holds what
                arrived).
        """
        view = as_writable_bytes("buffer", buffer)
        if not len(view):
            raise InvalidArgument("buffer of 0 bytes, expected at least 1 byte")
        timeout = _check_timeout("bulk_read_into", timeout, self.strict)
        self._pool.wait(self._pool.submit_bulk(BULK_IN_EP, view, (buffer, view), timeout))

    # --- asynchronous ---
    @requires_open
    def bulk_write_async(self, payload: Any, timeout: int = DEFAULT_ASYNC_TIMEOUT_MS) -> int:
        """Submit a bulk OUT of ``payload`` on ``0x02``; returns its tag (reap it with :meth:`bulk_wait`).

        A writable payload (``bytearray``, numpy array) is not copied: it is read when the transfer moves the data,
        so leave it unchanged until the tag is reaped. The transport keeps it alive until then.

        Raises:
            StateError: ``max_in_flight`` transfers are already in flight (no cap unless one is given; strict
                mode's default is 64).
            usb1.USBError: the transfer could not be submitted.
        """
        view = _check_payload("bulk_write_async", "payload", payload, strict=self.strict)
        timeout = _check_timeout("bulk_write_async", timeout, self.strict)
        return self._pool.submit_bulk(BULK_OUT_EP, view, (payload, view), timeout)

    @requires_open
    def control_write_async(
        self, request: int, value: int = 0, index: int = 0, data: Any = b"", timeout: int = DEFAULT_TIMEOUT_MS
    ) -> int:
        """Submit a vendor control OUT; returns its tag (reap it with :meth:`bulk_wait`)."""
        request, value, index, timeout, payload = _check_control(
            "control_write_async", self.strict, request, value, index, timeout, data, False
        )
        tag, _ = self._pool.submit_control(REQUEST_TYPE_OUT, request, value, index, payload, timeout)
        return tag

    @requires_open
    def control_read_async(
        self, request: int, length: int, value: int = 0, index: int = 0, timeout: int = DEFAULT_TIMEOUT_MS
    ) -> tuple[int, bytearray]:
        """Submit a vendor control IN of ``length`` bytes; returns ``(tag, buffer)``.

        ``buffer`` holds the received bytes once :meth:`bulk_wait` has reaped ``tag`` without raising.
        """
        request, value, index, timeout, length = _check_control(
            "control_read_async", self.strict, request, value, index, timeout, length, True
        )
        tag, buffer = self._pool.submit_control(REQUEST_TYPE_IN, request, value, index, length, timeout)
        assert buffer is not None  # an IN submission always gets its buffer
        return tag, buffer

    @requires_open
    def bulk_wait(self, tag: int | None) -> None:
        """Pump USB events until transfer ``tag`` (bulk or control) completes and reap it.

        A ``tag`` not in flight (``None``, never submitted, already reaped) has nothing to wait for and returns at
        once, after the latched-error check, as on a board: a pipelined copy of one chunk waits on ``None``.

        Raises:
            InvalidArgument: strict mode only: ``tag`` is not in flight.
            usb1.USBError / ShortTransfer: the oldest latched failure of any async transfer, raised once; the
                exception's ``.tag`` names the failed transfer.
            DeviceTimeout: the event pump never completed the transfer.
        """
        self._pool.wait(tag)

    @requires_open
    def wait_all(self) -> None:
        """Reap every transfer in flight, oldest first (raising as :meth:`bulk_wait` does)."""
        self._pool.wait_all()

    @property
    def in_flight(self) -> tuple[int, ...]:
        """Tags of the asynchronous transfers not yet reaped, oldest first."""
        return self._pool.in_flight

    @property
    def latched_error(self) -> BaseException | None:
        """The oldest asynchronous failure that has not surfaced through :meth:`bulk_wait` yet, or ``None``."""
        return self._pool.latched_error

    def clear_error(self) -> tuple[BaseException, ...]:
        """Drop the latched errors that have not surfaced yet (after recovering); returns them, oldest first."""
        return self._pool.clear_error()

    @requires_open
    def send_batch(self, cdbs: Sequence[Any], odata: Sequence[Any | None] | None = None) -> None:
        """Send SCSI commands over Bulk-Only Transport: per command its CBW, its data (``odata[i]``, if not
        ``None``) and a 13-byte CSW read back (timeout 2 s) that must answer its tag with status 0.

        Commands and data pair as ``zip`` pairs them (a shorter ``odata`` ends the batch early), as in the USB3
        class this transport mirrors; strict mode refuses lists of different lengths. The custom firmware answers
        no CBW, so on it (and on the emulated board) the first CBW times out (:mod:`tinyhil.usb.bot`).

        Raises:
            InvalidArgument: a command block that is not bytes-like or longer than 255 bytes; strict: one that is
                empty or longer than 16 bytes, or ``odata`` of another length than ``cdbs``.
            DeviceError: a CSW that does not answer the command with status 0.
            usb1.USBError / ShortTransfer: as the bulk transfers raise them.
        """
        data_list: Sequence[Any | None] = [None] * len(cdbs) if odata is None else odata
        if self.strict and len(data_list) != len(cdbs):
            raise InvalidArgument(
                f"send_batch({len(cdbs)} cdbs, {len(data_list)} odata): strict mode refuses it, expected one data "
                "entry (or None) per command; a board is sent the first pairs only (docs/usb3-compat.md)"
            )
        for cdb, data in zip(cdbs, data_list, strict=False):
            tag = next(self._bot_tags)
            self.bulk_write(pack_cbw(tag, cdb, 0 if data is None else len(data), strict=self.strict))
            if data is not None:
                self.bulk_write(data)
            check_csw(self.bulk_read(CSW_BYTES, timeout=BOT_STATUS_TIMEOUT_MS), tag)

    # --- device control ---
    @requires_open
    def clear_halt(self, endpoint: int) -> None:
        """CLEAR_FEATURE(ENDPOINT_HALT) on ``endpoint`` (``0x02`` or ``0x81``); also resets the bridge's 0xF2 engine."""
        if endpoint not in (BULK_OUT_EP, BULK_IN_EP):
            raise InvalidArgument(f"endpoint={endpoint!r}, expected {BULK_OUT_EP:#04x} or {BULK_IN_EP:#04x}")
        self._handle.clearHalt(endpoint)

    @requires_open
    def reset_device(self) -> None:
        """USB port reset of the bridge (``usb1`` may then report the device gone: reopen it)."""
        self._handle.resetDevice()

    @requires_open
    def pause(self, seconds: float) -> None:
        """Wait about ``seconds`` by pumping USB events (completions may end it early).

        Going through the event pump, not a wall clock, lets an emulated context advance its virtual clock.
        """
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 <= seconds <= 60:
            raise InvalidArgument(f"seconds={seconds!r}, expected a number of seconds in [0, 60]")
        self._events.handleEventsTimeout(seconds)

    def close(self) -> None:
        """Cancel and reap what is in flight, free the transfers, release the interface and close the handle.

        Closing twice is a no-op. A device that has vanished (``USBErrorNoDevice`` while releasing) does not make
        closing fail; any other error is raised after everything has been closed.
        """
        if self.closed:
            return
        self.closed = True
        try:
            try:
                self._pool.close()
            finally:
                try:
                    self._handle.releaseInterface(BRIDGE_INTERFACE)
                except typed_usb1.USBErrorNoDevice:
                    pass
                finally:
                    self._handle.close()
        finally:
            if self._on_close is not None:
                self._on_close()
