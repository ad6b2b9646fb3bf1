"""Replay: REPLAY+AMD runs the real transport and driver on a recording; a changed request, a run past the end and a
trace left unconsumed each raise a typed error naming the record; errors and partial transfers replay as recorded."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import usb1  # type: ignore[import-untyped]  # libusb1 ships no type information

import tinyhil
from tinyhil.emulators.faults import Fault, FaultPlan, Operation
from tinyhil.mocks.replay import ENV_REPLAY, open_replay
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.asm2464 import BULK_IN_EP, BULK_OUT_EP, REQUEST_TYPE_OUT, Request
from tinyhil.trace import (
    Complete,
    ReplayContext,
    ReplayExhausted,
    ReplayHandle,
    ReplayMismatch,
    Submit,
    Trace,
    TraceHeader,
    TraceNotConsumed,
    TraceRecorder,
    Transfer,
    TransferStatus,
    load_trace,
    save_trace,
)
from tinyhil.trace.recorder import RecordingContext
from tinyhil.trace.records import Op
from tinyhil.usb.backend import open_bridge_handle
from tinyhil.usb.transport import Usb3Transport

Session = Callable[[tinyhil.Device], bytes]


def test_the_recorded_session_replays_through_the_real_transport(
    recorded: Path, run_session: Session, session_bytes: bytes
) -> None:
    with open_replay(recorded) as device:
        assert isinstance(device.transport, Usb3Transport) and not isinstance(device.transport, MockUSB3)
        assert run_session(device) == session_bytes  # the copyout's bytes come from the trace
        handle = device.transport._handle
        assert isinstance(handle, ReplayHandle) and handle.consumed > 0
    assert handle.closed  # closing checked that every recorded exchange was consumed (it raises otherwise)


def test_the_target_is_available_only_with_a_trace(
    recorded: Path, monkeypatch: pytest.MonkeyPatch, run_session: Session
) -> None:
    monkeypatch.delenv(ENV_REPLAY, raising=False)
    target = tinyhil.registry.default_registry().resolve("REPLAY+AMD")
    assert "--hil-replay" in (target.unavailable_reason() or "")
    monkeypatch.setenv(ENV_REPLAY, str(recorded))
    assert target.unavailable_reason() is None
    with tinyhil.open_target("REPLAY+AMD", trace=str(recorded)) as device:
        run_session(device)


def _edited(recorded: Path, tmp_path: Path) -> tuple[Path, int]:
    """A copy of the recording with the first full-window bulk OUT's byte 100 changed; returns it and its seq."""
    lines = recorded.read_text().splitlines(keepends=True)
    for number, line in enumerate(lines[1:-1], 2):
        obj = json.loads(line)
        if obj["op"] == "submit" and obj.get("ep") == BULK_OUT_EP and obj["length"] == 0x40000:
            data = bytearray.fromhex(obj["data"])
            data[100] ^= 0xFF
            obj["data"] = data.hex()
            lines[number - 1] = json.dumps(obj) + "\n"
            path = tmp_path / "edited.hiltrace.jsonl"
            path.write_text("".join(lines))
            return path, obj["seq"]
    raise AssertionError("no full-window bulk OUT in the recording")


def test_a_changed_byte_is_a_mismatch_showing_both_requests_and_the_seq(
    recorded: Path, tmp_path: Path, run_session: Session
) -> None:
    path, seq = _edited(recorded, tmp_path)
    device = open_replay(path)
    with pytest.raises(ReplayMismatch) as caught:
        run_session(device)
    assert caught.value.seq == seq
    message = str(caught.value)
    assert f"(record seq {seq}); data differs first at byte 0x64" in message
    expected, actual = message.splitlines()[-2:]
    assert expected.startswith("  expected: bulk OUT ep=0x02 length=262144 data=")
    assert actual.startswith("  actual:   bulk OUT ep=0x02 length=262144 data=")
    with pytest.raises(ReplayMismatch, match=rf"diverged earlier \(record seq {seq}\)"):
        device.close()  # teardown ran to its end; closing says the replay failed, so a caught mismatch cannot pass


