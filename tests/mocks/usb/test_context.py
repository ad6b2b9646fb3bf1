"""The emulated context: one device per board with independent state, lookup by VID:PID, one virtual clock,
the device objects' usb1 signatures, and the one-call board helper."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
import usb1

from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.emulators.kernel import EventKernel
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.mocks.usb import EmulatedUsbContext, EmulatedUsbDevice, TransferMode, open_emulated_board

DEVICE_METHODS = [
    "getVendorID",
    "getProductID",
    "getSerialNumber",
    "getProduct",
    "getManufacturer",
    "open",
    "getBusNumber",
    "getPortNumberList",
    "getDeviceSpeed",
    "getDeviceAddress",
]
CONTEXT_METHODS = [
    "getDeviceList",
    "getDeviceIterator",
    "openByVendorIDAndProductID",
    "getByVendorIDAndProductID",
    "handleEvents",
    "handleEventsTimeout",
    "close",
    "open",
    "__enter__",
    "__exit__",
]


def shape(function: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    params = inspect.signature(function).parameters.values()
    return [(p.name, p.kind, p.default) for p in params if p.kind is not p.VAR_POSITIONAL]


@pytest.mark.parametrize("name", DEVICE_METHODS)
def test_device_signatures_match_usb1(name: str) -> None:
    assert shape(getattr(EmulatedUsbDevice, name)) == shape(getattr(usb1.USBDevice, name))


@pytest.mark.parametrize("name", CONTEXT_METHODS)
def test_context_signatures_match_usb1(name: str) -> None:
    assert shape(getattr(EmulatedUsbContext, name)) == shape(getattr(usb1.USBContext, name))


def two_boards() -> tuple[Asm2464, Asm2464]:
    kernel = EventKernel()
    first = Asm2464(kernel=kernel, serial="A", function=PlainEndpoint(vram_bytes=1 << 20))
    second = Asm2464(kernel=kernel, serial="B", product_id=0x0001, vendor_id=0x3801)
    return first, second


def test_one_device_per_board_each_with_its_own_state() -> None:
    first, second = two_boards()
    with EmulatedUsbContext(first, second) as context:
        devices = context.getDeviceList()
        assert [d.getSerialNumber() for d in devices] == ["A", "B"]
        assert [(d.getVendorID(), d.getProductID()) for d in devices] == [(0xADD1, 1), (0x3801, 1)]
        assert len({d.getDeviceAddress() for d in devices}) == 2 and devices[0].getPortNumberList() == [1]
        assert devices[0].getDeviceSpeed() == usb1.SPEED_SUPER_PLUS and devices[0].getBusNumber() == 2
        handle_a, handle_b = devices[0].open(), devices[1].open()
        handle_a.controlWrite(0x40, 0xE5, 0x1234, 0xAA, b"")
        assert handle_a.controlRead(0xC0, 0xE4, 0x1234, 0, 1) == b"\xaa"
        assert handle_b.controlRead(0xC0, 0xE4, 0x1234, 0, 1) == b"\x00", "the other board did not change"
        assert first.state_digest() != second.state_digest()


def test_open_by_vid_pid_finds_only_matching_boards() -> None:
    first, second = two_boards()
    context = EmulatedUsbContext(first, second)
    assert context.openByVendorIDAndProductID(0x3801, 0x0001).getSerialNumber() == "B"
    assert context.openByVendorIDAndProductID(0x1234, 0x5678) is None
    assert [d.getSerialNumber() for d in context.getDeviceIterator()] == ["A", "B"]
    assert EmulatedUsbContext().getDeviceList() == []
    context.close()
    with pytest.raises(StateError, match="closed"):
        context.getDeviceList()


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: EmulatedUsbContext(Asm2464(), Asm2464()), "different EventKernels"),
        (lambda: EmulatedUsbContext(Asm2464(), mode="eager"), "expected one of"),
        (lambda: EmulatedUsbContext("board"), "expected an Asm2464"),  # type: ignore[arg-type]
        (lambda: EmulatedUsbContext(*[Asm2464()] * 2), "twice"),
        (lambda: EmulatedUsbContext(Asm2464()).handleEventsTimeout(-1), "seconds >= 0"),
        # beyond the 2-hour virtual wait cap (was an OverflowError for inf, a ValueError deep inside for NaN)
        (lambda: EmulatedUsbContext(Asm2464()).handleEventsTimeout(float("inf")), r"tv=inf, .* <= 7200"),
        (lambda: EmulatedUsbContext(Asm2464()).handleEventsTimeout(float("nan")), "tv=nan"),
        (lambda: EmulatedUsbContext(Asm2464()).handleEventsTimeout(7201), "tv=7201"),
    ],
)
def test_bad_context_arguments(build: Callable[[], Any], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        build()


def test_open_emulated_board_builds_a_fresh_claimed_board() -> None:
    with open_emulated_board(mode="timed", serial="X", function=PlainEndpoint(vram_bytes=1 << 20)) as board:
        assert board.context.mode is TransferMode.TIMED and board.bridge.serial == "X"
        assert board.device.bridge is board.bridge and board.kernel is board.bridge.kernel
        assert board.handle.controlRead(0xC0, 0xE4, 0xB450, 0, 1) == b"\x00"
    other = open_emulated_board(function=PlainEndpoint(vram_bytes=1 << 20))
    assert other.bridge is not board.bridge and other.kernel is not board.kernel


def test_a_gone_board_leaves_the_bus_until_it_is_power_cycled() -> None:
    from tinyhil.emulators.faults import Fault, FaultPlan, Operation

    kernel = EventKernel()
    gone = Asm2464(kernel=kernel, serial="A", faults=FaultPlan.single(Operation.control_in(0xE4), 1, Fault.no_device()))
    context = EmulatedUsbContext(gone, Asm2464(kernel=kernel, serial="B"))
    handle = context.getDeviceList()[0].open()
    with pytest.raises(usb1.USBErrorNoDevice):
        handle.controlRead(0xC0, 0xE4, 0, 0, 1)
    assert [d.getSerialNumber() for d in context.getDeviceList()] == ["B"]
    assert context.openByVendorIDAndProductID(0xADD1, 0x0001).getSerialNumber() == "B"
    gone.reset()
    assert [d.getSerialNumber() for d in context.getDeviceList()] == ["A", "B"]
    assert "serial='A' link=down" in repr(gone)
