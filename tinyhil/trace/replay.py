"""Replay: a trace served as a USB context, device, handle and transfers, so the real transport and driver run on it.

The trace becomes a list of *exchanges*, each a request on the wire (control setup and OUT data, or a bulk endpoint,
length and OUT data; or a host call such as claim) and its recorded answer. A synchronous record is one exchange; an
asynchronous submit and its completion are one exchange; ``clear_halt`` and ``set_configuration`` are the standard
control requests they are on the wire, so a usbmon capture and a tinyhil recording replay alike. Each call the
driver makes must equal the next exchange (``order="strict"``, the default) or the next one on the same endpoint
(``order="endpoint"``, for IN and OUT transfers that overlap); a synchronous call may answer a recorded asynchronous
exchange and the other way round, since the wire cannot tell them apart.

Answers come from the trace: the bytes read, the count written, the ``usb1`` error class recorded (with
``.transferred`` / ``.received`` as recorded), an asynchronous status. An answer is never longer than its request:
a recorded one that is raises :class:`ReplayMismatch`, and an asynchronous completion whose data would not fit the
caller's buffer completes with ``TRANSFER_OVERFLOW``, as libusb reports it (never an exception out of
``handleEventsTimeout``). Asynchronous completions fire from the
context's ``handleEventsTimeout``, never from ``submit``. Calls that put nothing on the wire (claim, release, reset,
get_configuration) are matched when the trace recorded them (``header.host_ops``) and accepted otherwise.

Raises:
    ReplayMismatch: a call differs from the next recorded one; the message shows both, side by side, with the seq.
    ReplayExhausted: a call after the last exchange (at once: nothing ever waits).
    TraceNotConsumed: :meth:`ReplayHandle.assert_consumed` (and ``close``) with exchanges left.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tinyhil.errors import InvalidArgument
from tinyhil.trace.errors import ReplayMismatch, TraceNotConsumed
from tinyhil.trace.exchanges import Exchange, ReplayOrder, ReplayScript, WireRequest, err_class, host_request
from tinyhil.trace.recorder import STATUS2LIBUSB
from tinyhil.trace.records import ENDPOINT_IN, Op, Payload, Trace
from tinyhil.trace.source import TraceSource
from tinyhil.usb import typed_usb1

__all__ = ["ReplayContext", "ReplayHandle", "ReplayTransfer"]


def _view(data: Any) -> Payload:
    """The caller's OUT payload as flat bytes, without a copy: it is compared with the recorded one while the call
    lasts (a mismatch error shows only its first bytes)."""
    if isinstance(data, bytes):
        return data
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _raise(exchange: Exchange, name: str | None, *, is_in: bool) -> None:
    cls = err_class(name or "USBErrorIO", exchange.seq)
    error: Any = cls(getattr(cls, "value", None))
    error.transferred = exchange.actual
    if is_in:
        error.received = bytearray(exchange.data)
    error.add_note(f"replayed: recorded at seq {exchange.seq}")
    raise error


class ReplayTransfer:
    """An asynchronous transfer over the trace (``usb1.USBTransfer`` subset); completes at the next event pump."""

    def __init__(self, handle: ReplayHandle) -> None:
        self._handle = handle
        self._request = WireRequest("bulk")
        self._buffer: Any = bytearray()
        self._callback: Any = None
        self._user_data: Any = None
        self._status = typed_usb1.TRANSFER_COMPLETED
        self._actual = 0
        self._submitted = False
        self._exchange: Exchange | None = None

    def setBulk(self, endpoint: int, buffer_or_len: Any, callback: Any = None, user_data: Any = None,
                timeout: int = 0) -> None:  # fmt: skip
        is_in = bool(endpoint & ENDPOINT_IN)
        buffer = bytearray(buffer_or_len) if isinstance(buffer_or_len, int) else buffer_or_len
        length = memoryview(buffer).nbytes
        self._request = WireRequest("bulk", endpoint, None, length, b"" if is_in else _view(buffer))
        self._buffer, self._callback, self._user_data = buffer, callback, user_data

    def setControl(self, request_type: int, request: int, value: int, index: int, buffer_or_len: Any,
                   callback: Any = None, user_data: Any = None, timeout: int = 0) -> None:  # fmt: skip
        is_in = bool(request_type & ENDPOINT_IN)
        buffer = bytearray(buffer_or_len) if isinstance(buffer_or_len, int) else buffer_or_len
        length = memoryview(buffer).nbytes
        self._request = WireRequest("control", 0, (request_type, request, value, index), length,
                                    b"" if is_in else _view(buffer))  # fmt: skip
        self._buffer, self._callback, self._user_data = buffer, callback, user_data

    def submit(self) -> None:
        exchange = self._handle._script.take(self._request)
        assert exchange is not None  # transfers are always on the wire
        if exchange.submit_err is not None:
            _raise(exchange, exchange.submit_err, is_in=False)
        self._exchange, self._submitted = exchange, True
        if exchange.completed:
            self._handle._context._ready.append(self)

    def _complete(self) -> None:
        exchange = self._exchange
        assert exchange is not None
        self._submitted = False
        self._status = STATUS2LIBUSB[exchange.status]
        self._actual = exchange.actual
        buffer = memoryview(self._buffer).cast("B")
        if len(exchange.data) > len(buffer) or exchange.actual > len(buffer):
            # more than the buffer holds: what libusb reports for a device that sent too much, never an exception
            self._status, self._actual = typed_usb1.TRANSFER_OVERFLOW, len(buffer)
        if exchange.data:
            moved = min(len(exchange.data), len(buffer))
            buffer[:moved] = memoryview(exchange.data).cast("B")[:moved]
        if self._callback is not None:
            self._callback(self)

    def cancel(self) -> None:
        if not self._submitted:
            raise typed_usb1.USBErrorNotFound(typed_usb1.usb1.ERROR_NOT_FOUND)

    def getStatus(self) -> int:
        return self._status

    def getActualLength(self) -> int:
        return self._actual

    def getBuffer(self) -> Any:
        return self._buffer

    def getUserData(self) -> Any:
        return self._user_data

    def isSubmitted(self) -> bool:
        return self._submitted

    def close(self) -> None:
        if self._submitted:
            raise ValueError("Cannot close a submitted transfer")


class ReplayHandle:
    """A ``usb1.USBDeviceHandle``-like object that answers every call from the trace (see the module docstring)."""

    def __init__(self, context: ReplayContext) -> None:
        self._context = context
        self._script = context._script
        self.closed = False

    def _call(self, actual: WireRequest, *, is_in: bool = False) -> Exchange | None:
        exchange = self._script.take(actual)
        if exchange is not None and exchange.err is not None:
            _raise(exchange, exchange.err, is_in=is_in)
        return exchange

    def controlWrite(self, request_type: int, request: int, value: int, index: int, data: Any, timeout: int = 0) -> int:
        payload = _view(data)
        exchange = self._call(WireRequest("control", 0, (request_type, request, value, index), len(payload), payload))
        return exchange.actual if exchange is not None else 0

    def controlRead(self, request_type: int, request: int, value: int, index: int, length: int,
                    timeout: int = 0) -> bytearray:  # fmt: skip
        exchange = self._call(WireRequest("control", 0, (request_type, request, value, index), length), is_in=True)
        return bytearray(exchange.data if exchange is not None else b"")

    def bulkWrite(self, endpoint: int, data: Any, timeout: int = 0) -> int:
        payload = _view(data)
        exchange = self._call(WireRequest("bulk", endpoint, None, len(payload), payload))
        return exchange.actual if exchange is not None else 0

    def bulkRead(self, endpoint: int, length: int, timeout: int = 0) -> bytearray:
        exchange = self._call(WireRequest("bulk", endpoint, None, length), is_in=True)
        return bytearray(exchange.data if exchange is not None else b"")

    def clearHalt(self, endpoint: int) -> None:
        self._call(host_request(Op.CLEAR_HALT, endpoint))

    def setConfiguration(self, configuration: int) -> None:
        self._call(host_request(Op.SET_CONFIGURATION, configuration))

    def getConfiguration(self) -> int:
        exchange = self._call(host_request(Op.GET_CONFIGURATION, None))
        ret = exchange.ret if exchange is not None else None
        return int(ret if ret is not None else self._context.configuration)

    def claimInterface(self, interface: int) -> None:
        self._call(host_request(Op.CLAIM, interface))

    def releaseInterface(self, interface: int) -> None:
        self._call(host_request(Op.RELEASE, interface))

    def resetDevice(self) -> None:
        self._call(host_request(Op.RESET, None))

    def getTransfer(self, iso_packets: int = 0, short_is_error: bool = False, add_zero_packet: bool = False) -> Any:
        if iso_packets:
            raise NotImplementedError("isochronous transfers: a trace of the bridge holds none")
        return ReplayTransfer(self)

    def getProduct(self) -> str:
        return str(self._context.device.get("product", ""))

    def getSerialNumber(self) -> str:
        return str(self._context.device.get("serial", ""))

    def getManufacturer(self) -> str:
        return str(self._context.device.get("manufacturer", ""))

    @property
    def consumed(self) -> int:
        """Exchanges answered so far."""
        return self._script.consumed

    def assert_consumed(self) -> None:
        """Raise :class:`TraceNotConsumed` when recorded exchanges are left (naming the first)."""
        left = self._script.left()
        if left:
            raise TraceNotConsumed(f"replay of {self._script.name}: {len(left)} of {self._script.total} recorded "
                                   f"exchanges never requested; the first is record seq {left[0].seq}: "
                                   f"{left[0].request.describe()}", seq=left[0].seq)  # fmt: skip

    def close(self) -> None:
        """Close; raises again when the replay diverged (so a caught mismatch cannot pass as success), else checks
        that the whole trace was consumed.

        After a divergence every call is answered leniently (writes accepted, reads as zeros), so a driver's teardown
        runs to its end instead of adding errors of its own; the first mismatch is the one that counts.
        """
        if self.closed:
            return
        self.closed = True
        failure = self._script.failure
        if failure is not None:
            raise ReplayMismatch(f"the replay diverged earlier (record seq {failure.seq}): {failure}", seq=failure.seq)
        if self._context.check_consumed:
            self.assert_consumed()


class _ReplayDevice:
    """The recorded device as ``USBContext.getDeviceIterator`` lists it (identity from the trace header)."""

    def __init__(self, context: ReplayContext) -> None:
        self._context = context

    def getVendorID(self) -> int:
        return int(self._context.device.get("vendor_id", 0))

    def getProductID(self) -> int:
        return int(self._context.device.get("product_id", 0))

    def getSerialNumber(self) -> str:
        return str(self._context.device.get("serial", ""))

    def getBusNumber(self) -> int:
        return int(self._context.device.get("bus", 0))

    def getDeviceAddress(self) -> int:
        return int(self._context.device.get("address", 0))

    def getDeviceSpeed(self) -> int:
        return int(self._context.device.get("speed", 0))

    def open(self) -> ReplayHandle:
        return self._context.open_handle()

    def close(self) -> None:
        """Nothing to free."""


class ReplayContext:
    """A ``usb1.USBContext``-like bus with one device, the recorded one, whose handle replays ``trace``.

    Args:
        trace: the trace to serve: a whole :class:`Trace`, or a :class:`TraceSource`, read once, streamed, keeping
            only its exchanges.
        order: ``"strict"`` (default) or ``"endpoint"``.
        name: how errors name the trace (its file name).
        check_consumed: closing the handle raises :class:`TraceNotConsumed` when exchanges are left (default).
    """

    def __init__(self, trace: Trace | TraceSource, *, order: ReplayOrder | str = ReplayOrder.STRICT,
                 name: str = "the trace", check_consumed: bool = True) -> None:  # fmt: skip
        try:
            chosen = ReplayOrder(order)
        except ValueError:
            raise InvalidArgument(f"order={order!r}, expected one of {[o.value for o in ReplayOrder]}") from None
        self._script = ReplayScript(trace, chosen, name)
        self.device: dict[str, Any] = dict(trace.header.device)
        self.configuration = int(trace.header.descriptors.get("configuration", 1))
        self.check_consumed = check_consumed
        self._ready: list[ReplayTransfer] = []
        self.handle: ReplayHandle | None = None

    def open(self) -> ReplayContext:
        return self

    def close(self) -> None:
        """Nothing to free (the handle checks consumption)."""

    def open_handle(self) -> ReplayHandle:
        self.handle = ReplayHandle(self)
        return self.handle

    def getDeviceIterator(self, skip_on_error: bool = False) -> Iterator[Any]:
        yield _ReplayDevice(self)

    def getDeviceList(self, skip_on_access_error: bool = False, skip_on_error: bool = False) -> list[Any]:
        return [_ReplayDevice(self)]

    def handleEventsTimeout(self, tv: float = 0) -> None:
        """Fire the callbacks of every transfer submitted since the last call (nothing waits)."""
        ready, self._ready = self._ready, []
        for transfer in ready:
            transfer._complete()
