"""One check of a request for both paths: the same bad request fails the same way through the synchronous calls
(``controlRead``, ``bulkWrite``...) and through a transfer (``setControl`` / ``setBulk`` + ``submit``), with the
exception class usb1 raises, and leaves the emulator as it was; what usb1 accepts (bools, IntEnums, numpy integers
where it wants an int) both paths accept and answer alike."""

from __future__ import annotations

import ctypes
import enum
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
import usb1
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.mocks.usb import EmulatedBoard, handle, open_emulated_board, request_checks, transfer
from tinyhil.mocks.usb.request_checks import MAX_TIMEOUT_MS, U32, ArgumentTypeError, check_bulk, check_control

IN, OUT = usb1.ENDPOINT_IN, usb1.ENDPOINT_OUT
XDATA_READ, CONFIG_WRITE, ARM_WINDOW = 0xE4, 0xF0, 0xF2


class Field(enum.IntEnum):
    ONE = 1


@dataclass(frozen=True)
class Request:
    """One request, as the same bytes on the wire from either path (the kind fixes the direction, as the
    synchronous calls do; a transfer gets the kind's direction bit on an int ``request_type`` / ``endpoint``)."""

    kind: str  # "control" or "bulk"
    direction: int
    endpoint: Any = None  # bulk
    request_type: Any = None  # control
    request: Any = None
    value: Any = 0
    index: Any = 0
    data_or_length: Any = 0
    timeout: Any = 100

    def with_(self, **changes: Any) -> Request:
        return replace(self, **changes)


CONTROL_IN = Request("control", IN, request_type=0xC0, request=XDATA_READ, value=0x5000, data_or_length=4)
CONTROL_OUT = Request("control", OUT, request_type=0x40, request=ARM_WINDOW, value=1, data_or_length=b"")
CONFIG_OUT = CONTROL_OUT.with_(request=CONFIG_WRITE, value=0, data_or_length=bytes(12))
BULK_IN = Request("bulk", IN, endpoint=0x81, data_or_length=512)
BULK_OUT = Request("bulk", OUT, endpoint=0x02, data_or_length=b"\x01" * 512)


def with_direction(field: Any, direction: int) -> Any:
    """An 8-bit int ``field`` with its direction bit set as the kind's; anything else (bad values) as it is."""
    return field & ~usb1.ENDPOINT_DIR_MASK | direction if type(field) is int and 0 <= field <= 0xFF else field


def run_sync(board: EmulatedBoard, r: Request) -> bytes | int:
    h = board.handle
    if r.kind == "control" and r.direction == IN:
        return bytes(h.controlRead(r.request_type, r.request, r.value, r.index, r.data_or_length, r.timeout))
    if r.kind == "control":
        return int(h.controlWrite(r.request_type, r.request, r.value, r.index, r.data_or_length, r.timeout))
    if r.direction == IN:
        return bytes(h.bulkRead(r.endpoint, r.data_or_length, r.timeout))
    return int(h.bulkWrite(r.endpoint, r.data_or_length, r.timeout))


_STATUS_ERRORS = {
    usb1.TRANSFER_STALL: usb1.USBErrorPipe,
    usb1.TRANSFER_TIMED_OUT: usb1.USBErrorTimeout,
    usb1.TRANSFER_NO_DEVICE: usb1.USBErrorNoDevice,
}


def run_async(board: EmulatedBoard, r: Request) -> bytes | int:
    """The request through a transfer; a failed completion raises the exception the synchronous call would."""
    t = board.handle.getTransfer()
    if r.kind == "control":
        request_type = with_direction(r.request_type, r.direction)
        t.setControl(request_type, r.request, r.value, r.index, r.data_or_length, timeout=r.timeout)
    else:
        t.setBulk(with_direction(r.endpoint, r.direction), r.data_or_length, timeout=r.timeout)
    try:
        t.submit()
    finally:
        assert board.handle._inflight == (set() if not t.isSubmitted() else {t}), "a refused submit leaves nothing"
    board.context.handleEvents()
    if t.getStatus() != usb1.TRANSFER_COMPLETED:
        raise _STATUS_ERRORS[t.getStatus()](t.getStatus())
    buffer = t.getBuffer()
    return bytes(buffer[: t.getActualLength()]) if r.direction == IN else t.getActualLength()


