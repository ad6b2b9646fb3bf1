"""``Gfx1100UsbGpu``'s access to the GPU over the bridge (the chip's bring-up and queues are tested in
``test_gfx1100_gpu.py``): BAR0 / BAR2 / BAR5, waits, the checks of its arguments, and the ``UsbGpu`` protocol it
satisfies for the copy protocol."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tinyhil.amdgpu import AmdQueue, QueueTransport
from tinyhil.amdgpu.firmware import GeneratedFirmware
from tinyhil.asm2464 import Asm2464Controller, PcieBar, PcieTopology, pcie_bringup
from tinyhil.errors import DeviceError, DeviceTimeout, InvalidArgument
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.amdgpu import QueueKind
from tinyhil.usbgpu import UsbGpu
from tinyhil.usbgpu.gfx1100_gpu import Gfx1100UsbGpu, open_usb_gpu

VRAM_BYTES = 64 << 20  # the smallest gfx1100 board; BAR0 powers on at all of it
LAYOUT: dict[str, int] = {
    "ring_va": 0x100000,
    "ring_bytes": 0x1000,
    "rptr_va": 0x1000,
    "wptr_va": 0x1008,
}


@pytest.fixture
def usb() -> Iterator[MockUSB3]:
    with MockUSB3(vram_bytes=VRAM_BYTES) as usb:
        yield usb


@pytest.fixture
def driver(usb: MockUSB3) -> Gfx1100UsbGpu:
    return open_usb_gpu(Asm2464Controller(usb), firmware=GeneratedFirmware())


def test_it_is_the_queue_transport_of_its_queues(driver: Gfx1100UsbGpu) -> None:
    assert isinstance(driver, QueueTransport)
    queue = driver.create_queue(QueueKind.SDMA, **LAYOUT)
    assert isinstance(queue, AmdQueue) and queue.transport is driver and driver.queues == (queue,)
    assert "64 MB VRAM" in repr(driver)


def test_vram_writes_and_reads_go_through_bar0(usb: MockUSB3, driver: Gfx1100UsbGpu) -> None:
    driver.write_memory(0x40_0000, b"\x01\x02\x03\x04\x05\x06\x07\x08")
    assert bytes(usb.gpu.vram[0x40_0000:0x40_0008]) == b"\x01\x02\x03\x04\x05\x06\x07\x08"
    assert (driver.read_u32(0x40_0000), driver.read_u64(0x40_0000)) == (0x04030201, 0x0807060504030201)


def test_registers_read_and_write_through_bar5(driver: Gfx1100UsbGpu) -> None:
    scratch = 0x1000  # BAR5 dword 0x400: no named register, so the register file only keeps what is written
    before = driver.read_registers(scratch, 2)
    driver.write_registers(scratch, 0x1234_5678, 0x9ABC_DEF0)
    assert driver.read_registers(scratch, 2) == [0x1234_5678, 0x9ABC_DEF0] != before
    assert driver.read_register(scratch + 4) == 0x9ABC_DEF0


def test_a_wait_that_times_out_names_what_and_the_queues(driver: Gfx1100UsbGpu) -> None:
    driver.create_queue(QueueKind.SDMA, **LAYOUT)
    with pytest.raises(DeviceTimeout, match=r"never: not reached after 6 polls over 0.005s \(.*SDMA.*\)"):
        driver.wait(lambda: False, "never", timeout_s=0.005)


def test_a_wait_ends_when_its_condition_holds(driver: Gfx1100UsbGpu) -> None:
    polls: list[int] = []

    def third_poll() -> bool:
        polls.append(1)
        return len(polls) == 3

    driver.wait(third_poll, "the third poll")
    assert len(polls) == 3


def test_it_is_the_gpu_the_copy_protocol_drives(driver: Gfx1100UsbGpu) -> None:
    assert isinstance(driver, UsbGpu) and driver.vram_bar.size == VRAM_BYTES
    assert not isinstance(object(), UsbGpu)


def test_a_topology_without_all_three_bars_is_refused(usb: MockUSB3) -> None:
    controller = Asm2464Controller(usb)
    full = pcie_bringup(controller)
    partial = PcieTopology(4, 0, 0, 0x1002, 0x744C, (full.bar(0),), full.bridges, None)
    with pytest.raises(DeviceError, match=r"lacks BAR2, BAR5"):
        Gfx1100UsbGpu(controller, partial, firmware=GeneratedFirmware())


def _open(driver: Gfx1100UsbGpu, **options: Any) -> Callable[[], Any]:
    return lambda: Gfx1100UsbGpu(driver.controller, driver.topology, firmware=GeneratedFirmware(), **options)


def _bad_calls(driver: Gfx1100UsbGpu) -> dict[str, Callable[[], Any]]:
    return {
        "register offset unaligned": lambda: driver.read_register(2),
        "register offset past BAR5": lambda: driver.write_registers(1 << 20, 0),
        "register value too wide": lambda: driver.write_registers(0x1000, 1 << 32),
        "no registers": lambda: driver.read_registers(0x1000, 0),
        "memory past BAR0": lambda: driver.write_memory(VRAM_BYTES - 2, b"four"),
        "system aperture from the host": lambda: driver.read_memory(1 << 44, 4),
        "empty read": lambda: driver.read_memory(0, 0),
        "negative address": lambda: driver.read_memory(-4, 4),
        "doorbell past BAR2": lambda: driver.ring_doorbell(1024, 0),
        "doorbell value too wide": lambda: driver.ring_doorbell(0, 1 << 64),
        "zero timeout": lambda: driver.wait(lambda: True, "x", timeout_s=0),
        "poll_s zero": _open(driver, poll_s=0),
        "timeout_s bool": _open(driver, timeout_s=True),
        "not a controller": lambda: Gfx1100UsbGpu(driver.topology, driver.topology, firmware=GeneratedFirmware()),  # type: ignore[arg-type]
        "not a topology": lambda: Gfx1100UsbGpu(
            driver.controller,
            PcieBar(0, 0, 16, True, True),  # type: ignore[arg-type]
            firmware=GeneratedFirmware(),
        ),
    }


BAD = {
    "register offset unaligned": r"offset=0x2, expected a BAR5 register offset",
    "register offset past BAR5": r"offset=1048576",
    "register value too wide": r"register value=4294967296",
    "no registers": r"count=0",
    "memory past BAR0": r"GPU address va=0x3fffffe\+0x4, expected VRAM the host reaches through BAR0",
    "system aperture from the host": r"system-aperture addresses are the bridge's memory",
    "empty read": r"nbytes=0",
    "negative address": r"va=-4",
    "doorbell past BAR2": r"doorbell_index=1024",
    "doorbell value too wide": r"value=18446744073709551616",
    "zero timeout": r"timeout_s=0, expected a number of seconds > 0",
    "poll_s zero": r"poll_s=0",
    "timeout_s bool": r"timeout_s=True",
    "not a controller": r"controller=PcieTopology.*expected an Asm2464Controller",
    "not a topology": r"topology=PcieBar.*expected the PcieTopology pcie_bringup returned",
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_raises_invalid_argument_and_changes_nothing(usb: MockUSB3, driver: Gfx1100UsbGpu, case: str) -> None:
    before = usb.bridge.state_digest()
    queues = usb.gpu.queues
    with pytest.raises(InvalidArgument, match=BAD[case]):
        _bad_calls(driver)[case]()
    assert usb.bridge.state_digest() == before and usb.gpu.queues == queues and driver.queues == ()
