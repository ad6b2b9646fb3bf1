"""Exchanges: a trace as the requests a driver must make, each with its recorded answer, and the script of them a
replay consumes (strict order, or per endpoint). See :mod:`tinyhil.trace.replay` for how a replay serves them.

A synchronous record is one exchange; an asynchronous submit and its completion are one; ``clear_halt`` and
``set_configuration`` are the standard control requests they are on the wire, so a usbmon capture and a tinyhil
recording give the same exchanges.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

import numpy as np

from tinyhil.spec.asm2464 import Request
from tinyhil.trace.errors import ReplayExhausted, ReplayMismatch, TraceFormatError
from tinyhil.trace.pcapng import ERR2STATUS
from tinyhil.trace.records import (
    ENDPOINT_IN,
    Complete,
    HostCall,
    Op,
    Payload,
    Record,
    Submit,
    Trace,
    Transfer,
    TransferStatus,
)
from tinyhil.trace.source import TraceSource
from tinyhil.usb import typed_usb1

__all__ = ["HOST_QUEUE", "Exchange", "ReplayOrder", "ReplayScript", "WireRequest", "difference_text", "err_class",
           "exchanges", "first_difference", "host_request", "iter_exchanges"]  # fmt: skip

_CLEAR_FEATURE: Final = (0x02, 0x01)  # standard OUT to an endpoint: CLEAR_FEATURE(ENDPOINT_HALT = 0)
_SET_CONFIGURATION: Final = (0x00, 0x09)  # standard OUT to the device
_UNWIRED: Final = frozenset({Op.CLAIM, Op.RELEASE, Op.RESET, Op.GET_CONFIGURATION})
_SHOWN_BYTES: Final = 16
HOST_QUEUE: Final = -1


class ReplayOrder(StrEnum):
    STRICT = "strict"  # every call in the recorded order
    ENDPOINT = "endpoint"  # in the recorded order per endpoint (control, each bulk endpoint, host calls)


@dataclass(frozen=True, slots=True, eq=False)
class WireRequest:
    """What a call puts on the wire: ``kind`` is ``"control"``, ``"bulk"`` or a host op (``"claim"``...).

    Equal when every field is; the payloads are compared as bytes with numpy when either is a view (a caller's
    buffer is never copied to be compared, and a view's own comparison goes item by item).
    """

    kind: str
    ep: int = 0
    setup: tuple[int, int, int, int] | None = None  # bmRequestType, bRequest, wValue, wIndex
    length: int = 0
    data: Payload = b""  # OUT data
    value: int | None = None  # a host call's interface

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WireRequest):
            return NotImplemented
        if (self.kind, self.ep, self.setup, self.length, self.value) != (
            other.kind, other.ep, other.setup, other.length, other.value):  # fmt: skip
            return False
        mine, theirs = self.data, other.data
        if isinstance(mine, bytes) and isinstance(theirs, bytes):
            return mine == theirs
        return len(mine) == len(theirs) and bool(
            np.array_equal(np.frombuffer(mine, dtype=np.uint8), np.frombuffer(theirs, dtype=np.uint8))
        )

    __hash__ = None  # type: ignore[assignment]  # holds views: compared, never hashed

    @property
    def queue(self) -> int:
        return HOST_QUEUE if self.kind not in ("control", "bulk") else self.ep

    def describe(self) -> str:
        if self.setup is not None:
            request_type, request, value, index = self.setup
            name = f" ({Request(request).name})" if request in Request._value2member_map_ else ""
            direction = "IN" if request_type & ENDPOINT_IN else "OUT"
            text = (f"control {direction} bmRequestType={request_type:#04x} bRequest={request:#04x}{name} "
                    f"wValue={value:#06x} wIndex={index:#06x} length={self.length}")  # fmt: skip
        elif self.kind == "bulk":
            text = f"bulk {'IN' if self.ep & ENDPOINT_IN else 'OUT'} ep={self.ep:#04x} length={self.length}"
        else:
            return self.kind if self.value is None else f"{self.kind}({self.value})"
        if self.data:
            more = "..." if len(self.data) > _SHOWN_BYTES else ""
            text += f" data={self.data[:_SHOWN_BYTES].hex()}{more}"
        return text


@dataclass(frozen=True, slots=True)
class Exchange:
    """One recorded request and its answer. ``status`` is the outcome; ``actual`` the bytes moved; ``data`` the IN
    bytes; ``err`` the usb1 class a synchronous call raises (derived from ``status`` for an async record);
    ``submit_err`` the error ``submit`` itself raised; ``ret`` a host call's answer."""

    seq: int
    request: WireRequest
    status: TransferStatus = TransferStatus.COMPLETED
    actual: int = 0
    data: Payload = b""
    err: str | None = None
    submit_err: str | None = None
    ret: int | None = None
    completed: bool = True  # false: a submit whose completion the trace does not hold


_STATUS2ERR: Final = {status: name for name, status in ERR2STATUS.items()}


def err_class(name: str, seq: int) -> type[Exception]:
    cls = getattr(typed_usb1.usb1, name, None)
    if not (isinstance(cls, type) and issubclass(cls, typed_usb1.USBError)):
        raise TraceFormatError(f"record seq {seq}", f"field 'err'={name!r}, expected a usb1 error class name")
    return cls


def _request(record: Transfer | Submit) -> WireRequest:
    if record.bmRequestType is not None:
        setup = (record.bmRequestType, record.bRequest, record.wValue, record.wIndex)
        out = b"" if record.bmRequestType & ENDPOINT_IN else record.data
        return WireRequest("control", 0, setup, record.length, out)  # type: ignore[arg-type]
    return WireRequest("bulk", record.ep, None, record.length, b"" if record.ep & ENDPOINT_IN else record.data)


def host_request(op: Op, value: int | None) -> WireRequest:
    if op is Op.CLEAR_HALT:
        return WireRequest("control", 0, (*_CLEAR_FEATURE, 0, value or 0))
    if op is Op.SET_CONFIGURATION:
        return WireRequest("control", 0, (*_SET_CONFIGURATION, value or 0, 0))
    return WireRequest(op.value, HOST_QUEUE, None, 0, b"", value)


def exchanges(trace: Trace) -> list[Exchange]:
    """The trace's exchanges in issue order (see the module docstring).

    Raises:
        TraceFormatError: a recorded ``err`` that is not a usb1 error class; a completion that moved more than its
            submit asked for.
    """
    return list(iter_exchanges(trace.records, host_ops=trace.header.host_ops))


def _status(err: str | None, seq: int) -> TransferStatus:
    if err is None:
        return TransferStatus.COMPLETED
    err_class(err, seq)
    return ERR2STATUS.get(err, TransferStatus.ERROR)


def iter_exchanges(records: Iterable[Record], *, host_ops: bool, ordered: bool = True) -> Iterator[Exchange]:
    """The exchanges of ``records`` (streamed), each as soon as it is complete: in issue order (``ordered``: an
    exchange waits behind an asynchronous one still in flight), or else in completion order, holding only the
    submits in flight. A submit the records never complete comes at the end, ``completed=False``.

    Raises:
        TraceFormatError: as :func:`exchanges`.
    """
    slots: deque[list[Exchange | None]] = deque()  # issue order: [exchange], None while its submit is in flight
    pending: dict[int, tuple[list[Exchange | None], Submit]] = {}

    def put(exchange: Exchange, slot: list[Exchange | None] | None = None) -> Iterator[Exchange]:
        if not ordered:
            yield exchange
            return
        if slot is None:
            slots.append([exchange])
        else:
            slot[0] = exchange
        while slots and slots[0][0] is not None:
            done = slots.popleft()[0]
            assert done is not None
            yield done

    for record in records:
        if isinstance(record, Transfer):
            moved = len(record.data) if record.is_in else (record.ret if record.ret is not None else record.transferred)
            yield from put(Exchange(record.seq, _request(record), _status(record.err, record.seq), moved or 0,
                                    record.data if record.is_in else b"", record.err))  # fmt: skip
        elif isinstance(record, Submit):
            if record.err is not None:
                _status(record.err, record.seq)
                yield from put(Exchange(record.seq, _request(record), submit_err=record.err))
            else:
                slot: list[Exchange | None] = [None]
                if ordered:
                    slots.append(slot)
                pending[record.tag] = (slot, record)
        elif isinstance(record, Complete):
            if record.tag not in pending:
                continue  # a capture that began with this URB in flight
            slot, submit = pending.pop(record.tag)
            moved = max(record.actual, len(record.data))
            if moved > submit.length:
                raise TraceFormatError(f"record seq {record.seq}", f"field 'actual'={moved}, expected at most "
                                       f"{submit.length}, the length submitted at record seq {submit.seq}",
                                       field="actual")  # fmt: skip
            err = None if record.status is TransferStatus.COMPLETED else _STATUS2ERR.get(record.status, "USBErrorIO")
            yield from put(Exchange(submit.seq, _request(submit), record.status, record.actual, record.data, err), slot)
        elif isinstance(record, HostCall) and record.op is not Op.CANCEL:
            if record.op in _UNWIRED and not host_ops:
                continue
            yield from put(Exchange(record.seq, host_request(record.op, record.value), _status(record.err, record.seq),
                                    err=record.err, ret=record.ret))  # fmt: skip
    for slot, submit in sorted(pending.values(), key=lambda item: item[1].seq):
        never = Exchange(submit.seq, _request(submit), completed=False)
        slot[0] = never
        if not ordered:
            yield never
    for slot in slots:
        assert slot[0] is not None
        yield slot[0]


def first_difference(expected: Payload, got: Payload) -> int | None:
    """The offset of the first byte where ``expected`` and ``got`` differ (the shorter one's length when one is a
    prefix of the other), or ``None`` when they are equal; compared with numpy, never byte by byte in Python."""
    common = min(len(expected), len(got))
    a = np.frombuffer(expected, dtype=np.uint8, count=common)
    b = np.frombuffer(got, dtype=np.uint8, count=common)
    differ = np.flatnonzero(a != b)
    if len(differ):
        return int(differ[0])
    return None if len(expected) == len(got) else common


def difference_text(expected: Payload, actual: Payload) -> str:
    """Where two payloads first differ, in words (empty when they are equal or one is a prefix of the other)."""
    at = first_difference(expected, actual)
    if at is None or at >= min(len(expected), len(actual)):
        return ""
    return f"; data differs first at byte {at:#x}: expected {expected[at]:#04x}, actual {actual[at]:#04x}"


class ReplayScript:
    """The exchanges left, consumed by each call (shared by a handle and its transfers)."""

    def __init__(self, trace: Trace | TraceSource, order: ReplayOrder, name: str) -> None:
        self.name = name
        self.order = order
        self.host_ops = trace.header.host_ops
        self.total = 0
        self.queues: dict[int, deque[Exchange]] = {}
        records = trace.records if isinstance(trace, Trace) else trace.records()  # a source: streamed
        all_exchanges = list(iter_exchanges(records, host_ops=trace.header.host_ops))
        self.total = len(all_exchanges)
        if order is ReplayOrder.STRICT:
            self.queues[0] = deque(all_exchanges)
        else:
            for exchange in all_exchanges:
                self.queues.setdefault(exchange.request.queue, deque()).append(exchange)
        self.consumed = 0
        self.failure: ReplayMismatch | None = None

    def _fail(self, error: ReplayMismatch) -> ReplayMismatch:
        self.failure = error
        return error

    def take(self, actual: WireRequest) -> Exchange | None:
        """The exchange answering ``actual``; ``None`` for an unrecorded host call the trace cannot hold."""
        if self.failure is not None:  # diverged already: answer leniently so teardown adds no errors of its own
            return Exchange(-1, actual, actual=actual.length, data=b"" if actual.data else bytes(actual.length))
        if actual.queue == HOST_QUEUE and not self.host_ops:
            return None
        queue = self.queues.get(0 if self.order is ReplayOrder.STRICT else actual.queue)
        if not queue:
            where = "" if self.order is ReplayOrder.STRICT else f" on endpoint queue {actual.queue}"
            raise self._fail(
                ReplayExhausted(
                    f"replay of {self.name}: call {self.consumed + 1} ran past the end of the trace{where} "
                    f"({self.total} recorded exchanges, all consumed)\n"
                    f"  expected: (nothing: end of trace)\n  actual:   {actual.describe()}",
                    seq=None,
                )
            )
        expected = queue[0]
        if expected.request != actual:
            detail = difference_text(expected.request.data, actual.data) if expected.request.data else ""
            raise self._fail(
                ReplayMismatch(
                    f"replay of {self.name}: call {self.consumed + 1} differs from the recording (record seq "
                    f"{expected.seq}){detail}\n  expected: {expected.request.describe()}\n"
                    f"  actual:   {actual.describe()}",
                    seq=expected.seq,
                )
            )
        if max(expected.actual, len(expected.data)) > actual.length:  # never more than asked for
            raise self._fail(
                ReplayMismatch(
                    f"replay of {self.name}: call {self.consumed + 1} asks for {actual.length} bytes, but record seq "
                    f"{expected.seq} answers with {max(expected.actual, len(expected.data))}\n"
                    f"  expected: {expected.request.describe()}\n  actual:   {actual.describe()}",
                    seq=expected.seq,
                )
            )
        queue.popleft()
        self.consumed += 1
        return expected

    def left(self) -> list[Exchange]:
        return sorted((e for queue in self.queues.values() for e in queue), key=lambda e: e.seq)