def board() -> EmulatedBoard:
    return open_emulated_board(function=PlainEndpoint(vram_bytes=1 << 20))


def outcome(run: Any, r: Request) -> tuple[type[BaseException] | None, Any]:
    """(exception class, None) or (None, result) of one request on a fresh board, which it must leave unchanged
    when it fails."""
    error, _, result = failure(run, r)
    return error, result


def failure(run: Any, r: Request) -> tuple[type[BaseException] | None, str, Any]:
    """(exception class, its message and notes, None) or (None, "", result) of one request on a fresh board."""
    with board() as b:
        before = b.bridge.state_digest()
        try:
            return None, "", run(b, r)
        except Exception as error:  # the class and the message are what the tests compare
            assert b.bridge.state_digest() == before, f"{r} failed but changed the emulator"
            return type(error), "; ".join((str(error), *getattr(error, "__notes__", ()))), None


# One table of bad requests, run through both paths: each row, what is wrong, and the class usb1 raises (or, for
# out-of-range integers, which ctypes would truncate, USBErrorInvalidParam).
BAD = [
    ("request_type past 8 bits", CONTROL_IN.with_(request_type=0x1C0), usb1.USBErrorInvalidParam),
    ("request_type a float", CONTROL_IN.with_(request_type=192.0), ArgumentTypeError),
    ("request_type None", CONTROL_OUT.with_(request_type=None), ArgumentTypeError),
    ("request past 8 bits", CONTROL_IN.with_(request=0x1E4), usb1.USBErrorInvalidParam),
    ("request negative", CONTROL_OUT.with_(request=-1), usb1.USBErrorInvalidParam),
    ("request a str", CONTROL_IN.with_(request="E4"), ArgumentTypeError),
    ("value past 16 bits", CONTROL_IN.with_(value=0x10000), usb1.USBErrorInvalidParam),
    ("value negative", CONTROL_OUT.with_(value=-1), usb1.USBErrorInvalidParam),
    ("value a float", CONTROL_IN.with_(value=1.5), ArgumentTypeError),
    ("value None", CONTROL_OUT.with_(value=None), ArgumentTypeError),
    ("index past 16 bits", CONTROL_IN.with_(index=0x10000), usb1.USBErrorInvalidParam),
    ("index negative", CONTROL_OUT.with_(index=-1), usb1.USBErrorInvalidParam),
    ("index bytes", CONTROL_IN.with_(index=b"\x00"), ArgumentTypeError),
    ("control read length negative", CONTROL_IN.with_(data_or_length=-1), ValueError),
    ("control read length past wLength", CONTROL_IN.with_(data_or_length=0x10000), usb1.USBErrorInvalidParam),
    ("control read length a float", CONTROL_IN.with_(data_or_length=4.0), TypeError),
    ("control read length a str", CONTROL_IN.with_(data_or_length="4"), TypeError),
    ("control data past wLength", CONTROL_OUT.with_(data_or_length=bytes(0x10000)), usb1.USBErrorInvalidParam),
    ("control data a str", CONTROL_OUT.with_(data_or_length="abc"), TypeError),
    ("control data an object", CONTROL_OUT.with_(data_or_length=object()), TypeError),
    ("control data of floats", CONTROL_OUT.with_(data_or_length=[1.5]), TypeError),
    ("control timeout negative", CONTROL_OUT.with_(timeout=-1), usb1.USBErrorInvalidParam),
    ("control timeout past 32 bits", CONTROL_IN.with_(timeout=1 << 32), usb1.USBErrorInvalidParam),
    ("control timeout a float", CONTROL_OUT.with_(timeout=0.5), ArgumentTypeError),
    ("bulk OUT to an IN endpoint number", BULK_OUT.with_(endpoint=0x81), usb1.USBErrorIO),
    ("bulk OUT to endpoint 1", BULK_OUT.with_(endpoint=0x01), usb1.USBErrorIO),
    ("bulk OUT endpoint past 8 bits", BULK_OUT.with_(endpoint=0x102), usb1.USBErrorInvalidParam),
    ("bulk OUT endpoint negative", BULK_OUT.with_(endpoint=-2), usb1.USBErrorInvalidParam),
    ("bulk OUT endpoint a float", BULK_OUT.with_(endpoint=2.0), ArgumentTypeError),
    ("bulk data a str", BULK_OUT.with_(data_or_length="ab"), TypeError),
    ("bulk data an object", BULK_OUT.with_(data_or_length=object()), TypeError),
    ("bulk data of floats", BULK_OUT.with_(data_or_length=[1.5, 2.5]), TypeError),
    ("bulk OUT timeout negative", BULK_OUT.with_(timeout=-1), usb1.USBErrorInvalidParam),
    ("bulk OUT timeout a float", BULK_OUT.with_(timeout=1.5), ArgumentTypeError),
    ("bulk IN from an OUT endpoint number", BULK_IN.with_(endpoint=0x02), usb1.USBErrorIO),
    ("bulk IN from endpoint 3", BULK_IN.with_(endpoint=0x83), usb1.USBErrorIO),
    ("bulk IN endpoint past 8 bits", BULK_IN.with_(endpoint=0x181), usb1.USBErrorInvalidParam),
    ("bulk IN length negative", BULK_IN.with_(data_or_length=-1), ValueError),
    ("bulk IN length a float", BULK_IN.with_(data_or_length=512.0), TypeError),
    ("bulk IN length None", BULK_IN.with_(data_or_length=None), TypeError),
    ("bulk IN timeout past 32 bits", BULK_IN.with_(timeout=1 << 32), usb1.USBErrorInvalidParam),
    ("control data None", CONTROL_OUT.with_(data_or_length=None), TypeError),
    # beyond the 2-hour virtual wait cap: refused up front (the transfer would otherwise outlive its call)
    ("control OUT timeout beyond the cap", CONTROL_OUT.with_(timeout=MAX_TIMEOUT_MS + 1), usb1.USBErrorInvalidParam),
    ("control IN timeout beyond the cap", CONTROL_IN.with_(timeout=3 * 3600 * 1000), usb1.USBErrorInvalidParam),
    ("bulk OUT timeout beyond the cap", BULK_OUT.with_(timeout=MAX_TIMEOUT_MS + 1), usb1.USBErrorInvalidParam),
    ("bulk IN timeout beyond the cap", BULK_IN.with_(timeout=U32), usb1.USBErrorInvalidParam),
    ("bulk OUT timeout beyond the cap, numpy", BULK_OUT.with_(timeout=np.uint32(U32)), usb1.USBErrorInvalidParam),
]


