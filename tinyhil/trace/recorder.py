"""Recording: wrappers around any USB handle, transfer and context (real ``usb1``, emulated, replayed) that write
every call to a :class:`TraceRecorder` and otherwise change nothing.

Each call takes a slot in the recorder when it starts and fills it when it ends, so records are in the order the
calls were issued even when a completion callback fires inside a synchronous call. Payloads are kept as ``bytes``
copies (one ``memcpy`` each, never a per-byte loop) and hex-encoded only when the trace is written. A ``usb1`` error
is recorded by class name with its partial data (``USBErrorTimeout.transferred`` / ``.received``) and re-raised;
an error that is not ``usb1``'s (a bad argument) never reached the device and leaves a gap in ``seq``.

The clock is given: the event kernel's ``now_ns`` on an emulated board, :func:`time.monotonic_ns` otherwise.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import numpy as np

from tinyhil.trace.records import (
    Complete,
    HostCall,
    Op,
    Payload,
    Record,
    Submit,
    Trace,
    TraceHeader,
    Transfer,
    TransferStatus,
)
from tinyhil.usb import typed_usb1

__all__ = [
    "LIBUSB2STATUS",
    "STATUS2LIBUSB",
    "RecordingContext",
    "RecordingHandle",
    "RecordingTransfer",
    "TraceRecorder",
]

# usb1's TRANSFER_* status codes and the trace's TransferStatus, both ways (the replay and the drift check use them)
LIBUSB2STATUS: Final = {
    typed_usb1.TRANSFER_COMPLETED: TransferStatus.COMPLETED,
    typed_usb1.TRANSFER_ERROR: TransferStatus.ERROR,
    typed_usb1.TRANSFER_TIMED_OUT: TransferStatus.TIMED_OUT,
    typed_usb1.TRANSFER_CANCELLED: TransferStatus.CANCELLED,
    typed_usb1.TRANSFER_STALL: TransferStatus.STALL,
    typed_usb1.TRANSFER_NO_DEVICE: TransferStatus.NO_DEVICE,
    typed_usb1.TRANSFER_OVERFLOW: TransferStatus.OVERFLOW,
}
STATUS2LIBUSB: Final = {status: code for code, status in LIBUSB2STATUS.items()}
_ENDPOINT_IN: Final = 0x80
_NO_SETUP: Final = (None, None, None, None)  # a bulk transfer's setup fields
_ARENA_MIN_BYTES: Final = 64 << 10  # payloads from this size on go to the arena
_ARENA_BLOCK_BYTES: Final = 64 << 20


class TraceRecorder:
    """The records of one recording, in issue order, and the header fields learnt on the way.

    Args:
        clock: nanoseconds now (virtual on an emulated board); default :func:`time.monotonic_ns`.
        header: the header to start from (target, options, versions); the device fields are filled in when a
            :class:`RecordingContext` opens the device.
    """

    def __init__(self, clock: Callable[[], int] | None = None, *, header: TraceHeader | None = None) -> None:
        self.clock = clock if clock is not None else time.monotonic_ns
        self.header = header if header is not None else TraceHeader(clock="virtual" if clock else "monotonic")
        self._slots: list[tuple[Callable[..., Record], tuple[Any, ...], dict[str, Any]] | None] = []
        self._next_tag = 1
        self._arena = np.empty(0, dtype=np.uint8)
        self._arena_used = 0

    def start(self) -> tuple[int, int]:
        """Reserve the next ``seq`` for a call starting now; returns ``(seq, t_ns)``."""
        self._slots.append(None)
        return len(self._slots) - 1, self.clock()

    def fill(self, slot: int, factory: Callable[..., Record], *args: Any, **fields: Any) -> None:
        """Fill ``slot`` with the record ``factory(*args, **fields)`` will build: records are built (and checked)
        when :attr:`records` is read, not on the transfer path."""
        self._slots[slot] = (factory, args, fields)

    def new_tag(self) -> int:
        tag, self._next_tag = self._next_tag, self._next_tag + 1
        return tag

    def __len__(self) -> int:
        return len(self._slots)

    def note_device(self, identity: dict[str, Any]) -> None:
        """Put the opened device's identity (VID, PID, serial, speed, ...) into the header."""
        self.header = dataclasses.replace(self.header, device={**self.header.device, **identity})

    def keep(self, data: Any) -> Payload:
        """A read-only copy of ``data`` (any flat byte buffer) for a record: small payloads as ``bytes``, large ones
        copied into an append-only arena of numpy blocks, so recording a 64 MB copyin costs one ``memcpy`` per byte and
        few page faults (large numpy allocations get transparent huge pages), not an allocation per transfer."""
        view = memoryview(data).cast("B") if not isinstance(data, memoryview) or data.format != "B" else data
        size = view.nbytes
        if size < _ARENA_MIN_BYTES:
            return bytes(view)
        if self._arena_used + size > len(self._arena):
            self._arena = np.empty(max(_ARENA_BLOCK_BYTES, size), dtype=np.uint8)
            self._arena_used = 0
        start, self._arena_used = self._arena_used, self._arena_used + size
        self._arena[start : self._arena_used] = view
        return self._arena.data[start : self._arena_used].toreadonly()

    def discard(self) -> None:
        """Drop the records so far (``seq`` starts again at 0): for benchmarks that record round after round."""
        self._slots.clear()

    @property
    def records(self) -> tuple[Record, ...]:
        return tuple(slot[0](*slot[1], **slot[2]) for slot in self._slots if slot is not None)

    def trace(self) -> Trace:
        return Trace(self.header, self.records)

    def save(self, path: str | Path) -> Path:
        """Write the trace, its format from the file name (``.hiltrace.jsonl`` or ``.pcapng``); returns the path."""
        from tinyhil.trace.convert import save_trace

        save_trace(self.trace(), path)
        return Path(path)


