"""The drift check's emulator side: a trace's requests fed to a fresh ``MOCKUSB+AMD`` board, its replies collected.

:func:`board_options` rebuilds the :class:`~tinyhil.mocks.targets.MockUsbOptions` a trace header recorded (quirks,
seed, fault plan, timing model, mode; :func:`~tinyhil.mocks.replay.recording_header` wrote them with
:func:`~tinyhil.mocks.replay.jsonable`, and :func:`from_jsonable` reads them back); :func:`emulator_replies` builds
the board they describe and walks the trace's records in order on its emulated handle: each synchronous transfer is
made, each asynchronous submit submitted and its completion awaited where the trace completed it (the event pump
runs the board's virtual clock), each host call (claim, clear-halt, set-configuration...) made. Nothing is driven
by a driver: the requests are the recorded ones, whatever the replies. :func:`drift` pairs the replies with the
recorded ones (:func:`tinyhil.trace.drift.compare`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any, Final

from tinyhil.emulators.pcie.endpoint import MIN_VRAM_BYTES
from tinyhil.errors import InvalidArgument
from tinyhil.registry import Target, default_registry
from tinyhil.trace.drift import Divergence, Reply, compare
from tinyhil.trace.errors import TraceFormatError
from tinyhil.trace.exchanges import exchanges, iter_exchanges
from tinyhil.trace.limits import INFLIGHT_MAX_BYTES, INFLIGHT_MAX_URBS
from tinyhil.trace.recorder import LIBUSB2STATUS
from tinyhil.trace.records import Complete, HostCall, Op, Record, Submit, Trace, TraceHeader, Transfer, TransferStatus
from tinyhil.trace.source import TraceSource
from tinyhil.usb import typed_usb1

__all__ = ["DRIFT_TARGET", "MAX_VRAM_BYTES", "board_options", "drift", "drift_report", "emulator_replies",
           "from_jsonable", "options_from_json"]  # fmt: skip

DRIFT_TARGET: Final = "MOCKUSB+AMD"  # the emulator a trace's requests are fed to
# The most VRAM a trace may ask the emulated gfx1100 for: Navi 31 boards carry at most 24 GiB, and the emulator's VRAM
# is a power of two (emulators.pcie.endpoint), so 16 GiB.
MAX_VRAM_BYTES: Final = 16 << 30
_PUMP_S: Final = 60.0  # one event pump: libusb's handle_events wait, in virtual seconds
_PUMPS: Final = 8  # pumps before a completion the trace holds counts as never coming
_MISSING: Final = Reply(TransferStatus.ERROR, note="the emulator was never asked")


def from_jsonable(hint: Any, value: Any, where: str, names: Mapping[str, Any] | None = None) -> Any:
    """``value`` (JSON data as :func:`~tinyhil.mocks.replay.jsonable` wrote it) as the type ``hint`` names:
    dataclasses from ``{"type": name, fields...}``, enums from their values, ``tuple[X, ...]`` from lists. ``names``
    resolves annotations a module imports only for type checking.

    Raises:
        InvalidArgument: naming ``where`` (the field path) and what was expected.
    """
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        choices = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        for choice in choices[:-1]:
            try:
                return from_jsonable(choice, value, where, names)
            except InvalidArgument:
                continue
        return from_jsonable(choices[-1], value, where, names)
    if origin is tuple:
        if not isinstance(value, list):
            raise InvalidArgument(f"{where}={value!r}, expected a list")
        item = typing.get_args(hint)[0]
        return tuple(from_jsonable(item, v, f"{where}[{i}]", names) for i, v in enumerate(value))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise InvalidArgument(f"{where}={value!r}, expected one of {[m.value for m in hint]}") from None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, dict) or value.get("type") != hint.__name__:
            raise InvalidArgument(f"{where}={value!r}, expected {{'type': {hint.__name__!r}, ...}}")
        hints = typing.get_type_hints(hint, localns=dict(names or {}))
        known = {f.name for f in dataclasses.fields(hint) if f.init}
        unknown = sorted(set(value) - known - {"type"})
        if unknown:
            raise InvalidArgument(f"{where}.{unknown[0]}: unknown field of {hint.__name__}, expected {sorted(known)}")
        fields = {name: from_jsonable(hints[name], item, f"{where}.{name}", names) for name, item in value.items()
                  if name != "type"}  # fmt: skip
        try:
            return hint(**fields)
        except (InvalidArgument, TypeError) as exc:
            raise InvalidArgument(f"{where}: {exc}") from None
    if hint in (int, str, bool, float) and not isinstance(value, hint):
        article = "an" if hint is int else "a"
        raise InvalidArgument(f"{where}={value!r}, expected {article} {hint.__name__}")
    return value


def board_options(header: TraceHeader, *, path: str = "") -> Any:
    """The :class:`~tinyhil.mocks.targets.MockUsbOptions` of the board ``header`` recorded (without ``record``).

    Raises:
        TraceFormatError: ``line 1`` and the option that cannot be read back (an unknown option, a bad value).
    """
    from tinyhil.emulators.asm2464 import Quirks
    from tinyhil.emulators.faults import FaultPlan
    from tinyhil.emulators.timing import TimingModel
    from tinyhil.mocks.targets import MockUsbOptions
    from tinyhil.mocks.usb.context import TransferMode

    names = {"Quirks": Quirks, "FaultPlan": FaultPlan, "TimingModel": TimingModel, "TransferMode": TransferMode}
    data = dict(header.options)
    data.pop("record", None)
    try:
        chosen = from_jsonable(MockUsbOptions, {"type": MockUsbOptions.__name__, **data}, "options", names)
    except InvalidArgument as exc:
        raise TraceFormatError("line 1", f"header {exc}", path=path) from None
    vram = chosen.vram_bytes
    if vram is not None and not (MIN_VRAM_BYTES <= vram <= MAX_VRAM_BYTES and vram & (vram - 1) == 0):
        raise TraceFormatError("line 1", f"header options.vram_bytes={vram:#x}, expected a power of two from "
                                         f"{MIN_VRAM_BYTES:#x} to {MAX_VRAM_BYTES:#x} (the VRAM of a gfx1100 "
                                         "board)", path=path, field="options.vram_bytes")  # fmt: skip
    return chosen


def options_from_json(target: Target, data: Mapping[str, Any], *, path: str = "") -> dict[str, Any]:
    """The keyword options to open ``target`` with, from options recorded as JSON (a trace header's, a bundle's):
    every option of ``MOCKUSB+AMD`` (quirks, fault plan, timing model: :func:`board_options`); plain values for
    other targets.

    Raises:
        TraceFormatError: an option that cannot be read back, naming it.
    """
    from tinyhil.mocks.targets import MockUsbOptions

    if target.definition.options_type is MockUsbOptions:
        chosen = board_options(TraceHeader(options=dict(data)), path=path)
        return {name: getattr(chosen, name) for name in MockUsbOptions.__dataclass_fields__ if name != "record"}
    for name, value in data.items():
        if isinstance(value, (dict, list)):
            problem = f"{name}={value!r}: {target.name} options are read back as plain values only, expected a number"
            raise TraceFormatError("options", f"{problem}, string, bool or null", path=path)
    return dict(data)


def _bare_class() -> type[Any]:
    """MockUSB3 that builds its board and context and opens no transport: the handle is driven by the trace."""
    from tinyhil.mocks.usb.context import EmulatedUsbContext
    from tinyhil.mocks.usb3 import MockUSB3

    class BareMockUSB3(MockUSB3):
        def _attach(self, bridge: Any, mode: Any, transport_options: dict[str, Any]) -> None:
            self.bridge = bridge
            self.context = EmulatedUsbContext(bridge, mode=mode)

    return BareMockUSB3


def _usb_reply(exc: Exception, *, is_in: bool) -> Reply:
    received = getattr(exc, "received", None)
    transferred = getattr(exc, "transferred", None)
    data = bytes(received) if is_in and received is not None else b""
    actual = len(data) if is_in else (transferred if isinstance(transferred, int) else 0)
    return Reply.failed(type(exc).__name__, actual=actual, data=data)


def _first_line(exc: Exception) -> str:
    lines = str(exc).splitlines()
    return lines[0] if lines else ""


class _Walk:
    """The records of a trace made on one emulated handle; ``replies`` maps each exchange's ``seq`` to its reply.

    What the trace holds in flight is bounded as the host bounds it (:data:`~tinyhil.trace.limits.INFLIGHT_MAX_BYTES`):
    each submit is charged its buffer before the buffer is made, and a submit past the bytes or the URBs the host lets
    be outstanding (:data:`~tinyhil.trace.limits.INFLIGHT_MAX_URBS`) is no real capture's (:class:`TraceFormatError`).
    """

    def __init__(self, handle: Any, context: Any) -> None:
        self.handle, self.context = handle, context
        self.replies: dict[int, Reply] = {}
        self.inflight: dict[int, tuple[int, Any, bool, int]] = {}  # tag -> (submit seq, transfer, is_in, charge)
        self.inflight_bytes = 0
        self.done: set[int] = set()

    def _charge(self, record: Submit) -> int:
        """Charge ``record``'s URB to the in-flight budget (its earlier submit under the same tag released).

        Raises:
            TraceFormatError: at the record, naming its length and the budget.
        """
        earlier = self.inflight.pop(record.tag, None)
        if earlier is not None:
            self.inflight_bytes -= earlier[3]
        charge = record.length if record.is_in else len(record.data)
        if self.inflight_bytes + charge > INFLIGHT_MAX_BYTES or len(self.inflight) >= INFLIGHT_MAX_URBS:
            raise TraceFormatError(f"record seq {record.seq}", f"field 'length': a submit of {record.length:#x} bytes "
                                   f"with {len(self.inflight)} transfers ({self.inflight_bytes:#x} bytes) in flight, "
                                   f"expected at most {INFLIGHT_MAX_BYTES:#x} bytes in at most {INFLIGHT_MAX_URBS} "
                                   "transfers in flight (usbfs's one budget for every URB outstanding)",
                                   field="length")  # fmt: skip
        self.inflight_bytes += charge
        return charge

    def call(self, seq: int, is_in: bool, make: Any) -> None:
        try:
            result = make()
        except typed_usb1.USBError as exc:
            self.replies[seq] = _usb_reply(exc, is_in=is_in)
            return
        except Exception as exc:  # the emulator refused the request itself: a divergence, not a crash
            self.replies[seq] = Reply.failed(type(exc).__name__, note=_first_line(exc))
            return
        self.replies[seq] = Reply(actual=len(result), data=bytes(result)) if is_in else Reply(actual=int(result or 0))

    def transfer(self, record: Transfer) -> None:
        h, is_in = self.handle, record.is_in
        if record.bmRequestType is not None:
            setup = (record.bmRequestType, record.bRequest, record.wValue, record.wIndex)
            if is_in:
                self.call(record.seq, True, lambda: h.controlRead(*setup, record.length, record.timeout))
            else:
                self.call(record.seq, False, lambda: h.controlWrite(*setup, bytes(record.data), record.timeout))
        elif is_in:
            self.call(record.seq, True, lambda: h.bulkRead(record.ep, record.length, record.timeout))
        else:
            self.call(record.seq, False, lambda: h.bulkWrite(record.ep, bytes(record.data), record.timeout))

    def submit(self, record: Submit) -> None:
        charge = self._charge(record)
        transfer = self.handle.getTransfer()
        buffer: Any = bytearray(record.length) if record.is_in else bytearray(record.data)
        done = lambda _t: self.done.add(record.tag)  # noqa: E731
        if record.is_control:
            transfer.setControl(record.bmRequestType, record.bRequest, record.wValue, record.wIndex, buffer, done,
                                None, record.timeout)  # fmt: skip
        else:
            transfer.setBulk(record.ep, buffer, done, None, record.timeout)
        try:
            transfer.submit()
        except Exception as exc:  # a usb1 error, or the emulator refusing the request: a divergence, not a crash
            self.replies[record.seq] = Reply.failed(
                type(exc).__name__, note=str(exc).splitlines()[0] if str(exc) else ""
            )
            self.inflight_bytes -= charge
            return
        self.inflight[record.tag] = (record.seq, transfer, record.is_in, charge)
        self.replies[record.seq] = Reply()  # until its completion, if the trace holds one

    def complete(self, record: Complete) -> None:
        if record.tag not in self.inflight:
            return  # the recorded submit failed here, or the capture began with it in flight
        seq, transfer, is_in, charge = self.inflight.pop(record.tag)
        self.inflight_bytes -= charge
        for _ in range(_PUMPS):
            if record.tag in self.done:
                break
            self.context.handleEventsTimeout(_PUMP_S)
        if record.tag not in self.done:
            self.replies[seq] = Reply(TransferStatus.TIMED_OUT, note="the emulator never completed it")
            return
        status = LIBUSB2STATUS.get(transfer.getStatus(), TransferStatus.ERROR)
        actual = transfer.getActualLength()
        data = bytes(memoryview(transfer.getBuffer())[:actual]) if is_in else b""
        self.replies[seq] = Reply(status, actual, data)  # an async outcome is its status (no usb1 class raised)

    def step(self, record: Record) -> None:
        """Make ``record``'s call on the emulated handle."""
        if isinstance(record, Transfer):
            self.transfer(record)
        elif isinstance(record, Submit):
            self.submit(record)
        elif isinstance(record, Complete):
            self.complete(record)
        else:
            self.host(record)

    def host(self, record: HostCall) -> None:
        h, value = self.handle, record.value
        calls = {Op.CLAIM: lambda: h.claimInterface(value), Op.RELEASE: lambda: h.releaseInterface(value),
                 Op.CLEAR_HALT: lambda: h.clearHalt(value), Op.RESET: h.resetDevice,
                 Op.SET_CONFIGURATION: lambda: h.setConfiguration(value)}  # fmt: skip
        if record.op is Op.CANCEL:
            found = self.inflight.get(value or 0)
            if found is not None:
                with contextlib.suppress(typed_usb1.USBError):  # it completed already; the recorded completion says how
                    found[1].cancel()
            return
        if record.op is Op.GET_CONFIGURATION:
            try:
                self.replies[record.seq] = Reply(ret=int(h.getConfiguration()))
            except typed_usb1.USBError as exc:
                self.replies[record.seq] = _usb_reply(exc, is_in=True)
            return
        self.call(record.seq, False, lambda: (calls[record.op](), 0)[1])