def _two_transfers() -> Trace:
    out = Transfer(seq=0, t_ns=0, dur_ns=5, op=Op.BULK, ep=BULK_OUT_EP, length=4, data=b"abcd", timeout=100, ret=4)
    read = Transfer(seq=1, t_ns=1, dur_ns=5, op=Op.BULK, ep=BULK_IN_EP, length=2, data=b"xy", timeout=100, ret=2)
    return Trace(TraceHeader(), (out, read))


def test_running_past_the_end_raises_at_once(recorded: Path, run_session: Session) -> None:
    with open_replay(recorded) as device:
        run_session(device)
        handle = device.transport._handle
    assert isinstance(handle, ReplayHandle) and handle.closed  # the whole recording was consumed
    with pytest.raises(ReplayExhausted, match="ran past the end of the trace") as caught:
        handle.bulkRead(BULK_IN_EP, 16)
    assert caught.value.seq is None and "expected: (nothing: end of trace)" in str(caught.value)
    assert "actual:   bulk IN ep=0x81 length=16" in str(caught.value)


def test_a_trace_not_consumed_is_reported_at_close() -> None:
    handle = ReplayContext(_two_transfers(), name="two").open_handle()
    assert handle.bulkWrite(BULK_OUT_EP, b"abcd") == 4
    with pytest.raises(TraceNotConsumed, match=r"1 of 2 recorded exchanges never requested; the first is record "
                                               r"seq 1: bulk IN ep=0x81 length=2") as caught:  # fmt: skip
        handle.close()
    assert caught.value.seq == 1


def _record_transport(recorder: TraceRecorder, **options: object) -> tuple[MockUSB3, Usb3Transport]:
    mock = MockUSB3(**options)  # type: ignore[arg-type]
    handle, context = open_bridge_handle(context=RecordingContext(mock.context, recorder))
    return mock, Usb3Transport(handle, context)


def test_a_recorded_stall_and_a_partial_timeout_replay_as_recorded(tmp_path: Path) -> None:
    plan = FaultPlan.single(Operation.bulk_out(), 1, Fault.timeout(partial_bytes=512))
    recorder = TraceRecorder()
    mock, usb = _record_transport(recorder, faults=plan)
    recorder.clock = lambda: mock.kernel.now_ns
    usb.control_write(Request.SRAM_ARM, 512, 16 << 8)  # arm window 0 (256 KB) for the bulk OUT
    with pytest.raises(usb1.USBErrorTimeout) as recorded_error:
        usb.bulk_write(b"\xaa" * 0x40000)
    with pytest.raises(usb1.USBErrorPipe):
        usb.control_write(0xEE)  # an unknown vendor request stalls
    usb.close()
    assert recorded_error.value.transferred == 512
    path = tmp_path / "faults.hiltrace.jsonl"
    save_trace(recorder.trace(), path)
    context = ReplayContext(load_trace(path), name=path.name)
    handle, ctx = open_bridge_handle(context=context)
    replay = Usb3Transport(handle, ctx)
    replay.control_write(Request.SRAM_ARM, 512, 16 << 8)
    with pytest.raises(usb1.USBErrorTimeout) as replayed_error:
        replay.bulk_write(b"\xaa" * 0x40000)
    assert replayed_error.value.transferred == 512
    with pytest.raises(usb1.USBErrorPipe):
        replay.control_write(0xEE)
    replay.close()


def test_per_endpoint_order_accepts_overlapping_in_and_out() -> None:
    trace = _two_transfers()
    strict = ReplayContext(trace).open_handle()
    with pytest.raises(ReplayMismatch, match="record seq 0") as caught:
        strict.bulkRead(BULK_IN_EP, 2)
    assert caught.value.seq == 0 and "expected: bulk OUT ep=0x02 length=4 data=61626364" in str(caught.value)
    per_endpoint = ReplayContext(trace, order="endpoint").open_handle()
    assert per_endpoint.bulkRead(BULK_IN_EP, 2) == b"xy"  # the IN first: each endpoint keeps its own order
    assert per_endpoint.bulkWrite(BULK_OUT_EP, b"abcd") == 4
    per_endpoint.close()  # everything consumed: no error