def _partial(exc: BaseException) -> tuple[bytes, int | None]:
    """What a failed call moved: ``(received bytes, transferred count)`` (usb1 sets them on timeouts)."""
    received = getattr(exc, "received", None)
    transferred = getattr(exc, "transferred", None)
    return (bytes(received) if received is not None else b""), (transferred if isinstance(transferred, int) else None)


class RecordingTransfer:
    """An asynchronous transfer that records its submit, its completion and a cancel, around ``inner``."""

    def __init__(self, inner: Any, recorder: TraceRecorder) -> None:
        self._inner, self._recorder = inner, recorder
        self._callback: Callable[[Any], object] | None = None
        self._setup: tuple[int | None, ...] = _NO_SETUP  # control: bmRequestType, bRequest, wValue, wIndex
        self._is_in = False
        self._endpoint = 0
        self._buffer: Any = b""
        self._timeout = 0
        self.tag = 0

    def setBulk(self, endpoint: int, buffer_or_len: Any, callback: Any = None, user_data: Any = None,
                timeout: int = 0) -> None:  # fmt: skip
        self._inner.setBulk(endpoint, buffer_or_len, self._on_complete, user_data, timeout)
        self._setup, self._endpoint, self._buffer, self._timeout, self._callback = (
            _NO_SETUP, endpoint, buffer_or_len, timeout, callback)  # fmt: skip
        self._is_in = bool(endpoint & _ENDPOINT_IN)

    def setControl(self, request_type: int, request: int, value: int, index: int, buffer_or_len: Any,
                   callback: Any = None, user_data: Any = None, timeout: int = 0) -> None:  # fmt: skip
        self._inner.setControl(request_type, request, value, index, buffer_or_len, self._on_complete, user_data,
                               timeout)  # fmt: skip
        self._setup, self._endpoint, self._buffer, self._timeout, self._callback = (
            (request_type, request, value, index), 0, buffer_or_len, timeout, callback)  # fmt: skip
        self._is_in = bool(request_type & _ENDPOINT_IN)

    def submit(self) -> None:
        recorder = self._recorder
        seq, t_ns = recorder.start()
        self.tag = tag = recorder.new_tag()
        buffer = self._buffer
        data: Payload = b""
        if isinstance(buffer, int):
            length = buffer
        else:
            length = memoryview(buffer).nbytes
            if not self._is_in:
                data = recorder.keep(buffer)
        # Submit's fields in order: seq, t_ns, tag, ep, length, data, timeout, then the four setup fields
        args = (seq, t_ns, tag, self._endpoint, length, data, self._timeout, *self._setup)
        try:
            self._inner.submit()
        except typed_usb1.USBError as exc:
            recorder.fill(seq, Submit, *args, err=type(exc).__name__)
            raise
        recorder.fill(seq, Submit, *args)

    def _on_complete(self, inner: Any) -> None:
        recorder = self._recorder
        seq, t_ns = recorder.start()
        actual = inner.getActualLength()
        data = recorder.keep(memoryview(inner.getBuffer())[:actual]) if self._is_in and actual else b""
        status = LIBUSB2STATUS.get(inner.getStatus(), TransferStatus.ERROR)
        recorder.fill(seq, Complete, seq, t_ns, self.tag, status, actual, data)
        if self._callback is not None:
            self._callback(self)

    def cancel(self) -> None:
        seq, t_ns = self._recorder.start()
        try:
            self._inner.cancel()
        except typed_usb1.USBError as exc:
            self._recorder.fill(seq, HostCall, seq, t_ns, self._recorder.clock() - t_ns, Op.CANCEL, self.tag,
                                err=type(exc).__name__)  # fmt: skip
            raise
        self._recorder.fill(seq, HostCall, seq, t_ns, self._recorder.clock() - t_ns, Op.CANCEL, self.tag)

    def getStatus(self) -> int:
        return int(self._inner.getStatus())

    def getActualLength(self) -> int:
        return int(self._inner.getActualLength())

    def getBuffer(self) -> Any:
        return self._inner.getBuffer()

    def close(self) -> None:
        self._inner.close()

    def __getattr__(self, name: str) -> Any:  # the rest of usb1.USBTransfer, unrecorded
        return getattr(self._inner, name)