def _open_walk(header: TraceHeader, options: Any, path: str) -> _Walk:
    """A fresh board built from ``options`` (default: the header's, :func:`board_options`), ready to walk."""
    from tinyhil.mocks.targets import GFX_TARGET_VERSIONS

    chosen = board_options(header, path=path) if options is None else options
    arch = None
    if header.target:
        try:
            arch = default_registry().resolve(header.target).arch
        except (InvalidArgument, LookupError):
            arch = None
    try:
        board = _bare_class()(gfx_target_version=GFX_TARGET_VERSIONS.get(arch or "", None), **chosen.board())
    except OSError as exc:  # the host refused the board's memory (its VRAM is one anonymous mapping)
        raise InvalidArgument(f"{path or 'the trace'}: cannot build the board its header describes "
                              f"(vram_bytes={chosen.vram_bytes}): {exc.strerror or exc}") from None  # fmt: skip
    device = board.context.getDeviceList()[0]
    return _Walk(device.open(), board.context)


def _close(walk: _Walk) -> None:
    with contextlib.suppress(Exception):  # transfers the trace left in flight: nothing waits on them
        walk.handle.close()


def emulator_replies(trace: Trace, options: Any = None, *, path: str = "") -> list[Reply]:
    """The emulator's reply to each of ``trace``'s exchanges, in their order, on a fresh board built from
    ``options`` (a :class:`~tinyhil.mocks.targets.MockUsbOptions`; default: the header's, :func:`board_options`).

    Raises:
        TraceFormatError: the header's options cannot be read back.
    """
    walk = _open_walk(trace.header, options, path)
    try:
        for record in trace.records:
            walk.step(record)
    except TraceFormatError as exc:
        raise exc.at(path) from None
    finally:
        _close(walk)
    return [walk.replies.get(exchange.seq, _MISSING) for exchange in exchanges(trace)]


