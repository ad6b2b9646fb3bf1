"""One rule, every path: ``Usb3Transport`` over a strict MockUSB3 rejects a bad request alike through its synchronous
and its asynchronous call (same exception class, same message but for the call's name, nothing sent), but for the
size of a control data stage, where the mirrored USB3 class's two paths differ too; spec ``IntEnum`` members go
through the fast path like the ints they are; and the one open-state guard refuses every guarded method of a closed
transport and of a closed emulated handle with the same error."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tinyhil.errors import InvalidArgument, StateError
from tinyhil.mocks import MockUSB3
from tinyhil.mocks.usb import handle as emulated_handle
from tinyhil.mocks.usb import transfer as emulated_transfer
from tinyhil.mocks.usb.handle import EmulatedUsbDeviceHandle
from tinyhil.mocks.usb.request_checks import check_control
from tinyhil.spec.asm2464 import Request, TlpMode
from tinyhil.usb import MAX_TIMEOUT_MS, Usb3Transport

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from callcount import count_calls  # the benchmark's own profiler hook

Call = Callable[[Usb3Transport], object]

# Each row: what is wrong, the synchronous call, the asynchronous call of the same request.
PAIRS: list[tuple[str, Call, Call]] = [
    ("request past 8 bits", lambda t: t.control_write(0x100), lambda t: t.control_write_async(0x100)),
    ("request negative", lambda t: t.control_write(-1), lambda t: t.control_write_async(-1)),
    ("request a bool", lambda t: t.control_write(True), lambda t: t.control_write_async(True)),
    ("request a float", lambda t: t.control_read(228.0, 4), lambda t: t.control_read_async(228.0, 4)),
    ("value past 16 bits", lambda t: t.control_write(0xF0, 0x10000), lambda t: t.control_write_async(0xF0, 0x10000)),
    ("value a bool", lambda t: t.control_read(0xE4, 4, False), lambda t: t.control_read_async(0xE4, 4, False)),
    (
        "index past 16 bits",
        lambda t: t.control_write(0xF0, 0, 0x10000),
        lambda t: t.control_write_async(0xF0, 0, 1 << 16),
    ),
    ("index a float", lambda t: t.control_read(0xE4, 4, 0, 1.0), lambda t: t.control_read_async(0xE4, 4, 0, 1.0)),
    ("data a str", lambda t: t.control_write(0xF0, 0, 0, "ab"), lambda t: t.control_write_async(0xF0, 0, 0, "ab")),
    ("data an int", lambda t: t.control_write(0xF0, 0, 0, 5), lambda t: t.control_write_async(0xF0, 0, 0, 5)),
    ("length 0", lambda t: t.control_read(0xE4, 0), lambda t: t.control_read_async(0xE4, 0)),
    ("length past wLength", lambda t: t.control_read(0xE4, 1 << 16), lambda t: t.control_read_async(0xE4, 1 << 16)),
    ("length negative", lambda t: t.control_read(0xE4, -1), lambda t: t.control_read_async(0xE4, -1)),
    ("length a float", lambda t: t.control_read(0xE4, 1.5), lambda t: t.control_read_async(0xE4, 1.5)),
    ("control timeout 0", lambda t: t.control_write(0xF0, timeout=0), lambda t: t.control_write_async(0xF0, timeout=0)),
    (
        "control timeout past the cap",
        lambda t: t.control_read(0xE4, 4, timeout=MAX_TIMEOUT_MS + 1),
        lambda t: t.control_read_async(0xE4, 4, timeout=MAX_TIMEOUT_MS + 1),
    ),
    (
        "control timeout a bool",
        lambda t: t.control_write(0xF0, timeout=True),
        lambda t: t.control_write_async(0xF0, timeout=True),
    ),
    ("payload empty", lambda t: t.bulk_write(b""), lambda t: t.bulk_write_async(b"")),
    ("payload a str", lambda t: t.bulk_write("ab"), lambda t: t.bulk_write_async("ab")),
    (
        "payload non-contiguous",
        lambda t: t.bulk_write(np.zeros((4, 4), np.uint8)[:, ::2]),
        lambda t: t.bulk_write_async(np.zeros((4, 4), np.uint8)[:, ::2]),
    ),
    ("bulk OUT timeout negative", lambda t: t.bulk_write(b"x", -5), lambda t: t.bulk_write_async(b"x", -5)),
    ("bulk OUT timeout a float", lambda t: t.bulk_write(b"x", 1.5), lambda t: t.bulk_write_async(b"x", 1.5)),
    (
        "bulk IN timeout past 32 bits",
        lambda t: t.bulk_read(512, 1 << 32),
        lambda t: t.bulk_read_into(bytearray(512), 1 << 32),
    ),
    ("bulk IN timeout 0", lambda t: t.bulk_read(512, 0), lambda t: t.bulk_read_into(bytearray(512), 0)),
]


@pytest.fixture
def usb() -> Iterator[MockUSB3]:
    with MockUSB3(strict=True) as opened:  # zero lengths and timeout 0 are refused in strict mode only
        yield opened


def _raised(call: Call, usb: MockUSB3) -> tuple[type[BaseException], str]:
    before = usb.bridge.state_digest()
    with pytest.raises(InvalidArgument) as raised:
        call(usb)
    assert usb.in_flight == () and usb.bridge.state_digest() == before, "a refused request sent nothing"
    return type(raised.value), re.sub(r"^[a-z_]+\(", "(", str(raised.value))  # the message, less the call's name


def test_a_control_data_stage_is_capped_at_0x1000_bytes_sync_and_at_wlength_async(usb: MockUSB3) -> None:
    assert "expected at most 0x1000 bytes" in _raised(lambda t: t.control_write(0xF0, 0, 0, bytes(0x1001)), usb)[1]
    assert (
        "expected at most 0xffff bytes (wLength)"
        in _raised(lambda t: t.control_write_async(0xF0, 0, 0, bytes(1 << 16)), usb)[1]
    )


@pytest.mark.parametrize(("what", "sync", "asynchronous"), PAIRS, ids=[row[0] for row in PAIRS])
def test_a_bad_request_fails_alike_through_the_sync_and_the_async_call(
    usb: MockUSB3, what: str, sync: Call, asynchronous: Call
) -> None:
    assert _raised(sync, usb) == _raised(asynchronous, usb), what


def test_an_intenum_request_takes_the_fast_path_and_reaches_the_handle_as_an_int(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Request.XDATA_WRITE`` (an IntEnum) writes what ``0xE5`` writes and reaches the emulated stack, synchronous
    call and transfer alike, as a plain int."""
    seen: list[tuple[type, ...]] = []

    def recording(request_type: Any, request: Any, value: Any, index: Any, *rest: Any) -> Any:
        seen.append((type(request), type(value), type(index)))
        return check_control(request_type, request, value, index, *rest)

    monkeypatch.setattr(emulated_handle, "check_control", recording)
    monkeypatch.setattr(emulated_transfer, "check_control", recording)
    results = []
    for request in (Request.XDATA_WRITE, int(Request.XDATA_WRITE)):
        with MockUSB3() as usb:
            seen.clear()  # the handle's own SET_CONFIGURATION on opening
            usb.control_write(request, 0x5000, 0xAB)
            usb.control_write_async(request, 0x5001, 0xCD)
            usb.wait_all()
            results.append((bytes(usb.control_read(Request.XDATA_READ, 2, 0x5000)), list(seen)))
    assert results[0] == results[1] == (b"\xab\xcd", [(int, int, int)] * 3)


