"""A wire recorder: wraps the usb1 handle a ``Usb3Transport`` drives and records each transfer as plain data.

Everything passes through to the wrapped handle (MockUSB3's emulated one, so the real emulated bridge answers);
``wire.transfers`` lists what crossed the wire, in completion order, as :class:`Transfer` values a test can compare
with ``==``. :func:`recorded_board` builds a controller over a fresh emulated bridge the way MockUSB3 builds its
transport (``mocks/usb3.py``: an ``EmulatedUsbContext`` and ``open_bridge_handle``), with the recorder in between.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import usb1

from tinyhil.asm2464 import Asm2464Controller
from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.mocks.usb.context import EmulatedUsbContext
from tinyhil.usb import Usb3Transport
from tinyhil.usb.backend import open_bridge_handle

__all__ = ["Recorded", "Transfer", "WireRecorder", "recorded_board"]

_COMPLETED = usb1.TRANSFER_COMPLETED


@dataclass(frozen=True)
class Transfer:
    """One transfer as it crossed the wire: its setup, what went out, what came back, or how it failed."""

    kind: str  # "control_out", "control_in", "bulk_out", "bulk_in"
    request_type: int | None = None
    request: int | None = None
    value: int | None = None
    index: int | None = None
    endpoint: int | None = None
    out: bytes | None = None  # OUT data stage / payload as sent
    length: int | None = None  # IN: the length asked for
    received: bytes | None = None  # IN: what came back
    error: str | None = None  # the usb1 error's class name (``USBErrorPipe``) or the transfer status that ended it
    timeout: int = 0
    is_async: bool = False

    @property
    def setup(self) -> tuple[Any, ...]:
        """``(bmRequestType, bRequest, wValue, wIndex, out-or-length)`` of a control transfer."""
        return (
            self.request_type,
            self.request,
            self.value,
            self.index,
            self.out if self.out is not None else self.length,
        )


def _error_name(error: BaseException) -> str:
    return type(error).__name__


class _RecordingTransfer:
    """An async transfer of the wrapped handle; its completion is recorded before the caller's callback runs."""

    def __init__(self, wire: WireRecorder, inner: Any) -> None:
        self._wire = wire
        self._inner = inner
        self._setup: dict[str, Any] = {}
        self._callback: Callable[[Any], object] | None = None

    def setBulk(
        self, endpoint: int, buffer_or_len: Any, callback: Any = None, user_data: Any = None, timeout: int = 0
    ) -> None:
        kind = "bulk_in" if endpoint & 0x80 else "bulk_out"
        self._setup = {"kind": kind, "endpoint": endpoint, "timeout": timeout}
        self._callback = callback
        self._inner.setBulk(endpoint, buffer_or_len, self._done, user_data, timeout)

    def setControl(
        self,
        request_type: int,
        request: int,
        value: int,
        index: int,
        buffer_or_len: Any,
        callback: Any = None,
        user_data: Any = None,
        timeout: int = 0,
    ) -> None:
        kind = "control_in" if request_type & 0x80 else "control_out"
        self._setup = {"kind": kind, "request_type": request_type, "request": request, "value": value, "index": index}
        self._setup["timeout"] = timeout
        if kind == "control_out":
            self._setup["out"] = bytes(buffer_or_len)
        self._callback = callback
        self._inner.setControl(request_type, request, value, index, buffer_or_len, self._done, user_data, timeout)

    def _done(self, inner: Any) -> None:
        setup = dict(self._setup)
        status, actual = inner.getStatus(), inner.getActualLength()
        moved = bytes(memoryview(inner.getBuffer())[:actual])
        if setup["kind"].endswith("_in"):
            setup["received"] = moved
            setup["length"] = len(inner.getBuffer())
        elif setup["kind"] == "bulk_out":
            setup["out"] = moved
        if status != _COMPLETED:
            setup["error"] = f"status {status}"
        self._wire.transfers.append(Transfer(**setup, is_async=True))
        if self._callback is not None:
            self._callback(self)

    def __getattr__(self, name: str) -> Any:  # submit, cancel, getStatus, getActualLength, getBuffer, close
        return getattr(self._inner, name)


