"""Fuzzing the emulated usb1 stack (issue 14, "Fuzzing in the project"): short sequences of control and bulk requests
with random fields (request types, the vendor requests 0xE4/0xE5/0xF0/0xF2/0xF3, standard and unknown ones,
values, indexes, lengths and data in and out of range and of the wrong types, timeouts up to and past the 2-hour
virtual wait cap) under random fault plans, through the synchronous calls and the asynchronous transfers, in both
transfer modes, over a fresh MockUSB3 per example.

Each request must end in success or in what usb1 raises (a ``usb1.USBError``; ``TypeError`` / ``ValueError`` only for
the wrongly typed or negative arguments usb1 itself refuses so); a request with a bad field never succeeds; no
transfer is left in flight once its call has returned or raised; a rejected request (refused by the validator, or
answered with a stall or an empty timeout that no fault caused) leaves the state digest unchanged, and one refused up
front takes no virtual time; afterwards, faults off, a valid scsi_write lands the right bytes. Hangs are bounded
structurally: every timeout is at most the virtual wait cap, and the asynchronous path pumps the clock once for at
most that long and then requires the transfer to be done. ``max_examples`` comes from the profile
(``HYPOTHESIS_PROFILE=nightly`` runs 50 times more).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pytest
import usb1
from hypothesis import given
from hypothesis import strategies as st
from support.boards import recover_and_write

from tinyhil.emulators.asm2464 import WAIT_CAP_NS, Asm2464
from tinyhil.emulators.faults import FaultPlan, Operation
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.fixtures.strategies import fault_plans
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.asm2464 import BULK_IN_EP, BULK_OUT_EP, MAX_TIMEOUT_MS, SECTOR_BYTES

pytestmark = pytest.mark.fuzz

WAIT_CAP_S: Final = WAIT_CAP_NS // 1_000_000_000
DIR_IN: Final = 0x80
U8, U16 = 0xFF, 0xFFFF
OK, RANGE, TYPE, NEGATIVE, NO_ENDPOINT = "ok", "range", "type", "negative", "no-endpoint"
_ODD_TYPES: Final = [None, 1.5, 2.0, float("nan"), "1", b"\x01", [1], object()]


@dataclass(frozen=True)
class Field:
    """A drawn argument and what usb1 makes of it: ``ok``, or the reason it must be refused."""

    value: Any
    kind: str


# --- well-formed requests: the bridge's vendor requests with plausible fields, standard and unknown requests ---
_ADDRS: Final = st.one_of(st.sampled_from([0x5000, 0x8000, 0xA800, 0xB450, 0xFFFF]), st.integers(0, U16))
_TIMEOUTS: Final = st.one_of(st.sampled_from([0, 1, 5, 100, 1000, MAX_TIMEOUT_MS]), st.integers(0, MAX_TIMEOUT_MS))
_SECTORS: Final = st.one_of(st.sampled_from([1, 2, 512, 1024]), st.integers(0, 1100))


@st.composite
def _arms(draw: st.DrawFn) -> tuple[int, int]:
    """0xF2 wValue (sectors, bit 15 device to host) and wIndex (start slot, slot count << 8), mostly valid."""
    sectors, start, count = draw(_SECTORS), draw(st.integers(0, 33)), draw(st.integers(0, 33))
    return sectors | (DIR_IN << 8 if draw(st.booleans()) else 0), start | count << 8


@st.composite
def _tlps(draw: st.DrawFn) -> tuple[int, int, bytes]:
    """0xF0 OUT: wValue (fmt/type, byte enables << 8), wIndex (mode) and the 12-byte request (address, dwords)."""
    fmt_type = draw(
        st.one_of(st.sampled_from([0x00, 0x20, 0x40, 0x60, 0x04, 0x44, 0x05, 0x45, 0x30]), st.integers(0, U8))
    )
    enables = draw(st.one_of(st.just(0xF), st.integers(0, 0xF)))
    address = draw(
        st.one_of(st.sampled_from([0, 0x200000, 0x820000, 0xE000_0000, 0x8_0000_0000]), st.integers(0, 1 << 40))
    )
    word = draw(st.one_of(st.integers(0, 4), st.integers(0, 0xFFFF_FFFF)))
    return (
        fmt_type | enables << 8,
        draw(st.integers(0, 3)),
        struct.pack("<III", address & 0xFFFF_FFFF, address >> 32, word),
    )


@st.composite
def _control_fields(draw: st.DrawFn, direction_in: bool) -> dict[str, Any]:
    """request_type, request, value, index, data_or_length and timeout of a control request, all valid fields."""
    timeout = draw(_TIMEOUTS)
    request_type = 0xC0 if direction_in else 0x40
    if direction_in:
        shape = draw(st.sampled_from(["xdata", "completion", "standard", "raw"]))
        if shape == "xdata":
            request, value, index, payload = (
                0xE4,
                draw(_ADDRS),
                draw(st.sampled_from([0, 0, 1])),
                draw(st.integers(0, 520)),
            )
        elif shape == "completion":
            request, value, index, payload = 0xF0, 0, 0, draw(st.sampled_from([8, 8, 4, 0, 16]))
        elif shape == "standard":
            request_type = draw(st.sampled_from([0x80, 0x81, 0x82]))
            request, value, index = draw(st.sampled_from([0x00, 0x08, 0x06])), 0, draw(st.sampled_from([0, 0x81, 0x02]))
            payload = draw(st.sampled_from([1, 2, 18]))
        else:
            request_type, request = draw(st.integers(0, U8)), draw(st.integers(0, U8))
            value, index, payload = draw(st.integers(0, U16)), draw(st.integers(0, U16)), draw(st.integers(0, 2048))
    else:
        shape = draw(st.sampled_from(["xdata", "arm", "tlp", "power", "standard", "raw"]))
        payload = b""
        if shape == "xdata":
            request, value, index = 0xE5, draw(_ADDRS), draw(st.integers(0, 0x1FF))
        elif shape == "arm":
            request, (value, index) = 0xF2, draw(_arms())
        elif shape == "tlp":
            request, (value, index, payload) = 0xF0, draw(_tlps())
        elif shape == "power":
            request, value, index = 0xF3, draw(st.sampled_from([0, 1, 2])), 0
        elif shape == "standard":
            request_type, request = draw(st.sampled_from([(0x00, 0x09), (0x01, 0x0B), (0x02, 0x01), (0x00, 0x03)]))
            value, index = draw(st.sampled_from([0, 1])), draw(st.sampled_from([0, 0x02, 0x81]))
        else:
            request_type, request = draw(st.integers(0, U8)), draw(st.integers(0, U8))
            value, index, payload = draw(st.integers(0, U16)), draw(st.integers(0, U16)), draw(st.binary(max_size=64))
        payload = draw(st.sampled_from([bytes, bytearray, memoryview, list]))(payload)  # what usb1 takes as data
    return {
        "request_type": request_type,
        "request": request,
        "value": value,
        "index": index,
        "data_or_length": payload,
        "timeout": timeout,
    }


@st.composite
def _bulk_fields(draw: st.DrawFn, direction_in: bool) -> dict[str, Any]:
    size = draw(st.one_of(st.integers(0, 4).map(lambda n: n * SECTOR_BYTES), st.integers(0, 2100)))
    payload: Any = size if direction_in else draw(st.sampled_from([bytes, bytearray, memoryview]))(b"\x5a" * size)
    return {
        "endpoint": BULK_IN_EP if direction_in else BULK_OUT_EP,
        "data_or_length": payload,
        "timeout": draw(_TIMEOUTS),
    }


# --- what a field may be instead: out of range, of the wrong type, negative, no such endpoint ---
def _bad_ints(limit: int) -> st.SearchStrategy[Field]:
    return st.one_of(
        st.one_of(st.integers(limit + 1, limit + 3), st.integers(-3, -1), st.integers(1 << 32, 1 << 70)).map(
            lambda v: Field(v, RANGE)
        ),
        st.sampled_from(_ODD_TYPES).map(lambda v: Field(v, TYPE)),
    )


_BAD_TIMEOUTS: Final = st.one_of(
    st.sampled_from([MAX_TIMEOUT_MS + 1, 3 * 3600 * 1000, 0xFFFF_FFFF, 1 << 32, 1 << 64, -1]).map(
        lambda v: Field(v, RANGE)
    ),
    st.sampled_from([None, 1.5, "100", float("nan"), float("inf")]).map(lambda v: Field(v, TYPE)),
)


def _bad_payloads(*, control: bool, direction_in: bool, sync: bool) -> st.SearchStrategy[Field]:
    if direction_in:
        bad = [Field(-1, NEGATIVE), Field(-512, NEGATIVE), Field(None, TYPE), Field(1.5, TYPE), Field("4", TYPE)]
        if sync:  # a synchronous read takes a length; a transfer would fill the buffer
            bad.append(Field(b"\x00" * 4, TYPE))
    else:
        bad = [Field(None, TYPE), Field("abc", TYPE), Field([1.5], TYPE), Field(object(), TYPE)]
        if sync:  # a synchronous write sends data; a transfer would take an int as a length
            bad.append(Field(5, TYPE))
    if control:
        bad.append(Field(0x10000 if direction_in else bytes(0x10000), RANGE))  # past wLength
    return st.sampled_from(bad)


def _bad_endpoints(direction_in: bool) -> st.SearchStrategy[Field]:
    mine = BULK_IN_EP if direction_in else BULK_OUT_EP
    # the direction bit is forced (by the call, or by _with_direction): only another endpoint number is no endpoint
    others = [ep for ep in (0x00, 0x01, 0x02, 0x03, 0x81, 0x82, 0x83) if ep & ~DIR_IN != mine & ~DIR_IN]
    return st.one_of(
        st.sampled_from(others).map(lambda v: Field(v, NO_ENDPOINT)),
        st.sampled_from([0x102, 0x181, -2]).map(lambda v: Field(v, RANGE)),
        st.sampled_from([2.0, None, "2"]).map(lambda v: Field(v, TYPE)),
    )


@dataclass(frozen=True)
class UsbRequest:
    """One request: ``control`` or ``bulk``, IN or OUT, through the synchronous call or a transfer."""

    kind: str
    direction_in: bool
    sync: bool
    fields: tuple[tuple[str, Field], ...]

    def value(self, name: str) -> Any:
        return dict(self.fields)[name].value

    @property
    def refusals(self) -> set[str]:
        return {field.kind for _, field in self.fields} - {OK}


@st.composite
def usb_requests(draw: st.DrawFn) -> UsbRequest:
    """Half the requests are well formed; the others have one or two fields that usb1 or the device must refuse."""
    kind = draw(st.sampled_from(["control", "bulk"]))
    direction_in, sync = draw(st.booleans()), draw(st.booleans())
    control = kind == "control"
    values = draw(_control_fields(direction_in) if control else _bulk_fields(direction_in))
    fields = {
        # an integer field is anything with __index__ to ctypes: numpy integers take the per-field path (a length is
        # an int only: usb1 sizes its buffer with isinstance(length, int))
        name: Field(np.int64(value) if name != "data_or_length" and draw(st.integers(0, 7)) == 0 else value, OK)
        for name, value in values.items()
    }
    bad = {
        "request_type": _bad_ints(U8),
        "request": _bad_ints(U8),
        "value": _bad_ints(U16),
        "index": _bad_ints(U16),
        "endpoint": _bad_endpoints(direction_in),
        "data_or_length": _bad_payloads(control=control, direction_in=direction_in, sync=sync),
        "timeout": _BAD_TIMEOUTS,
    }
    # the timeout first: hypothesis draws (and shrinks toward) the first of a sampled_from most often
    names = sorted(fields, key=lambda name: (name != "timeout", name))
    spoilt = draw(st.one_of(st.just([]), st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True)))
    for name in spoilt:
        fields[name] = draw(bad[name])
    return UsbRequest(kind, direction_in, sync, tuple(fields.items()))


@st.composite
def armed_bulks(draw: st.DrawFn) -> list[UsbRequest]:
    """A valid 0xF2 arm of a few sectors and then a bulk in its direction, often of its size (so they pair)."""
    sectors, start = draw(st.integers(1, 4)), draw(st.integers(0, 31))
    direction_in = draw(st.booleans())
    arm = {
        "request_type": 0x40,
        "request": 0xF2,
        "value": sectors | (DIR_IN << 8 if direction_in else 0),
        "index": start | 1 << 8,
        "data_or_length": b"",
        "timeout": 1000,
    }
    size = draw(st.one_of(st.just(sectors * SECTOR_BYTES), st.integers(1, 4).map(lambda n: n * SECTOR_BYTES)))
    bulk = {
        "endpoint": BULK_IN_EP if direction_in else BULK_OUT_EP,
        "data_or_length": size if direction_in else bytes(range(256)) * (size // 256),
        "timeout": draw(_TIMEOUTS),
    }
    return [
        UsbRequest("control", False, draw(st.booleans()), tuple((n, Field(v, OK)) for n, v in arm.items())),
        UsbRequest("bulk", direction_in, draw(st.booleans()), tuple((n, Field(v, OK)) for n, v in bulk.items())),
    ]


def _with_direction(field: Any, direction_in: bool) -> Any:
    """An integer field with bit 7 set as the direction has it (what the synchronous calls do themselves)."""
    if isinstance(field, (int, np.integer)) and not isinstance(field, bool):
        return field & ~DIR_IN | (DIR_IN if direction_in else 0)
    return field


_STATUS_ERRORS: Final = {
    usb1.TRANSFER_TIMED_OUT: usb1.USBErrorTimeout,
    usb1.TRANSFER_STALL: usb1.USBErrorPipe,
    usb1.TRANSFER_NO_DEVICE: usb1.USBErrorNoDevice,
    usb1.TRANSFER_OVERFLOW: usb1.USBErrorOverflow,
}


def _run(usb: MockUSB3, r: UsbRequest) -> int:
    """Send ``r``; returns the bytes it moved (raising what the call raised, or the error of its final status)."""
    handle, v = usb._handle, r.value
    args = [v(name) for name, _ in r.fields]
    if r.sync:
        method = {
            ("control", True): handle.controlRead,
            ("control", False): handle.controlWrite,
            ("bulk", True): handle.bulkRead,
            ("bulk", False): handle.bulkWrite,
        }[(r.kind, r.direction_in)]
        result = method(*args)
        if r.direction_in:
            assert type(result) is bytearray and len(result) <= v("data_or_length")
            return len(result)
        assert result <= len(v("data_or_length"))
        return int(result)
    transfer = handle.getTransfer()
    if r.kind == "control":
        args[0] = _with_direction(args[0], r.direction_in)
        transfer.setControl(*args[:5], timeout=args[5])
    else:
        args[0] = _with_direction(args[0], r.direction_in)
        transfer.setBulk(args[0], args[1], timeout=args[2])
    transfer.submit()
    usb.context.handleEventsTimeout(WAIT_CAP_S)  # every timeout is within the cap: it is done by then
    assert not transfer.isSubmitted(), f"{r}: still in flight after {WAIT_CAP_S} s of virtual time"
    status, moved = transfer.getStatus(), transfer.getActualLength()
    assert status != usb1.TRANSFER_CANCELLED, f"{r}: cancelled, and nothing cancelled it"
    if status != usb1.TRANSFER_COMPLETED:
        error = _STATUS_ERRORS[status](status)
        error.transferred = moved
        raise error
    return int(moved)


def _faulted(usb: MockUSB3, counts_before: dict[Operation, int]) -> bool:
    """Whether the fault plan fired on an operation counted since ``counts_before``."""
    plan = usb.bridge.faults
    return any(
        plan.fault_for(operation, occurrence) is not None
        for operation, count in usb.bridge.front.counts.items()
        for occurrence in range(counts_before.get(operation, 0) + 1, count + 1)
    )


def _check_one(usb: MockUSB3, r: UsbRequest) -> None:
    bridge, front = usb.bridge, usb.bridge.front
    before, start_ns, counts = bridge.state_digest(), usb.kernel.now_ns, dict(front.counts)
    try:
        _run(usb, r)
    except usb1.USBError as exc:
        error: BaseException | None = exc
    except TypeError as exc:  # ctypes.ArgumentError too: usb1 refuses a wrongly typed argument so
        assert TYPE in r.refusals, f"{r}: {exc!r} for arguments of the right types"
        error = exc
    except ValueError as exc:
        assert type(exc) is ValueError and NEGATIVE in r.refusals, f"{r}: {exc!r}, expected a usb1 error"
        error = exc
    else:
        error = None
        assert not r.refusals, f"{r}: accepted, though its {r.refusals} fields must be refused"
    assert not front.busy and not any(front.queues.values()), f"{r}: left a transfer in flight"
    assert not usb._handle._inflight, f"{r}: the handle still counts a transfer in flight"
    if error is None:
        return
    up_front = not isinstance(error, usb1.USBError) or isinstance(error, (usb1.USBErrorInvalidParam, usb1.USBErrorIO))
    if r.refusals:
        assert up_front, f"{r}: a bad field reached the device ({error!r})"
    if up_front:
        assert bridge.state_digest() == before, f"{r}: refused ({error!r}) but the emulator changed"
        assert usb.kernel.now_ns == start_ns and front.counts == counts, f"{r}: refused after it went out"
        return
    rejected = isinstance(error, usb1.USBErrorPipe) or (
        isinstance(error, usb1.USBErrorTimeout) and not getattr(error, "transferred", 0)
    )
    if rejected and not _faulted(usb, counts):
        assert bridge.state_digest() == before, f"{r}: rejected by the device ({error!r}) but the emulator changed"


@given(
    requests=st.lists(st.one_of(usb_requests().map(lambda r: [r]), armed_bulks()), min_size=1, max_size=3).map(
        lambda groups: [r for group in groups for r in group]
    ),
    plan=fault_plans(max_occurrence=3),
    mode=st.sampled_from(["sync", "timed"]),
    seed=st.integers(0, 3),
)
def test_random_usb_requests_end_in_usb1_outcomes_and_rejections_change_nothing(
    requests: list[UsbRequest], plan: FaultPlan, mode: str, seed: int
) -> None:
    with MockUSB3.over(Asm2464(faults=plan, seed=seed, function=PlainEndpoint(vram_bytes=1 << 20)), mode=mode) as usb:
        for r in requests:
            _check_one(usb, r)
        recover_and_write(usb, seed)


@given(request=usb_requests(), mode=st.sampled_from(["sync", "timed"]))
def test_a_random_request_on_a_healthy_board_takes_no_fault_path(request: UsbRequest, mode: str) -> None:
    """No fault plan: the inline fast path runs, and every rejection must leave the digest as it was."""
    with MockUSB3.over(Asm2464(function=PlainEndpoint(vram_bytes=1 << 20)), mode=mode) as usb:
        _check_one(usb, request)
        recover_and_write(usb, 0)