def test_an_intenum_costs_the_same_python_calls_as_the_int() -> None:
    with MockUSB3() as usb:
        usb.control_write(Request.PCIE_POWER, 1, TlpMode.SINGLE)  # warm: first-call caches
        enum_calls = count_calls(lambda: usb.control_write(Request.PCIE_POWER, 1, TlpMode.SINGLE))
        int_calls = count_calls(lambda: usb.control_write(int(Request.PCIE_POWER), 1, int(TlpMode.SINGLE)))
    assert enum_calls[0] == int_calls[0]


TRANSPORT_GUARDED = {
    "bulk_read",
    "bulk_read_into",
    "bulk_wait",
    "bulk_write",
    "bulk_write_async",
    "clear_halt",
    "control_read",
    "control_read_async",
    "control_write",
    "control_write_async",
    "pause",
    "reset_device",
    "send_batch",
    "wait_all",
}
HANDLE_GUARDED = {
    "bulkRead",
    "bulkWrite",
    "claimInterface",
    "clearHalt",
    "controlRead",
    "controlWrite",
    "getConfiguration",
    "getTransfer",
    "releaseInterface",
    "resetDevice",
    "setConfiguration",
    "setInterfaceAltSetting",
    "submit_transfer",
}


def _guarded(cls: type) -> set[str]:
    return {name for name, member in vars(cls).items() if callable(member) and hasattr(member, "__wrapped__")}


def test_every_operation_needing_it_open_carries_the_one_guard() -> None:
    assert _guarded(Usb3Transport) == TRANSPORT_GUARDED
    assert _guarded(EmulatedUsbDeviceHandle) == HANDLE_GUARDED


@pytest.mark.parametrize("name", sorted(TRANSPORT_GUARDED | HANDLE_GUARDED))
def test_the_guard_refuses_a_closed_transport_and_a_closed_handle_with_the_same_error(name: str) -> None:
    usb = MockUSB3()
    handle = usb._handle
    usb.close()  # closes the handle too
    target: Any = usb if name in TRANSPORT_GUARDED else handle
    with pytest.raises(StateError) as raised:
        getattr(target, name)()  # the guard runs before the arguments are looked at
    assert str(raised.value) == f"{type(target).__name__}.{name}() called, but it is closed"


def test_a_transfer_on_a_closed_handle_is_refused_by_the_handle_guard() -> None:
    with MockUSB3() as usb:
        handle = usb._handle
        transfer = handle.getTransfer()
        transfer.setBulk(0x02, b"\x00" * 512, timeout=100)
    with pytest.raises(StateError, match=r"EmulatedUsbDeviceHandle\.submit_transfer\(\) called, but it is closed"):
        transfer.submit()
    assert not handle._inflight and not transfer.isSubmitted()