@pytest.mark.parametrize(("what", "request_", "error"), BAD, ids=[row[0] for row in BAD])
def test_a_bad_request_fails_alike_through_both_paths_and_changes_nothing(
    what: str, request_: Request, error: type[BaseException]
) -> None:
    sync, sync_message, _ = failure(run_sync, request_)
    asynchronous, async_message, _ = failure(run_async, request_)
    assert sync is asynchronous, f"{what}: the synchronous call raised {sync}, the transfer {asynchronous}"
    assert sync is not None and issubclass(sync, error), what
    if what in NAMED_BY_API:  # each names its own parameter and what it takes, for the same reason
        assert sync_message.split(" (")[-1] == async_message.split(" (")[-1], what
        assert async_message.startswith("buffer_or_len="), what
    else:
        assert sync_message == async_message, what


# Rows whose bad argument the synchronous call takes as ``data`` or ``length`` and a transfer as ``buffer_or_len``
# (either): the messages name the parameter of the call that was made.
NAMED_BY_API = {
    "control read length a float",
    "control read length a str",
    "control data a str",
    "control data an object",
    "control data of floats",
    "control data None",
    "bulk data a str",
    "bulk data an object",
    "bulk data of floats",
    "bulk IN length a float",
    "bulk IN length None",
}


# What usb1 takes as an int (ctypes takes anything with __index__), taken alike by both paths.
ACCEPTED = [
    ("value True", CONTROL_IN.with_(value=True, index=0), CONTROL_IN.with_(value=1)),
    ("value an IntEnum", CONTROL_IN.with_(value=Field.ONE), CONTROL_IN.with_(value=1)),
    ("value a numpy integer", CONTROL_IN.with_(value=np.uint16(0x5000)), CONTROL_IN),
    ("request_type a numpy integer", CONTROL_IN.with_(request_type=np.uint8(0xC0)), CONTROL_IN),
    ("length True", CONTROL_IN.with_(data_or_length=True), CONTROL_IN.with_(data_or_length=1)),
    ("timeout True", CONTROL_OUT.with_(timeout=True), CONTROL_OUT.with_(timeout=1)),
    ("control data a list of ints", CONFIG_OUT.with_(data_or_length=[0] * 12), CONFIG_OUT),
    ("bulk endpoint an IntEnum", BULK_IN.with_(endpoint=Field.ONE | IN, timeout=5), BULK_IN.with_(timeout=5)),
    ("bulk length True", BULK_IN.with_(data_or_length=True, timeout=5), BULK_IN.with_(data_or_length=1, timeout=5)),
]


