"""The emulated usb1 handle: usb1's signatures, bytearray reads, usb1 exceptions, faults, the bad-input table."""

from __future__ import annotations

import inspect
import struct
from collections.abc import Callable
from typing import Any

import pytest
import usb1
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhil.emulators.faults import Fault, FaultPlan, Operation
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.errors import StateError
from tinyhil.mocks.usb import EmulatedBoard, EmulatedUsbDeviceHandle, open_emulated_board

HANDLE_METHODS = [
    "claimInterface",
    "releaseInterface",
    "setConfiguration",
    "setInterfaceAltSetting",
    "controlWrite",
    "controlRead",
    "bulkWrite",
    "bulkRead",
    "clearHalt",
    "resetDevice",
    "getTransfer",
    "getDevice",
    "getProduct",
    "getSerialNumber",
    "getManufacturer",
]


def shape(function: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    """Parameter names, kinds and defaults (usb1 has no annotations; ours do)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("name", HANDLE_METHODS)
def test_method_signatures_match_usb1(name: str) -> None:
    assert shape(getattr(EmulatedUsbDeviceHandle, name)) == shape(getattr(usb1.USBDeviceHandle, name))


def test_close_matches_the_bound_close_of_a_usb1_handle() -> None:
    # usb1 replaces ``close`` on each handle with a finalizer taking no arguments; the class attribute is an
    # internal static method. Ours is a plain method: bound, it takes no arguments either.
    assert shape(EmulatedUsbDeviceHandle.close) == [("self", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect._empty)]


def small_board(**options: Any) -> EmulatedBoard:
    return open_emulated_board(function=PlainEndpoint(vram_bytes=1 << 20), **options)


def cfg_read(handle: Any, bus: int, reg: int) -> tuple[int, int]:
    handle.controlWrite(0x40, 0xF0, 0x04 | int(bus > 0) | 0xF << 8, 0, struct.pack("<III", bus << 24 | reg, 0, 0))
    data = handle.controlRead(0xC0, 0xF0, 0, 0, 8)
    return struct.unpack_from("<I", data)[0], data[4] >> 5


def cfg_write(handle: Any, bus: int, reg: int, value: int, size: int) -> None:
    offset = reg & 3
    wvalue = 0x44 | int(bus > 0) | ((1 << size) - 1) << offset << 8
    packed = struct.pack("<III", bus << 24 | (reg & 0xFFC), 0, value << (8 * offset))
    handle.controlWrite(0x40, 0xF0, wvalue, 0, packed)
    assert handle.controlRead(0xC0, 0xF0, 0, 0, 8)[4] >> 5 == 0


def test_bring_up_through_raw_requests_reads_vendor_0x1002_at_bus_4() -> None:
    with small_board() as board:
        handle = board.handle
        handle.controlWrite(0x40, 0xF3, 1, 0, b"")
        assert cfg_read(handle, 4, 0)[1] == 0b001, "UR before the bridges are programmed"
        for bus in range(4):
            for reg, value, size in ((0x19, bus + 1, 1), (0x1A, 4, 1), (0x04, 0x7, 2)):
                cfg_write(handle, bus, reg, value, size)
        assert cfg_read(handle, 4, 0) == (0x744C_1002, 0)


def test_reads_return_bytearray_and_writes_return_counts() -> None:
    with small_board() as board:
        handle = board.handle
        assert handle.controlWrite(0x40, 0xE5, 0x100, 0x7F, b"") == 0
        data = handle.controlRead(0xC0, 0xE4, 0x100, 0, 4)
        assert type(data) is bytearray and data == b"\x7f\x00\x00\x00"
        handle.controlWrite(0x40, 0xF2, 2 | 0x8000, 1 << 8, b"")
        board.bridge.engine.released = True  # what the GPU's completion-queue write does
        read = handle.bulkRead(0x81, 1024)
        assert type(read) is bytearray and len(read) == 1024
        handle.controlWrite(0x40, 0xF2, 2, 1 << 8, b"")
        assert handle.bulkWrite(0x02, bytearray(1024)) == 1024


def test_an_arm_that_overruns_the_sram_stalls() -> None:
    with small_board() as board:
        with pytest.raises(usb1.USBErrorPipe) as info:
            board.handle.controlWrite(0x40, 0xF2, 33 * 32, 0 | 1 << 8, b"")
        assert any("0xF2 arm" in note for note in info.value.__notes__)
        with pytest.raises(usb1.USBErrorPipe):
            board.handle.controlWrite(0x40, 0xF2, 32, 31 | 2 << 8, b"")


def test_bulks_without_an_arm_or_of_the_wrong_size_time_out() -> None:
    with small_board() as board:
        handle = board.handle
        with pytest.raises(usb1.USBErrorTimeout) as info:
            handle.bulkWrite(0x02, b"\x00" * 512, timeout=50)
        assert info.value.transferred == 0
        assert board.kernel.now_ns >= 50_000_000, "the timeout passed in virtual time"
        handle.controlWrite(0x40, 0xF2, 2, 1 << 8, b"")
        with pytest.raises(usb1.USBErrorTimeout) as info:
            handle.bulkWrite(0x02, b"\x00" * 512, timeout=50)
        handle.controlWrite(0x40, 0xF2, 1 | 0x8000, 1 << 8, b"")
        with pytest.raises(usb1.USBErrorTimeout) as read_info:
            handle.bulkRead(0x81, 1024, timeout=50)
        assert read_info.value.received == bytearray() and read_info.value.transferred == 0


def test_a_tlp_to_an_unmapped_address_completes_with_ur() -> None:
    with small_board() as board:
        handle = board.handle
        handle.controlWrite(0x40, 0xF3, 1, 0, b"")
        handle.controlWrite(0x40, 0xF0, 0x20 | 0xF << 8, 0, struct.pack("<III", 0x1000_0000, 0x7, 0))
        completion = handle.controlRead(0xC0, 0xF0, 0, 0, 8)
        assert completion[4] >> 5 == 0b001 and completion[:4] == bytearray(4) and completion[7] == 0


def test_fault_plan_stalls_the_nth_bulk_write_and_clear_halt_recovers() -> None:
    plan = FaultPlan.single(Operation.bulk_out(), 3, Fault.stall())
    with small_board(faults=plan) as board:
        handle = board.handle
        for n in range(1, 6):
            handle.controlWrite(0x40, 0xF2, 1, n << 0 | 1 << 8, b"")
            if n == 3:
                with pytest.raises(usb1.USBErrorPipe):
                    handle.bulkWrite(0x02, bytes([n]) * 512)
                with pytest.raises(usb1.USBErrorPipe):  # the endpoint stays halted
                    handle.bulkWrite(0x02, bytes([n]) * 512)
                handle.clearHalt(0x02)
                handle.controlWrite(0x40, 0xF2, 1, n | 1 << 8, b"")
            assert handle.bulkWrite(0x02, bytes([n]) * 512) == 512
            assert board.bridge.read_sram(n * 0x4000, 512) == bytes([n]) * 512


def test_fault_plan_timeout_with_partial_transfer_sets_transferred_and_received() -> None:
    plan = FaultPlan(
        (
            *FaultPlan.single(Operation.bulk_out(), 1, Fault.timeout(partial_bytes=1024)).rules,
            *FaultPlan.single(Operation.bulk_in(), 1, Fault.timeout(partial_bytes=512)).rules,
        )
    )
    with small_board(faults=plan) as board:
        handle = board.handle
        handle.controlWrite(0x40, 0xF2, 4, 1 << 8, b"")
        with pytest.raises(usb1.USBErrorTimeout) as info:
            handle.bulkWrite(0x02, b"\x01" * 2048, timeout=10)
        assert info.value.transferred == 1024
        handle.controlWrite(0x40, 0xF2, 2 | 0x8000, 1 << 8, b"")
        board.bridge.engine.released = True
        with pytest.raises(usb1.USBErrorTimeout) as read_info:
            handle.bulkRead(0x81, 1024, timeout=10)
        assert read_info.value.received == bytearray(b"\x01" * 512) and read_info.value.transferred == 512


def test_device_gone_raises_no_device_thereafter() -> None:
    with small_board(faults=FaultPlan.single(Operation.control_out(0xE5), 2, Fault.no_device())) as board:
        handle = board.handle
        handle.controlWrite(0x40, 0xE5, 0, 1, b"")
        for call in (
            lambda: handle.controlWrite(0x40, 0xE5, 0, 1, b""),
            lambda: handle.controlRead(0xC0, 0xE4, 0, 0, 1),
            lambda: handle.bulkWrite(0x02, b"\x00" * 4),
            lambda: handle.resetDevice(),
            lambda: board.device.open(),
        ):
            with pytest.raises(usb1.USBErrorNoDevice):
                call()


def test_claim_release_configuration_and_alt_setting() -> None:
    with small_board(claim=False) as board:
        handle = board.handle
        with pytest.raises(usb1.USBErrorNotFound):
            handle.setInterfaceAltSetting(0, 0)  # not claimed, as in libusb
        with handle.claimInterface(0):
            handle.setConfiguration(1)
            handle.setInterfaceAltSetting(0, 0)
        with pytest.raises(usb1.USBErrorNotFound):
            handle.releaseInterface(0)
        assert handle.getDevice() is board.device
        assert handle.getProduct().startswith("custom") and handle.getSerialNumber() == board.bridge.serial
        assert handle.getManufacturer() == "tinyhil"


def test_reset_device_drops_arms_and_halts() -> None:
    with small_board() as board:
        handle = board.handle
        handle.controlWrite(0x40, 0xF2, 1, 0, b"")
        handle.resetDevice()
        with pytest.raises(usb1.USBErrorTimeout):
            handle.bulkWrite(0x02, b"\x00" * 512, timeout=1)


BAD_INPUTS: list[tuple[str, Callable[[Any], Any], type[BaseException]]] = [
    ("controlRead negative length", lambda h: h.controlRead(0xC0, 0xE4, 0, 0, -1), ValueError),
    ("controlRead wLength > 0xffff", lambda h: h.controlRead(0xC0, 0xE4, 0, 0, 0x10000), usb1.USBErrorInvalidParam),
    ("controlWrite wValue > 0xffff", lambda h: h.controlWrite(0x40, 0xE5, 0x10000, 0, b""), usb1.USBErrorInvalidParam),
    ("controlWrite wIndex < 0", lambda h: h.controlWrite(0x40, 0xE5, 0, -1, b""), usb1.USBErrorInvalidParam),
    ("controlWrite bRequest > 0xff", lambda h: h.controlWrite(0x40, 0x1E5, 0, 0, b""), usb1.USBErrorInvalidParam),
    ("controlWrite data is an int", lambda h: h.controlWrite(0x40, 0xE5, 0, 0, 5), TypeError),
    ("controlWrite data is a str", lambda h: h.controlWrite(0x40, 0xF0, 0, 0, "abc"), TypeError),
    ("controlWrite negative timeout", lambda h: h.controlWrite(0x40, 0xE5, 0, 0, b"", -1), usb1.USBErrorInvalidParam),
    ("bulkWrite to the IN endpoint number", lambda h: h.bulkWrite(0x01, b"\x00"), usb1.USBErrorIO),
    ("bulkWrite data is an int", lambda h: h.bulkWrite(0x02, 512), TypeError),
    ("bulkRead from endpoint 0x83", lambda h: h.bulkRead(0x83, 512), usb1.USBErrorIO),
    ("bulkRead negative length", lambda h: h.bulkRead(0x81, -1), ValueError),
    ("clearHalt endpoint 0x100", lambda h: h.clearHalt(0x100), usb1.USBErrorInvalidParam),
    ("clearHalt unknown endpoint", lambda h: h.clearHalt(0x05), usb1.USBErrorPipe),
    ("claimInterface 1", lambda h: h.claimInterface(1), usb1.USBErrorNotFound),
    ("setConfiguration 2", lambda h: h.setConfiguration(2), usb1.USBErrorNotFound),
    ("setInterfaceAltSetting alt 1", lambda h: h.setInterfaceAltSetting(0, 1), usb1.USBErrorNotFound),
    ("getTransfer iso_packets < 0", lambda h: h.getTransfer(-1), ValueError),
    ("getTransfer iso_packets > 0", lambda h: h.getTransfer(4), NotImplementedError),
    ("unknown vendor request", lambda h: h.controlWrite(0x40, 0x77, 0, 0, b""), usb1.USBErrorPipe),
    ("0xE4 longer than 512", lambda h: h.controlRead(0xC0, 0xE4, 0, 0, 513), usb1.USBErrorPipe),
]


@pytest.mark.parametrize(("what", "call", "error"), BAD_INPUTS, ids=[row[0] for row in BAD_INPUTS])
def test_bad_inputs_raise_typed_errors_and_change_nothing(what: str, call: Callable[[Any], Any], error: type) -> None:
    with small_board() as board:
        before = board.bridge.state_digest()
        with pytest.raises(error):
            call(board.handle)
        assert board.bridge.state_digest() == before, what


def test_a_closed_handle_raises_a_state_error_naming_the_method() -> None:
    board = small_board()
    board.handle.close()
    with pytest.raises(StateError, match=r"EmulatedUsbDeviceHandle\.bulkWrite\(\) called, but it is closed"):
        board.handle.bulkWrite(0x02, b"\x00")


@settings(max_examples=150)
@given(
    request=st.one_of(st.sampled_from([0xE4, 0xE5, 0xF0, 0xF2, 0xF3]), st.integers(0, 0xFF)),
    value=st.integers(0, 0xFFFF),
    index=st.integers(0, 0xFFFF),
    data=st.binary(max_size=16),
    length=st.integers(0, 600),
    direction_in=st.booleans(),
)
def test_random_vendor_requests_raise_only_usb1_errors_and_rejections_change_nothing(
    request: int, value: int, index: int, data: bytes, length: int, direction_in: bool
) -> None:
    board = small_board()
    board.handle.controlWrite(0x40, 0xF3, 1, 0, b"")
    before = board.bridge.state_digest()
    try:
        if direction_in:
            result = board.handle.controlRead(0xC0, request, value, index, length, timeout=100)
            assert type(result) is bytearray and len(result) <= length
        else:
            board.handle.controlWrite(0x40, request, value, index, data, timeout=100)
    except usb1.USBError:
        assert board.bridge.state_digest() == before