def test_async_transfers_complete_from_the_event_pump_with_the_recorded_bytes() -> None:
    recorder = TraceRecorder()
    _, usb = _record_transport(recorder)
    usb.control_write(Request.XDATA_WRITE, 0x5000, 0x41)
    tag, buffer = usb.control_read_async(Request.XDATA_READ, 1, 0x5000)
    usb.bulk_wait(tag)
    usb.close()
    assert bytes(buffer) == b"\x41"
    context = ReplayContext(recorder.trace())
    handle, ctx = open_bridge_handle(context=context)
    fired: list[int] = []
    handle.claimInterface(0)
    handle.controlWrite(REQUEST_TYPE_OUT, Request.XDATA_WRITE, 0x5000, 0x41, b"")
    transfer = handle.getTransfer()
    transfer.setControl(0xC0, Request.XDATA_READ, 0x5000, 0, 1, lambda t: fired.append(t.getActualLength()))
    transfer.submit()
    assert fired == [], "nothing completes inside submit"
    ctx.handleEventsTimeout(0)
    assert fired == [1] and bytes(transfer.getBuffer()) == b"\x41"
    handle.releaseInterface(0)
    handle.close()


@pytest.mark.parametrize(
    ("target", "options", "message"),
    [
        ("REPLAY+AMD", {"order": "sideways"}, "order='sideways', expected one of"),
        ("REPLAY+AMD", {"trace": "x.txt"}, "trace file 'x.txt': unknown extension"),
        ("MOCKUSB+AMD", {"record": 3}, "record=3, expected a path ending in .hiltrace.jsonl or .pcapng"),
        ("MOCKUSB+AMD", {"record": "x.pcap"}, "trace file 'x.pcap': unknown extension"),
    ],
)
def test_bad_trace_options_are_refused_before_anything_opens(
    target: str, options: dict[str, object], message: str, recorded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_REPLAY, str(recorded))
    with pytest.raises(tinyhil.errors.InvalidArgument, match=message.replace("(", r"\(").replace(".", r"\.")):
        tinyhil.open_target(target, **options)


def test_a_directory_is_no_trace_file_for_the_target(recorded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_REPLAY, str(recorded.parent))
    with pytest.raises(tinyhil.errors.InvalidArgument, match="expected a trace file"):
        tinyhil.open_target("REPLAY+AMD")


def _async_in_trace(length: int) -> Trace:
    header = TraceHeader(device={"vendor_id": 0xADD1, "product_id": 1}, host_ops=False)
    submit = Submit(0, 0, tag=0, ep=BULK_IN_EP, length=length, data=b"", timeout=1000)
    complete = Complete(1, 10, tag=0, status=TransferStatus.COMPLETED, actual=length, data=bytes(range(length)))
    return Trace(header, (submit, complete))


def test_a_recorded_answer_longer_than_the_request_is_a_mismatch() -> None:
    """The script never hands back more than asked for, whatever reached it (here an exchange put in by hand)."""
    from collections import deque

    from tinyhil.trace.exchanges import Exchange, WireRequest

    context = ReplayContext(_async_in_trace(16))
    request = WireRequest("bulk", BULK_IN_EP, None, 16)
    context._script.queues[0] = deque([Exchange(0, request, actual=4096, data=bytes(4096))])
    handle = context.open_handle()
    with pytest.raises(ReplayMismatch, match=r"call 1 asks for 16 bytes, but record seq 0 answers with 4096"):
        handle.bulkRead(BULK_IN_EP, 16)


def test_an_async_completion_that_no_longer_fits_its_buffer_overflows_instead_of_raising() -> None:
    context = ReplayContext(_async_in_trace(16), check_consumed=False)
    handle = context.open_handle()
    buffer = bytearray(16)
    done: list[int] = []
    transfer = handle.getTransfer()
    transfer.setBulk(BULK_IN_EP, buffer, lambda t: done.append(t.getStatus()))
    transfer.submit()
    del buffer[8:]  # the driver shrank its buffer while the transfer was in flight
    context.handleEventsTimeout(0)
    assert done == [usb1.TRANSFER_OVERFLOW] and transfer.getActualLength() == 8 and bytes(buffer) == bytes(range(8))