def drift_report(trace: Trace | TraceSource, options: Any = None, *, path: str = "") -> tuple[list[Divergence], int]:
    """Every reply of the emulator that differs from the trace's (in ``seq`` order), and the number of exchanges.

    The trace is walked once, streamed: each record is made on the board as it is read and each exchange compared
    as soon as it is complete, so memory holds the transfers in flight and the divergences, not the trace.

    Raises:
        TraceFormatError: a malformed trace, or header options that cannot be read back.
    """
    walk = _open_walk(trace.header, options, path)
    records = trace.records if isinstance(trace, Trace) else trace.records()

    def walked() -> Iterator[Record]:
        for record in records:
            walk.step(record)
            yield record

    found: list[Divergence] = []
    count = 0
    try:
        for exchange in iter_exchanges(walked(), host_ops=trace.header.host_ops, ordered=False):
            count += 1
            found += compare([exchange], [walk.replies.pop(exchange.seq, _MISSING)])
    except TraceFormatError as exc:
        raise exc.at(path) from None
    finally:
        _close(walk)
    return sorted(found, key=lambda divergence: divergence.seq), count


def drift(trace: Trace | TraceSource, options: Any = None, *, path: str = "") -> list[Divergence]:
    """Every reply of the emulator (built from ``trace``'s header, or ``options``) that differs from the trace's."""
    return drift_report(trace, options, path=path)[0]