@pytest.mark.parametrize(("what", "odd", "plain"), ACCEPTED, ids=[row[0] for row in ACCEPTED])
def test_what_usb1_takes_as_an_int_both_paths_take_like_the_int(what: str, odd: Request, plain: Request) -> None:
    expected = outcome(run_sync, plain)
    assert outcome(run_sync, odd) == expected, what
    assert outcome(run_async, odd) == outcome(run_async, plain), what


def test_the_issues_request_reads_xdata_at_offset_1_on_both_paths() -> None:
    with board() as b:
        b.bridge.write_xdata(0, b"\x11\x22\x33\x44")
        assert b.handle.controlRead(0xC0, 0xE4, True, 0, 1) == bytearray(b"\x22")
        t = b.handle.getTransfer()
        t.setControl(0xC0, 0xE4, True, 0, 1)
        t.submit()
        b.context.handleEvents()
        assert t.getStatus() == usb1.TRANSFER_COMPLETED and bytes(t.getBuffer()) == b"\x22"


def test_a_timeout_beyond_the_wait_cap_is_refused_naming_the_limit_and_the_longest_one_runs() -> None:
    with board() as b:
        with pytest.raises(usb1.USBErrorInvalidParam) as raised:
            b.handle.bulkWrite(0x02, b"\x11" * 512, MAX_TIMEOUT_MS + 1)
        assert "expected at most 7200000 ms (2 h, the emulator's virtual wait cap" in str(raised.value.__notes__)
        assert not b.bridge.front.busy, "nothing was submitted"
        start_ns = b.kernel.now_ns
        with pytest.raises(usb1.USBErrorTimeout):  # the longest timeout it takes ends as a timeout, in virtual time
            b.handle.bulkWrite(0x02, b"\x11" * 512, MAX_TIMEOUT_MS)
        assert b.kernel.now_ns - start_ns >= MAX_TIMEOUT_MS * request_checks.NS_PER_MS
        b.handle.controlWrite(0x40, ARM_WINDOW, 1, 0, b"")  # the next arm pairs with the next bulk, not a stale one
        assert b.handle.bulkWrite(0x02, b"\x22" * 512) == 512
        assert b.bridge.read_sram(0, 512) == b"\x22" * 512


def test_the_argument_type_error_is_what_usb1_raises_on_either_path() -> None:
    # usb1's synchronous calls pass the fields to ctypes argtypes (ctypes.ArgumentError), its transfers assign them
    # to ctypes structure fields (TypeError)
    assert issubclass(ArgumentTypeError, ctypes.ArgumentError) and issubclass(ArgumentTypeError, TypeError)