class RecordingHandle:
    """A ``usb1.USBDeviceHandle``-like wrapper that records every call on ``inner`` (see the module docstring)."""

    def __init__(self, inner: Any, recorder: TraceRecorder) -> None:
        self._inner, self._recorder = inner, recorder

    @property
    def recorder(self) -> TraceRecorder:
        return self._recorder

    def _host(self, op: Op, call: Callable[[], Any], value: int | None = None, *, returns: bool = False) -> Any:
        seq, t_ns = self._recorder.start()
        try:
            result = call()
        except typed_usb1.USBError as exc:
            self._recorder.fill(
                seq, HostCall, seq, t_ns, self._recorder.clock() - t_ns, op, value, err=type(exc).__name__
            )
            raise
        ret = int(result) if returns and result is not None else None
        self._recorder.fill(seq, HostCall, seq, t_ns, self._recorder.clock() - t_ns, op, value, ret)
        return result

    def _sync(self, op: Op, call: Callable[[], Any], fields: dict[str, Any], is_in: bool) -> Any:
        seq, t_ns = self._recorder.start()
        try:
            result = call()
        except typed_usb1.USBError as exc:
            received, transferred = _partial(exc)
            self._recorder.fill(seq, Transfer, seq=seq, t_ns=t_ns, dur_ns=self._recorder.clock() - t_ns, op=op,
                                         **{**fields, "data": received if is_in else fields["data"]},
                                err=type(exc).__name__, transferred=transferred)  # fmt: skip
            raise
        if is_in:
            fields["data"] = self._recorder.keep(result)
        self._recorder.fill(seq, Transfer, seq=seq, t_ns=t_ns, dur_ns=self._recorder.clock() - t_ns, op=op, **fields,
                            ret=len(result) if is_in else int(result))  # fmt: skip
        return result

    # --- synchronous transfers ---
    def controlWrite(self, request_type: int, request: int, value: int, index: int, data: Any, timeout: int = 0) -> int:
        payload = self._recorder.keep(data)
        fields = {"ep": 0, "length": len(payload), "data": payload, "timeout": timeout, "bmRequestType": request_type,
                  "bRequest": request, "wValue": value, "wIndex": index}  # fmt: skip
        call = lambda: self._inner.controlWrite(request_type, request, value, index, data, timeout)  # noqa: E731
        return int(self._sync(Op.CONTROL, call, fields, False))

    def controlRead(self, request_type: int, request: int, value: int, index: int, length: int,
                    timeout: int = 0) -> Any:  # fmt: skip
        fields = {"ep": 0, "length": length, "data": b"", "timeout": timeout, "bmRequestType": request_type,
                  "bRequest": request, "wValue": value, "wIndex": index}  # fmt: skip
        call = lambda: self._inner.controlRead(request_type, request, value, index, length, timeout)  # noqa: E731
        return self._sync(Op.CONTROL, call, fields, True)

    def bulkWrite(self, endpoint: int, data: Any, timeout: int = 0) -> int:
        payload = self._recorder.keep(data)
        fields = {"ep": endpoint, "length": len(payload), "data": payload, "timeout": timeout}
        return int(self._sync(Op.BULK, lambda: self._inner.bulkWrite(endpoint, data, timeout), fields, False))

    def bulkRead(self, endpoint: int, length: int, timeout: int = 0) -> Any:
        fields = {"ep": endpoint, "length": length, "data": b"", "timeout": timeout}
        return self._sync(Op.BULK, lambda: self._inner.bulkRead(endpoint, length, timeout), fields, True)

    # --- host calls ---
    def clearHalt(self, endpoint: int) -> None:
        self._host(Op.CLEAR_HALT, lambda: self._inner.clearHalt(endpoint), endpoint)

    def claimInterface(self, interface: int) -> object:
        return self._host(Op.CLAIM, lambda: self._inner.claimInterface(interface), interface)

    def releaseInterface(self, interface: int) -> None:
        self._host(Op.RELEASE, lambda: self._inner.releaseInterface(interface), interface)

    def resetDevice(self) -> None:
        self._host(Op.RESET, self._inner.resetDevice)

    def setConfiguration(self, configuration: int) -> None:
        self._host(Op.SET_CONFIGURATION, lambda: self._inner.setConfiguration(configuration), configuration)

    def getConfiguration(self) -> int:
        return int(self._host(Op.GET_CONFIGURATION, self._inner.getConfiguration, returns=True))

    def getTransfer(self, iso_packets: int = 0, short_is_error: bool = False, add_zero_packet: bool = False) -> Any:
        return RecordingTransfer(self._inner.getTransfer(iso_packets, short_is_error, add_zero_packet), self._recorder)

    def close(self) -> None:
        self._inner.close()

    def __getattr__(self, name: str) -> Any:  # getProduct, getSerialNumber, ...: identity reads, unrecorded
        return getattr(self._inner, name)


