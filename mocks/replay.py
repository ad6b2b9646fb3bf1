"""Traces on the USB path: ``MOCKUSB+AMD`` recording its handle, and ``REPLAY+AMD`` replaying such a recording.

- :func:`open_recorded_usb3` opens :class:`~tinyhil.mocks.usb3.MockUSB3` with the emulated context wrapped in a
  :class:`~tinyhil.trace.recorder.RecordingContext` before discovery, so the trace holds everything from
  ``setConfiguration`` on, stamped with the board's virtual clock. ``MOCKUSB+AMD`` uses it when given ``record=PATH``.
- ``REPLAY+AMD`` is the USB device runtime (:class:`~tinyhil.usbgpu.over_usb.UsbAmdDevice`, the same code as
  ``MOCKUSB+AMD`` and ``USB+AMD``) over the real :class:`~tinyhil.usb.transport.Usb3Transport`, opened through the
  real discovery, on a :class:`~tinyhil.trace.replay.ReplayContext` (registered in :mod:`tinyhil.mocks.targets` with
  the capabilities of ``MOCKUSB+AMD``, the target it replays). It replays one recorded test: it is available
  when ``$TINYHIL_REPLAY`` (what ``--hil-replay`` sets) names a trace file or a directory of them; ``trace=`` picks
  the file. Opening it with :func:`open_replay` needs no environment.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
import platform
from pathlib import Path
from typing import Any, Final

import tinyhil
from tinyhil.device import Device
from tinyhil.errors import InvalidArgument

# The target's name, options and availability live with its registration, so loading the registry stays light.
from tinyhil.mocks.targets import (
    ENV_REPLAY,
    GENERATED_FIRMWARE,
    REPLAY_TARGET,
    ReplayOptions,
    replay_unavailable_reason,
)
from tinyhil.registry import Target, default_registry
from tinyhil.trace.convert import open_trace
from tinyhil.trace.errors import TraceFormatError
from tinyhil.trace.exchanges import iter_exchanges
from tinyhil.trace.recorder import RecordingContext, TraceRecorder
from tinyhil.trace.records import Trace, TraceHeader
from tinyhil.trace.replay import ReplayContext
from tinyhil.trace.source import TraceSource

__all__ = ["ENV_REPLAY", "REPLAY_TARGET", "ReplayOptions", "check_replay_trace", "jsonable", "open_recorded_usb3",
           "open_replay", "open_replay_target", "recording_header", "replay_device",
           "replay_unavailable_reason"]  # fmt: skip

_HARDWARE_TARGET: Final = "USB+AMD"  # a trace of a real board, booted with the real firmware files


def jsonable(value: Any) -> Any:
    """``value`` as JSON data for a trace header: dataclasses as ``{"type": name, fields...}``, enums by value."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"type": type(value).__name__, **fields}
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def recording_header(target_name: str, options: dict[str, Any]) -> TraceHeader:
    """The header of a recording on ``target_name`` opened with ``options`` (the device fields come at open)."""
    import usb1  # type: ignore[import-untyped]  # libusb1 ships no type information

    versions = {"tinyhil": tinyhil.__version__, "python": platform.python_version(),
                "libusb1": getattr(usb1, "__version__", "unknown"), "libusb": None}  # fmt: skip
    descriptors = {"configuration": 1, "interface": 0, "endpoints": [0x02, 0x81]}
    return TraceHeader(target=target_name, options=jsonable(options), versions=versions, descriptors=descriptors)


@functools.cache
def _recorded_class() -> type[Any]:
    """MockUSB3 with its emulated context wrapped for recording (built on first use: importing stays light)."""
    from tinyhil.mocks.usb.context import EmulatedUsbContext
    from tinyhil.mocks.usb3 import MockUSB3
    from tinyhil.usb.backend import open_bridge_handle
    from tinyhil.usb.transport import Usb3Transport

    class RecordedMockUSB3(MockUSB3):
        def __init__(self, *, recorder: TraceRecorder, **options: Any) -> None:
            self.recorder = recorder
            super().__init__(**options)

        def _attach(self, bridge: Any, mode: Any, transport_options: dict[str, Any]) -> None:
            self.bridge = bridge
            self.context = EmulatedUsbContext(bridge, mode=mode)
            self.recorder.clock = lambda: int(bridge.kernel.now_ns)
            handle, context = open_bridge_handle(context=RecordingContext(self.context, self.recorder))
            try:
                Usb3Transport.__init__(self, handle, context, on_close=context.close, **transport_options)
            except BaseException:
                handle.close()
                context.close()
                raise

    return RecordedMockUSB3


