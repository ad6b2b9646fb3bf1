"""Usb3Transport's synchronous half at the wire level: exact request encodings, errors passing through untouched,
short transfers, the bad-input table, the open/closed guard and teardown."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest
import usb1

from tinyhil.errors import InvalidArgument, StateError
from tinyhil.usb import MAX_TIMEOUT_MS, ShortTransfer, TransportState, Usb3Transport, requires_open


def _transport(usb_fake: ModuleType, responder: Any, **kwargs: Any) -> tuple[Usb3Transport, Any]:
    handle = usb_fake.ScriptedHandle(responder)
    return Usb3Transport(handle, usb_fake.ScriptedContext(handle), **kwargs), handle


def test_construction_claims_interface_0_and_nothing_else(usb_fake: ModuleType) -> None:
    transport, handle = _transport(usb_fake, usb_fake.ok)
    assert handle.events == [("claim", 0)] and handle.calls == []
    assert transport.state is TransportState.OPEN


def test_control_write_encodes_a_vendor_out_request(transport: Usb3Transport, handle: Any) -> None:
    transport.control_write(0xF0, 0x1234, 0x0002, b"\x01\x02\x03", timeout=250)
    transport.control_write(0xE5, 0xB450, 0x78)
    call, bare = handle.calls
    assert (call.kind, call.request_type, call.request, call.value, call.index) == (
        "control_out",
        0x40,
        0xF0,
        0x1234,
        2,
    )
    assert (call.data, call.timeout, call.is_async) == (b"\x01\x02\x03", 250, False)
    assert (bare.request_type, bare.request, bare.value, bare.index, bare.data, bare.timeout) == (
        0x40,
        0xE5,
        0xB450,
        0x78,
        b"",
        1000,
    )


def test_control_read_encodes_a_vendor_in_request_and_returns_the_bytes(usb_fake: ModuleType) -> None:
    transport, handle = _transport(usb_fake, usb_fake.replies(b"\xaa\xbb\xcc\xdd"))
    assert transport.control_read(0xE4, 4, value=0xA800) == b"\xaa\xbb\xcc\xdd"
    (call,) = handle.calls
    assert (call.kind, call.request_type, call.request, call.value, call.index, call.length, call.timeout) == (
        "control_in",
        0xC0,
        0xE4,
        0xA800,
        0,
        4,
        1000,
    )


def test_bulk_transfers_use_endpoints_0x02_and_0x81(usb_fake: ModuleType) -> None:
    transport, handle = _transport(usb_fake, usb_fake.replies(None, b"xyz"))
    transport.bulk_write(np.arange(4, dtype=np.uint32), timeout=5)
    assert transport.bulk_read(3, timeout=7) == b"xyz"
    out, into = handle.calls
    assert (out.kind, out.endpoint, out.data, out.timeout) == ("bulk_out", 0x02, np.arange(4, dtype="<u4").tobytes(), 5)
    assert (into.kind, into.endpoint, into.length, into.timeout) == ("bulk_in", 0x81, 3, 7)


def test_bulk_read_into_fills_the_callers_buffer_in_place(usb_fake: ModuleType) -> None:
    transport, handle = _transport(usb_fake, usb_fake.replies(b"abcdef"))
    out = bytearray(b"xx" + bytes(6) + b"yy")
    transport.bulk_read_into(memoryview(out)[2:8], timeout=9)
    assert out == b"xxabcdefyy"  # the transfer's buffer was the caller's slice: neighbours untouched
    (call,) = handle.calls
    assert (call.kind, call.endpoint, call.length, call.timeout, call.is_async) == ("bulk_in", 0x81, 6, 9, True)
    assert transport.in_flight == ()


def test_bulk_read_into_raises_short_reads_and_timeouts(usb_fake: ModuleType) -> None:
    transport, _ = _transport(usb_fake, usb_fake.replies(b"abc", usb_fake.timeout_error(512)))
    with pytest.raises(ShortTransfer, match="moved 0x3 of 0x6 bytes"):
        transport.bulk_read_into(bytearray(6))
    with pytest.raises(usb1.USBErrorTimeout) as got:
        transport.bulk_read_into(np.zeros(1024, dtype=np.uint8))
    assert got.value.transferred == 512 and len(got.value.received) == 512
    assert transport.in_flight == () and transport.latched_error is None


@pytest.mark.parametrize(
    ("buffer", "message"),
    [
        (b"abc", "read-only"),
        (bytearray(), "buffer of 0 bytes"),
        ("text", "buffer=str object, expected a writable bytes-like object"),
        (np.zeros((4, 4), dtype=np.uint8)[:, 1], "non-contiguous"),
    ],
    ids=["read-only", "empty", "str", "strided"],
)
def test_bulk_read_into_refuses_what_it_cannot_fill(usb_fake: ModuleType, buffer: Any, message: str) -> None:
    transport, handle = _transport(usb_fake, usb_fake.ok)
    with pytest.raises(InvalidArgument, match=message):
        transport.bulk_read_into(buffer)
    assert handle.calls == []


@pytest.mark.parametrize(
    "error",
    [
        usb1.USBErrorPipe(usb1.ERROR_PIPE),
        usb1.USBErrorNoDevice(usb1.ERROR_NO_DEVICE),
        usb1.USBErrorIO(usb1.ERROR_IO),
    ],
    ids=lambda e: type(e).__name__,
)
@pytest.mark.parametrize("op", ["control_write", "control_read", "bulk_write", "bulk_read"])
def test_usb1_errors_pass_through_unchanged(usb_fake: ModuleType, op: str, error: Exception) -> None:
    transport, _ = _transport(usb_fake, usb_fake.replies(error))
    args = {"control_write": (0xF3, 1), "control_read": (0xE4, 1), "bulk_write": (b"x",), "bulk_read": (1,)}[op]
    with pytest.raises(type(error)) as raised:
        getattr(transport, op)(*args)
    assert raised.value is error


def test_timeouts_keep_transferred_and_received(usb_fake: ModuleType) -> None:
    transport, _ = _transport(
        usb_fake, usb_fake.replies(usb_fake.timeout_error(512), usb_fake.timeout_error(4, b"abcd"))
    )
    with pytest.raises(usb1.USBErrorTimeout) as sent:
        transport.bulk_write(bytes(1024))
    assert sent.value.transferred == 512
    with pytest.raises(usb1.USBErrorTimeout) as got:
        transport.bulk_read(1024)
    assert (got.value.transferred, got.value.received) == (4, b"abcd")


@pytest.mark.parametrize(
    ("op", "args", "reply", "expected", "actual"),
    [
        ("bulk_write", (bytes(1024),), 1000, 1024, 1000),
        ("bulk_read", (1024,), bytes(512), 1024, 512),
        ("control_write", (0xF0, 0, 0, bytes(12)), 8, 12, 8),
        ("control_read", (0xF0, 8), bytes(4), 8, 4),
    ],
)
def test_short_transfers_raise_naming_both_sizes(
    usb_fake: ModuleType, op: str, args: tuple[Any, ...], reply: Any, expected: int, actual: int
) -> None:
    transport, _ = _transport(usb_fake, usb_fake.replies(reply))
    with pytest.raises(ShortTransfer, match=f"moved {actual:#x} of {expected:#x} bytes") as raised:
        getattr(transport, op)(*args)
    assert (raised.value.expected, raised.value.actual, raised.value.op) == (expected, actual, op)


BAD_INPUTS = [
    ("control_write", (0x100,), {}, "request=256, expected an int <= 255"),
    ("control_write", (-1,), {}, "request=-1, expected an int >= 0"),
    ("control_write", (0xF0, 0x10000), {}, "value=65536, expected an int <= 65535"),
    ("control_write", (0xF0, 0, 0x10000), {}, "index=65536"),
    ("control_write", (0xF0, 0, 0, "text"), {}, "data=str object, expected a bytes-like object"),
    ("control_write", (0xF0, 0, 0, bytes(0x1001)), {}, "control_write(data of 0x1001 bytes): expected at most 0x1000"),
    ("control_write_async", (0xF0, 0, 0, bytes(0x10000)), {}, "expected at most 0xffff bytes (wLength)"),
    ("control_write", (0xF0,), {"timeout": -1}, "timeout (ms)=-1, expected an int >= 1"),
    ("control_write", (True,), {}, "request=True, expected an int"),
    ("control_write", (0xF0, False), {}, "value=False, expected an int"),
    ("control_write", (0xF0, 0, 1.0), {}, "index=1.0, expected an int"),
    ("control_write", (0xF0,), {"timeout": True}, "timeout (ms)=True"),
    ("control_read", (0xE4, 0x1001), {}, "control_read(length=0x1001): expected at most 0x1000 bytes"),
    ("control_read_async", (0xE4, 0x10000), {}, "length=65536, expected an int <= 65535"),
    ("control_read", (0xE4, 1.5), {}, "length=1.5, expected an int"),
    ("bulk_write", (np.zeros((4, 4), dtype=np.uint8)[:, ::2],), {}, "non-contiguous"),
    ("bulk_write", (b"x",), {"timeout": -5}, "timeout (ms)=-5"),
    ("bulk_read", (-1,), {}, "length=-1, expected an int >= 0"),
    ("control_write_async", (0x1FF,), {}, "request=511"),
    ("clear_halt", (0x01,), {}, "endpoint=1, expected 0x02 or 0x81"),
    ("pause", (-1,), {}, "seconds=-1, expected a number of seconds in [0, 60]"),
    ("pause", ("1",), {}, "seconds='1'"),
    # beyond the 2-hour cap of one transfer (bridge_io.MAX_TIMEOUT_MS): libusb would wait days, ctypes truncate 2**32
    ("bulk_write", (b"x",), {"timeout": MAX_TIMEOUT_MS + 1}, "timeout (ms)=7200001, expected an int <= 7200000"),
    ("bulk_read", (512,), {"timeout": 1 << 32}, "timeout (ms)=4294967296, expected an int <= 7200000"),
    ("bulk_read_into", (bytearray(512),), {"timeout": MAX_TIMEOUT_MS + 1}, "timeout (ms)=7200001"),
    ("bulk_write_async", (b"x",), {"timeout": 1 << 40}, "expected an int <= 7200000"),
    ("control_write", (0xF0,), {"timeout": MAX_TIMEOUT_MS + 1}, "timeout (ms)=7200001"),
    ("control_read", (0xE4, 1), {"timeout": 1 << 32}, "timeout (ms)=4294967296"),
    ("control_write_async", (0xF0,), {"timeout": MAX_TIMEOUT_MS + 1}, "timeout (ms)=7200001"),
    ("control_read_async", (0xE4, 1), {"timeout": 1.5}, "timeout (ms)=1.5, expected an int"),
]


@pytest.mark.parametrize(("op", "args", "kwargs", "message"), BAD_INPUTS, ids=[f"{b[0]}-{b[3]}" for b in BAD_INPUTS])
def test_bad_inputs_raise_invalid_argument_and_send_nothing(
    transport: Usb3Transport, handle: Any, op: str, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument) as raised:
        getattr(transport, op)(*args, **kwargs)
    assert message in str(raised.value)
    assert handle.calls == [] and transport.in_flight == ()


# What a board accepts and strict mode refuses: (call, args, kwargs, the strict message, calls sent without strict).
STRICT_ONLY = [
    ("bulk_wait", (99,), {}, "bulk_wait(tag=99): strict mode, expected a tag in flight () (never submitted)", 0),
    ("bulk_wait", (None,), {}, "bulk_wait(tag=None): strict mode", 0),
    ("bulk_wait", ("1",), {}, "bulk_wait(tag='1'): strict mode", 0),
    ("control_write", (0xF0,), {"timeout": 0}, "control_write(timeout=0): strict mode refuses it, 0 is libusb's", 1),
    ("control_read", (0xE4, 0), {}, "control_read(length=0): strict mode refuses it, a zero-length transfer", 1),
    ("bulk_write", (b"",), {}, "bulk_write(payload of 0 bytes): strict mode refuses it, a zero-length packet", 1),
    ("bulk_read", (0,), {}, "bulk_read(length=0): strict mode refuses it", 1),
    ("bulk_read", (4,), {"timeout": 0}, "bulk_read(timeout=0): strict mode", 1),
    ("bulk_write_async", (b"",), {}, "bulk_write_async(payload of 0 bytes): strict mode", 1),
    ("bulk_write_async", (b"x",), {"timeout": 0}, "bulk_write_async(timeout=0): strict mode", 1),
    ("control_read_async", (0xE4, 0), {}, "control_read_async(length=0): strict mode", 1),
    ("control_write_async", (0xF0,), {"timeout": 0}, "control_write_async(timeout=0): strict mode", 1),
]


@pytest.mark.parametrize(("op", "args", "kwargs", "message", "sent"), STRICT_ONLY, ids=[row[3] for row in STRICT_ONLY])
def test_what_a_board_accepts_goes_out_and_strict_mode_refuses_it(
    usb_fake: ModuleType, op: str, args: tuple[Any, ...], kwargs: dict[str, Any], message: str, sent: int
) -> None:
    lenient, handle = _transport(usb_fake, usb_fake.ok)
    getattr(lenient, op)(*args, **kwargs)
    lenient.wait_all()  # an asynchronous call reaches the handle's record when its transfer is reaped
    assert len(handle.calls) == sent
    if kwargs.get("timeout") == 0:
        assert handle.calls[0].timeout == 0, "libusb's 'forever' goes out as 0"
    strict, handle = _transport(usb_fake, usb_fake.ok, strict=True)
    with pytest.raises(InvalidArgument) as raised:
        getattr(strict, op)(*args, **kwargs)
    assert message in str(raised.value) and handle.calls == [] and strict.in_flight == ()


@pytest.mark.parametrize(
    ("handle_arg", "events_arg", "kwargs", "message"),
    [
        (object(), None, {}, "expected a usb1.USBDeviceHandle-like object"),
        (None, object(), {}, "expected an object with handleEventsTimeout"),
        (None, None, {"pump_interval_s": 0}, "pump_interval_s=0"),
        (None, None, {"max_in_flight": 0}, "max_in_flight=0"),
        (None, None, {"strict": 1}, "strict=1, expected True or False"),
    ],
)
def test_bad_construction_is_rejected_before_claiming(
    usb_fake: ModuleType, handle_arg: Any, events_arg: Any, kwargs: dict[str, Any], message: str
) -> None:
    handle = usb_fake.ScriptedHandle()
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")):
        Usb3Transport(handle_arg or handle, events_arg or usb_fake.ScriptedContext(handle), **kwargs)
    assert handle.events == []


@pytest.mark.parametrize(
    ("op", "args"),
    [
        ("control_write", (0xF3, 1)),
        ("control_read", (0xE4, 1)),
        ("bulk_write", (b"x",)),
        ("bulk_read", (1,)),
        ("bulk_read_into", (bytearray(1),)),
        ("bulk_write_async", (b"x",)),
        ("control_write_async", (0xF3,)),
        ("control_read_async", (0xE4, 1)),
        ("bulk_wait", (1,)),
        ("wait_all", ()),
        ("clear_halt", (0x02,)),
        ("reset_device", ()),
        ("pause", (0,)),
    ],
)
def test_a_closed_transport_refuses_every_operation_naming_method_and_state(
    transport: Usb3Transport, handle: Any, op: str, args: tuple[Any, ...]
) -> None:
    transport.close()
    with pytest.raises(StateError, match=rf"Usb3Transport\.{op}\(\) called, but it is closed"):
        getattr(transport, op)(*args)
    assert handle.calls == []


def test_close_releases_closes_and_calls_on_close_once(usb_fake: ModuleType) -> None:
    closed: list[str] = []
    transport, handle = _transport(usb_fake, usb_fake.ok, on_close=lambda: closed.append("context"))
    with transport:
        pass
    transport.close()
    assert handle.events == [("claim", 0), ("release", 0), ("close", None)] and closed == ["context"]
    assert transport.state is TransportState.CLOSED and "closed" in repr(transport)


def test_close_survives_a_vanished_device_but_not_other_errors(usb_fake: ModuleType) -> None:
    closed: list[bool] = []
    transport, handle = _transport(usb_fake, usb_fake.ok, on_close=lambda: closed.append(True))
    handle.release_error = usb1.USBErrorNoDevice(usb1.ERROR_NO_DEVICE)
    transport.close()
    assert handle.closed and closed == [True]

    transport, handle = _transport(usb_fake, usb_fake.ok, on_close=lambda: closed.append(True))
    handle.release_error = usb1.USBErrorBusy(usb1.ERROR_BUSY)
    with pytest.raises(usb1.USBErrorBusy):
        transport.close()
    assert handle.closed and closed == [True, True], "everything is closed before the error propagates"


def test_clear_halt_reset_and_pause_reach_the_handle_and_pump(usb_fake: ModuleType) -> None:
    handle = usb_fake.ScriptedHandle()
    context = usb_fake.ScriptedContext(handle)
    transport = Usb3Transport(handle, context)
    transport.clear_halt(0x81)
    transport.reset_device()
    transport.pause(0.25)
    assert handle.events[1:] == [("clear_halt", 0x81), ("reset", None)] and context.pumps == [0.25]


def test_requires_open_rejects_what_it_cannot_guard() -> None:
    with pytest.raises(TypeError, match="plain methods"):
        requires_open(staticmethod(lambda: None))  # type: ignore[arg-type]