class _RecordingDevice:
    """A ``usb1.USBDevice`` whose ``open()`` returns a :class:`RecordingHandle` and notes the device's identity."""

    def __init__(self, inner: Any, recorder: TraceRecorder) -> None:
        self._inner, self._recorder = inner, recorder

    def open(self) -> RecordingHandle:
        handle = self._inner.open()
        device = self._inner
        identity = {"vendor_id": device.getVendorID(), "product_id": device.getProductID(),
                    "serial": device.getSerialNumber(), "bus": device.getBusNumber(),
                    "address": device.getDeviceAddress(), "speed": device.getDeviceSpeed(),
                    "product": handle.getProduct(), "manufacturer": handle.getManufacturer()}  # fmt: skip
        self._recorder.note_device(identity)
        return RecordingHandle(handle, self._recorder)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class RecordingContext:
    """A ``usb1.USBContext``-like wrapper: devices it lists open recording handles; the event pump passes through
    (completions are recorded by the transfers' own callbacks)."""

    def __init__(self, inner: Any, recorder: TraceRecorder) -> None:
        self._inner, self.recorder = inner, recorder

    def open(self) -> RecordingContext:
        self._inner.open()
        return self

    def close(self) -> None:
        self._inner.close()

    def getDeviceIterator(self, skip_on_error: bool = False) -> Iterator[Any]:
        for device in self._inner.getDeviceIterator(skip_on_error=skip_on_error):
            yield _RecordingDevice(device, self.recorder)

    def getDeviceList(self, skip_on_access_error: bool = False, skip_on_error: bool = False) -> list[Any]:
        return [_RecordingDevice(d, self.recorder) for d in self._inner.getDeviceList(skip_on_access_error,
                                                                                      skip_on_error)]  # fmt: skip

    def handleEventsTimeout(self, tv: float = 0) -> None:
        self._inner.handleEventsTimeout(tv)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
