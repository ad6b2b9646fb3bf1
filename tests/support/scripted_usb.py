"""A scripted stand-in for ``usb1``'s handle, transfer and context: records every call, answers from a responder.

Test support (``from support.scripted_usb import ScriptedHandle``); ``tests/usb/conftest.py`` also hands the module
to tests as the ``usb_fake`` fixture. The responder is a callable ``(Call) -> reply`` that returns the IN data
(bytes), ``None`` for an OUT transfer that moved everything, an ``int`` for a short OUT, or raises a ``usb1``
exception. Asynchronous transfers behave like ``usb1``'s: a writable OUT buffer is referenced, not copied, and read
when the transfer completes (inside ``handleEventsTimeout``, or inside ``submit`` with ``complete_at_submit``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import usb1

OUT_TYPE = 0x40
IN_TYPE = 0xC0


@dataclass(frozen=True)
class Call:
    """One transfer as the device saw it."""

    kind: str  # "control_out", "control_in", "bulk_out", "bulk_in"
    request_type: int | None = None
    request: int | None = None
    value: int | None = None
    index: int | None = None
    data: bytes | None = None  # OUT data stage / payload
    length: int | None = None  # IN length
    endpoint: int | None = None
    timeout: int | None = None
    is_async: bool = False


Responder = Callable[[Call], Any]


def replies(*items: Any) -> Responder:
    """A responder answering calls in order from ``items`` (exceptions are raised); fails when it runs out."""
    queue = deque(items)

    def respond(call: Call) -> Any:
        if not queue:
            raise AssertionError(f"unexpected call {call}")
        item = queue.popleft()
        if isinstance(item, BaseException):
            raise item
        return item

    return respond


def ok(call: Call) -> Any:
    """Answers every IN with zeros and accepts every OUT."""
    return bytes(call.length or 0) if call.kind.endswith("_in") else None


def timeout_error(transferred: int = 0, received: bytes = b"") -> Exception:
    error = usb1.USBErrorTimeout(usb1.ERROR_TIMEOUT)
    error.transferred = transferred
    error.received = received
    return error


class ScriptedTransfer:
    """``usb1.USBTransfer`` subset (seam.UsbTransfer)."""

    def __init__(self, handle: ScriptedHandle) -> None:
        self._handle = handle
        self._call: Call | None = None
        self._buffer: Any = None
        self._callback: Callable[[Any], object] | None = None
        self.submitted = False
        self.closed = False
        self.cancelled = False
        self.status = -1
        self.actual = 0
        self.setups = 0
        self.submits = 0

    def setBulk(self, endpoint, buffer_or_len, callback=None, user_data=None, timeout=0):
        self._setup(callback)
        # usb1: the direction is bit 7 of the endpoint; an int is a length, a writable buffer is used in place
        self._buffer = bytearray(buffer_or_len) if isinstance(buffer_or_len, int) else _reference_or_copy(buffer_or_len)
        if endpoint & 0x80:
            self._call = Call("bulk_in", length=len(self._buffer), endpoint=endpoint, timeout=timeout, is_async=True)
        else:
            self._call = Call("bulk_out", endpoint=endpoint, timeout=timeout, is_async=True)

    def setControl(self, request_type, request, value, index, buffer_or_len, callback=None, user_data=None, timeout=0):
        self._setup(callback)
        kind = "control_in" if request_type & 0x80 else "control_out"
        length = buffer_or_len if isinstance(buffer_or_len, int) else None
        self._call = Call(kind, request_type, request, value, index, None, length, None, timeout, True)
        self._buffer = bytearray(buffer_or_len) if length is not None else bytes(buffer_or_len)  # usb1 copies

    def _setup(self, callback: Callable[[Any], object] | None) -> None:
        assert not self.submitted, "set up while submitted"
        assert not self.closed, "set up after close"
        self._callback = callback
        self.setups += 1
        self.cancelled = False

    def submit(self) -> None:
        assert self._call is not None and not self.submitted and not self.closed
        if self._handle.submit_error is not None:
            error, self._handle.submit_error = self._handle.submit_error, None
            raise error
        self.submitted = True
        self.submits += 1
        self._handle.pending.append(self)
        if self._handle.complete_at_submit:
            self._handle.complete(self)

    def cancel(self) -> None:
        if not self.submitted:
            raise usb1.USBErrorNotFound(usb1.ERROR_NOT_FOUND)
        self.cancelled = True

    def getStatus(self) -> int:
        return self.status

    def getActualLength(self) -> int:
        return self.actual

    def getBuffer(self) -> Any:
        return self._buffer

    def close(self) -> None:
        assert not self.submitted, "closing a submitted transfer"
        self.closed = True

    def _finish(self) -> None:
        call = self._call
        assert call is not None
        if self.cancelled:
            self.status, self.actual = usb1.TRANSFER_CANCELLED, 0
        else:
            if call.kind.endswith("_out"):
                call = Call(**{**call.__dict__, "data": bytes(self._buffer)})  # read at completion, like the device
            self._handle.calls.append(call)
            try:
                reply = self._handle.responder(call)
            except usb1.USBErrorTimeout as exc:
                self.status, self.actual = usb1.TRANSFER_TIMED_OUT, getattr(exc, "transferred", 0)
            except usb1.USBErrorPipe:
                self.status, self.actual = usb1.TRANSFER_STALL, 0
            except usb1.USBErrorNoDevice:
                self.status, self.actual = usb1.TRANSFER_NO_DEVICE, 0
            except usb1.USBError:
                self.status, self.actual = usb1.TRANSFER_ERROR, 0
            else:
                self.status = usb1.TRANSFER_COMPLETED
                if call.kind.endswith("_in"):
                    data = bytes(reply)
                    self._buffer[: len(data)] = data
                    self.actual = len(data)
                else:
                    self.actual = len(self._buffer) if reply is None else reply
        self.submitted = False
        if self._callback is not None:
            self._callback(self)


def _reference_or_copy(buffer: Any) -> Any:
    view = memoryview(buffer)
    return view if not view.readonly else bytes(view)  # usb1: zero-copy for writable buffers


class ScriptedHandle:
    """``usb1.USBDeviceHandle`` subset (seam.UsbHandle) that records calls and answers from ``responder``."""

    def __init__(self, responder: Responder = ok, *, complete_at_submit: bool = False) -> None:
        self.responder = responder
        self.complete_at_submit = complete_at_submit
        self.calls: list[Call] = []
        self.events: list[tuple[str, Any]] = []  # claim/release/clear_halt/reset/close, in order
        self.transfers: list[ScriptedTransfer] = []
        self.pending: deque[ScriptedTransfer] = deque()
        self.submit_error: BaseException | None = None
        self.release_error: BaseException | None = None
        self.closed = False

    # synchronous
    def controlWrite(self, request_type, request, value, index, data, timeout=0):
        call = Call("control_out", request_type, request, value, index, bytes(data), None, None, timeout)
        self.calls.append(call)
        reply = self.responder(call)
        return len(call.data or b"") if reply is None else reply

    def controlRead(self, request_type, request, value, index, length, timeout=0):
        call = Call("control_in", request_type, request, value, index, None, length, None, timeout)
        self.calls.append(call)
        return bytearray(self.responder(call))

    def bulkWrite(self, endpoint, data, timeout=0):
        call = Call("bulk_out", data=bytes(data), endpoint=endpoint, timeout=timeout)
        self.calls.append(call)
        reply = self.responder(call)
        return len(call.data or b"") if reply is None else reply

    def bulkRead(self, endpoint, length, timeout=0):
        call = Call("bulk_in", length=length, endpoint=endpoint, timeout=timeout)
        self.calls.append(call)
        return bytearray(self.responder(call))

    def clearHalt(self, endpoint):
        self.events.append(("clear_halt", endpoint))

    # ownership and async
    def claimInterface(self, interface):
        self.events.append(("claim", interface))

    def releaseInterface(self, interface):
        self.events.append(("release", interface))
        if self.release_error is not None:
            raise self.release_error

    def resetDevice(self):
        self.events.append(("reset", None))

    def getTransfer(self, iso_packets=0, short_is_error=False, add_zero_packet=False):
        transfer = ScriptedTransfer(self)
        self.transfers.append(transfer)
        return transfer

    def close(self):
        self.events.append(("close", None))
        self.closed = True

    # completion machinery
    def complete(self, transfer: ScriptedTransfer) -> None:
        self.pending.remove(transfer)
        transfer._finish()

    def complete_next(self) -> bool:
        if not self.pending:
            return False
        self.complete(self.pending[0])
        return True

    def requests(self, kinds: Iterable[str] = ("control_out", "control_in")) -> list[tuple[Any, ...]]:
        """``(bmRequestType, bRequest, wValue, wIndex, data-or-length)`` of the recorded control calls."""
        wanted = set(kinds)
        return [
            (c.request_type, c.request, c.value, c.index, c.data if c.data is not None else c.length)
            for c in self.calls
            if c.kind in wanted
        ]


class ScriptedContext:
    """Event pump (seam.EventPump): each ``handleEventsTimeout`` completes up to ``per_pump`` pending transfers."""

    def __init__(self, handle: ScriptedHandle, *, per_pump: int | None = None, stuck: bool = False) -> None:
        self.handle = handle
        self.per_pump = per_pump
        self.stuck = stuck
        self.pumps: list[float] = []

    def handleEventsTimeout(self, tv=0):
        self.pumps.append(tv)
        if self.stuck:
            return
        budget = self.per_pump if self.per_pump is not None else len(self.handle.pending)
        for _ in range(budget):
            if not self.handle.complete_next():
                break
