"""The recording wrappers: virtual timestamps, errors with partial data passed through and recorded, and a replay
recorded again giving back the same exchanges."""

from __future__ import annotations

from pathlib import Path

import pytest
import usb1  # type: ignore[import-untyped]  # libusb1 ships no type information

from tinyhil.emulators.faults import Fault, FaultPlan, Operation
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.asm2464 import BULK_OUT_EP, Request
from tinyhil.trace import Complete, ReplayContext, Submit, TraceRecorder, Transfer, load_trace
from tinyhil.trace.exchanges import exchanges
from tinyhil.trace.recorder import RecordingContext
from tinyhil.usb.backend import open_bridge_handle
from tinyhil.usb.transport import Usb3Transport

WINDOW = 0x40000


def _recorded(recorder: TraceRecorder, context: object) -> Usb3Transport:
    handle, opened = open_bridge_handle(context=RecordingContext(context, recorder))
    return Usb3Transport(handle, opened)


def test_timed_mode_records_virtual_time_and_the_transfer_durations() -> None:
    mock = MockUSB3(mode="timed")
    recorder = TraceRecorder(lambda: mock.kernel.now_ns)
    usb = _recorded(recorder, mock.context)
    usb.control_write(Request.SRAM_ARM, 512, 16 << 8)  # arm window 0 for 256 KB
    tag = usb.bulk_write_async(bytes(WINDOW))
    usb.bulk_wait(tag)
    usb.close()
    records = recorder.records
    assert recorder.header.clock == "virtual" and recorder.header.device["serial"] == mock.bridge.serial
    submit = next(r for r in records if isinstance(r, Submit))
    complete = next(r for r in records if isinstance(r, Complete))
    arm = next(r for r in records if isinstance(r, Transfer) and r.bRequest == Request.SRAM_ARM)
    assert arm.dur_ns > 0, "a synchronous control round trip takes virtual time"
    assert complete.t_ns > submit.t_ns >= arm.t_ns + arm.dur_ns, "the 256 KB bulk OUT moves on the virtual clock"
    assert (submit.ep, submit.length, complete.actual) == (BULK_OUT_EP, WINDOW, WINDOW)
    assert records[-1].t_ns <= mock.kernel.now_ns


def test_errors_pass_through_and_are_recorded_with_their_partial_data() -> None:
    mock = MockUSB3(faults=FaultPlan.single(Operation.control_in(Request.XDATA_READ), 1, Fault.timeout(3)))
    recorder = TraceRecorder(lambda: mock.kernel.now_ns)
    usb = _recorded(recorder, mock.context)
    with pytest.raises(usb1.USBErrorTimeout) as caught:
        usb.control_read(Request.XDATA_READ, 8, 0x5000)
    usb.close()
    read = next(r for r in recorder.records if isinstance(r, Transfer) and r.bRequest == Request.XDATA_READ)
    assert read.err == "USBErrorTimeout" and read.ret is None
    assert read.data == bytes(caught.value.received) and len(read.data) == 3


def test_a_replay_recorded_again_gives_the_same_exchanges(recorded: Path) -> None:
    original = load_trace(recorded)
    recorder = TraceRecorder()
    context = RecordingContext(ReplayContext(original), recorder)
    handle, opened = open_bridge_handle(context=context)
    usb = Usb3Transport(handle, opened)
    for exchange in exchanges(original)[2:]:  # after set_configuration and claim: replay each request as recorded
        request = exchange.request
        if request.kind == "release":
            usb.close()
            break
        if request.kind == "bulk":
            if request.ep & 0x80:
                handle.bulkRead(request.ep, request.length)
            else:
                handle.bulkWrite(request.ep, request.data)
        elif request.setup is not None:
            request_type, code, value, index = request.setup
            if request_type & 0x80:
                handle.controlRead(request_type, code, value, index, request.length)
            else:
                handle.controlWrite(request_type, code, value, index, request.data)
    again = exchanges(recorder.trace())
    assert [e.request for e in again] == [e.request for e in exchanges(original)]
    assert [bytes(e.data) for e in again] == [bytes(e.data) for e in exchanges(original)]
