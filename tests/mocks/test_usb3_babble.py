"""A babbling device on MockUSB3: the transport raises usb1's overflow error where libusb reports one, once, with no
retry, and the next transfer is healthy (docs/faults.md "Babble")."""

from __future__ import annotations

import pytest
import usb1

from tinyhil.emulators.faults import Fault, FaultPlan, Operation
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.asm2464 import Request, Xdata

_ARM_DEVICE_TO_HOST = 0x8000  # 0xF2 wValue bit 15 (docs/asm2464.md "Vendor requests")
_SECTORS = 2
_SECTOR_BYTES = 512
_XDATA_READ = Operation.control_in(int(Request.XDATA_READ))


def _arm_read(usb: MockUSB3) -> None:
    """Arm a read of the first two SRAM sectors and release it, as the GPU's completion-queue write does."""
    usb.control_write(Request.SRAM_ARM, value=_SECTORS | _ARM_DEVICE_TO_HOST, index=1 << 8)
    usb.bridge.engine.released = True


@pytest.mark.parametrize("mode", ["sync", "timed"])
def test_a_babbling_control_read_raises_overflow_once(mode: str) -> None:
    with MockUSB3(faults=FaultPlan.single(_XDATA_READ, 1, Fault.babble()), mode=mode) as usb:
        usb.bridge.write_xdata(Xdata.SRAM_WINDOW, b"\x11\x22\x33\x44")
        with pytest.raises(usb1.USBErrorOverflow) as info:
            usb.control_read(Request.XDATA_READ, 4, value=Xdata.SRAM_WINDOW)
        assert any("sent more than 0x4 bytes" in note for note in info.value.__notes__)
        assert usb.bridge.front.counts[_XDATA_READ] == 1  # the transport did not retry it
        assert usb.control_read(Request.XDATA_READ, 4, value=Xdata.SRAM_WINDOW) == b"\x11\x22\x33\x44"


@pytest.mark.parametrize("mode", ["sync", "timed"])
def test_a_babbling_bulk_read_raises_overflow_and_the_next_read_is_healthy(mode: str) -> None:
    plan = FaultPlan.single(Operation.bulk_in(), 1, Fault.babble())
    with MockUSB3(faults=plan, mode=mode) as usb:
        sram = bytes(range(256)) * 4
        usb.bridge.write_sram(0, sram)
        _arm_read(usb)
        with pytest.raises(usb1.USBErrorOverflow):
            usb.bulk_read(_SECTORS * _SECTOR_BYTES)
        assert usb.bridge.front.counts[Operation.bulk_in()] == 1
        assert not usb.bridge.front.halted  # the host controller recovers its endpoint itself: no clearHalt needed
        _arm_read(usb)
        assert usb.bulk_read(_SECTORS * _SECTOR_BYTES) == sram


@pytest.mark.parametrize("mode", ["sync", "timed"])
def test_async_babbles_latch_overflow_for_bulk_wait(mode: str) -> None:
    plan = FaultPlan((*FaultPlan.single(_XDATA_READ, 1, Fault.babble()).rules,
                      *FaultPlan.single(Operation.bulk_in(), 1, Fault.babble()).rules))  # fmt: skip
    with MockUSB3(faults=plan, mode=mode) as usb:
        tag, _ = usb.control_read_async(Request.XDATA_READ, 4, value=Xdata.SRAM_WINDOW)
        with pytest.raises(usb1.USBErrorOverflow) as info:
            usb.bulk_wait(tag)
        assert info.value.tag == tag  # type: ignore[attr-defined]
        _arm_read(usb)
        into = bytearray(_SECTORS * _SECTOR_BYTES)
        with pytest.raises(usb1.USBErrorOverflow):
            usb.bulk_read_into(into)
        assert usb.in_flight == () and usb.latched_error is None