def test_both_paths_call_the_one_validator() -> None:
    assert handle.check_control is transfer.check_control is request_checks.check_control
    assert handle.check_bulk is transfer.check_bulk is request_checks.check_bulk
    assert handle.BULK_ENDPOINTS is transfer.BULK_ENDPOINTS


def test_a_bad_endpoint_is_refused_at_submit_as_libusb_does() -> None:
    with board() as b:
        t = b.handle.getTransfer()
        t.setBulk(0x01, b"\x00" * 4)  # accepted: libusb fills the transfer without looking at the device
        with pytest.raises(usb1.USBErrorIO):
            t.submit()
        assert not t.isSubmitted() and not b.handle._inflight


def test_data_is_len_bytes_of_the_buffer_as_usb1_sends_it() -> None:
    words = np.arange(4, dtype=np.uint32)  # usb1 sends len(words) = 4 bytes, not 16
    for direction in (OUT, None):
        _, length, data, _ = check_bulk(0x02, words, 0, direction)
        assert length == 4 and bytes(data) == words.tobytes()[:4]
    _, length, data, _ = check_control(0x40, 0xF0, 0, 0, words, 0, OUT)
    assert length == 4 and data is not None and bytes(data) == words.tobytes()[:4]


def test_a_writable_buffer_is_used_in_place_and_a_read_only_one_copied_by_a_transfer() -> None:
    writable = bytearray(8)
    _, _, buffer, _ = check_bulk(0x81, writable, 0, None)
    buffer[:1] = b"\x01"
    assert writable[0] == 1
    frozen = memoryview(writable).toreadonly()
    _, _, copied, _ = check_bulk(0x81, frozen, 0, None)
    assert type(copied) is bytearray and copied == writable
    _, _, sent, _ = check_bulk(0x02, frozen, 0, OUT)  # a synchronous write sends it before returning: no copy
    assert sent.obj is writable  # type: ignore[union-attr]


_INTS = st.one_of(st.integers(-2, 0x1_0001), st.integers(-(1 << 33), 1 << 33))
_ODD = st.one_of(st.booleans(), st.floats(allow_nan=False), st.none(), st.text(max_size=2), st.binary(max_size=2))
_FIELD = st.one_of(_INTS, _INTS.map(np.int64), _ODD)


def _result(call: Any) -> tuple[str, Any]:
    try:
        return "ok", call()
    except Exception as error:  # the class is what the test compares
        return type(error).__name__, None


@settings(max_examples=300, deadline=None)
@given(
    request_type=_FIELD,
    request=_FIELD,
    value=_FIELD,
    index=_FIELD,
    length=st.one_of(_INTS, _ODD),
    timeout=_FIELD,
    direction=st.sampled_from([IN, OUT, None]),
)
def test_the_fast_path_equals_the_field_by_field_check(
    request_type: Any, request: Any, value: Any, index: Any, length: Any, timeout: Any, direction: int | None
) -> None:
    """Plain ints in range take the inline fast path; the same values as numpy integers take the per-field path."""

    def slow(field: Any) -> Any:
        return np.int64(field) if type(field) is int and abs(field) < 1 << 62 else field

    data = b"\x00" * (length % 64) if direction == OUT and type(length) is int else length
    fast = _result(lambda: check_control(request_type, request, value, index, data, timeout, direction))
    general = _result(
        lambda: check_control(
            slow(request_type), slow(request), slow(value), slow(index), data, slow(timeout), direction
        )
    )
    if fast[0] == "ok" and general[0] == "ok":
        (setup, wlength, payload, deadline), (setup2, wlength2, payload2, deadline2) = fast[1], general[1]
        assert (setup, wlength, deadline) == (setup2, wlength2, deadline2)
        assert all(type(field) is int for field in setup2), "the checked fields are plain ints"
        assert (payload is None) == (payload2 is None)
    else:
        assert fast[0] == general[0]