@dataclass
class WireRecorder:
    """The usb1 handle protocol over ``handle``, recording every transfer in ``transfers``."""

    handle: Any
    transfers: list[Transfer] = field(default_factory=list)

    def _record(self, setup: dict[str, Any], call: Callable[[], Any]) -> Any:
        try:
            result = call()
        except usb1.USBError as error:
            received = getattr(error, "received", None)
            self.transfers.append(Transfer(**setup, error=_error_name(error), received=received))
            raise
        if setup["kind"].endswith("_in"):
            setup["received"] = bytes(result)
        self.transfers.append(Transfer(**setup))
        return result

    def controlWrite(self, request_type: int, request: int, value: int, index: int, data: Any, timeout: int = 0) -> int:
        setup = {"kind": "control_out", "request_type": request_type, "request": request, "value": value}
        setup.update(index=index, out=bytes(data), timeout=timeout)
        return int(
            self._record(setup, lambda: self.handle.controlWrite(request_type, request, value, index, data, timeout))
        )

    def controlRead(
        self, request_type: int, request: int, value: int, index: int, length: int, timeout: int = 0
    ) -> Any:
        setup = {"kind": "control_in", "request_type": request_type, "request": request, "value": value}
        setup.update(index=index, length=length, timeout=timeout)
        return self._record(
            setup, lambda: self.handle.controlRead(request_type, request, value, index, length, timeout)
        )

    def bulkWrite(self, endpoint: int, data: Any, timeout: int = 0) -> int:
        setup = {"kind": "bulk_out", "endpoint": endpoint, "out": bytes(data), "timeout": timeout}
        return int(self._record(setup, lambda: self.handle.bulkWrite(endpoint, data, timeout)))

    def bulkRead(self, endpoint: int, length: int, timeout: int = 0) -> Any:
        setup = {"kind": "bulk_in", "endpoint": endpoint, "length": length, "timeout": timeout}
        return self._record(setup, lambda: self.handle.bulkRead(endpoint, length, timeout))

    def getTransfer(self, *args: Any, **kwargs: Any) -> _RecordingTransfer:
        return _RecordingTransfer(self, self.handle.getTransfer(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:  # claimInterface, releaseInterface, clearHalt, resetDevice, close, ...
        return getattr(self.handle, name)

    # --- views for assertions ---
    def requests(self, kinds: Iterable[str] = ("control_out", "control_in")) -> list[tuple[Any, ...]]:
        """The ``setup`` tuples of the recorded control transfers of ``kinds``."""
        wanted = set(kinds)
        return [transfer.setup for transfer in self.transfers if transfer.kind in wanted]

    def of(self, kind: str) -> list[Transfer]:
        return [transfer for transfer in self.transfers if transfer.kind == kind]

    def clear(self) -> None:
        self.transfers.clear()


@dataclass
class Recorded:
    """A controller over an emulated bridge with the wire recorder between its transport and the handle."""

    bridge: Asm2464
    transport: Usb3Transport
    wire: WireRecorder
    context: EmulatedUsbContext

    def controller(self, **options: Any) -> Asm2464Controller:
        return Asm2464Controller(self.transport, **options)


@contextmanager
def recorded_board(
    bridge: Asm2464 | None = None, *, mode: str = "sync", **transport_options: Any
) -> Iterator[Recorded]:
    """``bridge`` (default: a fresh ``Asm2464()``) behind an emulated usb1 stack, its handle wrapped in a
    :class:`WireRecorder`, and a ``Usb3Transport`` over it; closed at the end of the block."""
    bridge = bridge if bridge is not None else Asm2464()
    context = EmulatedUsbContext(bridge, mode=mode)
    handle, pump = open_bridge_handle(context=context)
    wire = WireRecorder(handle)
    with Usb3Transport(wire, pump, on_close=pump.close, **transport_options) as transport:
        yield Recorded(bridge, transport, wire, context)