def open_recorded_usb3(recorder: TraceRecorder, **options: Any) -> Any:
    """A fresh :class:`~tinyhil.mocks.usb3.MockUSB3` board (``options`` as for it) whose handle records into
    ``recorder`` from discovery on, on the board's virtual clock."""
    return _recorded_class()(recorder=recorder, **options)


def open_replay_target(resolved: Target, options: ReplayOptions) -> Device:
    """REPLAY+AMD's opener (registered in :mod:`tinyhil.mocks.targets`): the trace file ``options.trace``, else the
    one ``$TINYHIL_REPLAY`` names.

    Raises:
        InvalidArgument: no trace file given (a directory is for ``--hil-replay``); TraceFormatError: a malformed
            trace, or one whose header names no device.
    """
    path = options.trace if options.trace is not None else os.environ.get(ENV_REPLAY, "")
    if not path or Path(path).is_dir():
        raise InvalidArgument(f"{resolved.name}: trace={path!r}, expected a trace file (a directory is for "
                              "--hil-replay, which picks each test's file)")  # fmt: skip
    trace = open_trace(path)  # streamed into the replay's exchanges: the records are not kept
    _check_identity(trace.header, str(path))
    try:
        return replay_device(resolved, trace, order=options.order, name=Path(path).name)
    except TraceFormatError as exc:  # found pairing the records into exchanges
        raise exc.at(str(path)) from None


def _check_identity(header: TraceHeader, path: str) -> None:
    if "vendor_id" not in header.device or "product_id" not in header.device:
        raise TraceFormatError("header", "names no device (vendor_id, product_id: a capture taken without tinyhil), "
                                         "expected the recorded bridge's identity", path=path,
                               field="device.vendor_id")  # fmt: skip


def check_replay_trace(path: str | Path) -> None:
    """Check that ``path`` is a trace REPLAY+AMD can serve, reading it once, streamed (what ``--hil-replay`` does at
    session start, so a bad trace is one usage error, not an error in every test).

    Raises:
        InvalidArgument: an unknown extension; TraceFormatError: a malformed trace (any record), a completion larger
            than its request, or a header that names no device.
    """
    source = open_trace(path)
    _check_identity(source.header, str(path))
    try:
        for _ in iter_exchanges(source.records(), host_ops=source.header.host_ops, ordered=False):
            pass
    except TraceFormatError as exc:
        raise exc.at(str(path)) from None


def replay_device(
    resolved: Target, trace: Trace | TraceSource, *, order: str = "strict", name: str = "the trace"
) -> Device:
    """The USB device runtime over the real transport, discovered on a :class:`ReplayContext` serving ``trace``
    (the copy protocol revision from the trace header's options). A gfx1100 boot sends its firmware over USB, so
    the replay sends what the recording did: the files of ``/lib/firmware/amdgpu/`` for a trace of ``USB+AMD``,
    for one of ``MOCKUSB+AMD`` the firmware its ``firmware`` option named (by default the generated images,
    docs/gfx1100.md)."""
    from tinyhil.amdgpu.firmware import DirectoryFirmware, FirmwareSource, GeneratedFirmware
    from tinyhil.compiler import HostCCompiler
    from tinyhil.usb.backend import open_bridge_handle
    from tinyhil.usb.transport import Usb3Transport
    from tinyhil.usbgpu.over_usb import UsbAmdDevice

    context = ReplayContext(trace, order=order, name=name)
    handle, ctx = open_bridge_handle(context=context)
    usb = Usb3Transport(handle, ctx, on_close=ctx.close)
    revision = trace.header.options.get("revision", "pipelined")
    recorded = trace.header.options.get("firmware", GENERATED_FIRMWARE)
    firmware: FirmwareSource
    if trace.header.target == _HARDWARE_TARGET:
        firmware = DirectoryFirmware()
    elif recorded == GENERATED_FIRMWARE:
        firmware = GeneratedFirmware()
    else:
        firmware = DirectoryFirmware(str(recorded))
    try:
        return UsbAmdDevice(resolved.name, usb, compiler=HostCCompiler(), revision=revision, on_close=usb.close,
                            firmware=firmware)  # fmt: skip
    except BaseException:
        usb.close()
        raise


def open_replay(trace: str | os.PathLike[str], *, order: str = "strict") -> Device:
    """Open ``REPLAY+AMD`` on ``trace`` directly (no ``$TINYHIL_REPLAY`` needed); use it as a context manager.

    Raises:
        InvalidArgument: a bad option; TraceFormatError: a malformed trace.
    """
    resolved = default_registry().resolve(REPLAY_TARGET)
    return open_replay_target(resolved, ReplayOptions(trace=os.fspath(trace), order=order))
