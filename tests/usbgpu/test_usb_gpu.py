"""UsbGpu, the USB-path driver of the emulator's own BAR5 layout (``MockUSB3(interface="bar5")``; gfx1100's real
interface is the default, tested in ``test_gfx1100_gpu.py``): BAR5 queue setup and teardown, its checks, its errors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tinyhil.amdgpu import AmdQueue, QueueTransport, sdma_fence
from tinyhil.asm2464 import Asm2464Controller, PcieBar, PcieTopology, pcie_bringup
from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.errors import DeviceError, DeviceTimeout, InvalidArgument, StateError
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.amdgpu import QueueKind, QueueStatus
from tinyhil.usbgpu import UsbGpu

LAYOUT: dict[str, int] = {
    "ring_va": 0x100000,
    "ring_bytes": 0x1000,
    "rptr_va": 0x1000,
    "wptr_va": 0x1008,
    "doorbell_index": 1,
}


@pytest.fixture
def usb() -> Iterator[MockUSB3]:
    with MockUSB3(vram_bytes=16 << 20, interface="bar5") as usb:
        yield usb


@pytest.fixture
def driver(usb: MockUSB3) -> UsbGpu:
    return UsbGpu.bring_up(Asm2464Controller(usb))


def test_it_is_the_queue_transport_of_its_queues(driver: UsbGpu) -> None:
    assert isinstance(driver, QueueTransport)
    queue = driver.create_queue(QueueKind.SDMA, **LAYOUT)
    assert isinstance(queue, AmdQueue) and queue.transport is driver and driver.queues == (queue,)
    assert "16 MB VRAM" in repr(driver)


def test_create_queue_programs_the_bar5_block(usb: MockUSB3, driver: UsbGpu) -> None:
    driver.create_queue(QueueKind.SDMA, index=1, **{**LAYOUT, "ring_va": 0x20_0000, "ring_bytes": 0x4000})
    driver.create_queue(QueueKind.COMPUTE, **{**LAYOUT, "rptr_va": 0x1040, "wptr_va": 0x1048, "doorbell_index": 7})
    sdma, compute = usb.gpu.queues
    assert (sdma.kind, sdma.config.ring_va, sdma.config.ring_bytes, sdma.doorbell_index) == (
        QueueKind.SDMA,
        0x20_0000,
        0x4000,
        1,
    )
    assert (compute.kind, compute.config.rptr_va, compute.config.wptr_va, compute.doorbell_index) == (
        QueueKind.COMPUTE,
        0x1040,
        0x1048,
        7,
    )


def test_a_block_left_enabled_is_disabled_and_programmed_afresh(usb: MockUSB3, driver: UsbGpu) -> None:
    driver.create_queue(QueueKind.SDMA, **LAYOUT)
    second = UsbGpu(driver.controller, driver.topology)  # a new driver over a GPU an old one left running
    queue = second.create_queue(QueueKind.SDMA, **{**LAYOUT, "ring_va": 0x30_0000})
    (device,) = usb.gpu.queues
    assert device.config.ring_va == 0x30_0000
    queue.submit(sdma_fence(0x40_0000, 5))
    second.wait(lambda: second.read_u32(0x40_0000) == 5, "the fence")


def test_destroy_queue_frees_the_block_and_the_doorbell(usb: MockUSB3, driver: UsbGpu) -> None:
    queue = driver.create_queue(QueueKind.SDMA, **LAYOUT)
    driver.destroy_queue(queue)
    assert usb.gpu.queues == () and driver.queues == ()
    driver.create_queue(QueueKind.SDMA, index=1, **LAYOUT)  # the same doorbell again
    with pytest.raises(InvalidArgument, match="expected a live queue created by this UsbGpu"):
        driver.destroy_queue(queue)


def test_settings_the_gpu_refuses_raise_with_its_error_code(driver: UsbGpu) -> None:
    driver.create_queue(QueueKind.SDMA, **LAYOUT)
    with pytest.raises(DeviceError, match=r"SDMA queue 1 \(BAR5 0x1100\): the GPU refused .*BAD_QUEUE_CONFIG"):
        driver.create_queue(QueueKind.SDMA, index=1, **{**LAYOUT, "ring_va": 0x20_0000})  # doorbell 1 is taken
    assert len(driver.queues) == 1


def test_a_wait_that_times_out_names_what_and_the_queues(driver: UsbGpu) -> None:
    queue = driver.create_queue(QueueKind.SDMA, **LAYOUT)
    with pytest.raises(DeviceTimeout, match=r"never: not reached after 6 polls over 0.005s .*STATUS 0x1 \(IDLE\)"):
        driver.wait(lambda: False, "never", timeout_s=0.005)
    assert driver.queue_status(queue) == QueueStatus.IDLE


def test_a_function_without_the_register_interface_is_refused() -> None:
    with (
        MockUSB3.over(Asm2464(function=PlainEndpoint(vram_bytes=1 << 20))) as usb,
        pytest.raises(DeviceError, match=r"BAR5 ID reads 0x00000000, expected 0x48494c31"),
    ):
        UsbGpu.bring_up(Asm2464Controller(usb))


def test_a_topology_without_all_three_bars_is_refused(usb: MockUSB3) -> None:
    controller = Asm2464Controller(usb)
    full = pcie_bringup(controller)
    partial = PcieTopology(4, 0, 0, 0x1002, 0x744C, (full.bar(0),), full.bridges, None)
    with pytest.raises(DeviceError, match=r"lacks BAR2, BAR5"):
        UsbGpu(controller, partial)


def _bad_calls(driver: UsbGpu) -> dict[str, Callable[[], Any]]:
    return {
        "register offset unaligned": lambda: driver.read_register(2),
        "register offset past BAR5": lambda: driver.write_registers(2 << 20, 0),
        "register value too wide": lambda: driver.write_registers(0x1000, 1 << 32),
        "memory past BAR0": lambda: driver.write_memory((16 << 20) - 2, b"four"),
        "system aperture from the host": lambda: driver.read_memory(1 << 44, 4),
        "empty read": lambda: driver.read_memory(0, 0),
        "doorbell past BAR2": lambda: driver.ring_doorbell(1024, 0),
        "third SDMA queue": lambda: driver.create_queue(QueueKind.SDMA, index=2, **LAYOUT),
        "second compute queue": lambda: driver.create_queue(QueueKind.COMPUTE, index=1, **LAYOUT),
        "unknown queue kind": lambda: driver.create_queue(7, **LAYOUT),  # type: ignore[arg-type]
        "ring not a power of two": lambda: driver.create_queue(QueueKind.SDMA, **{**LAYOUT, "ring_bytes": 0x1800}),
        "ring past BAR0": lambda: driver.create_queue(QueueKind.SDMA, **{**LAYOUT, "ring_va": 16 << 20}),
        "zero timeout": lambda: driver.wait(lambda: True, "x", timeout_s=0),
        "poll_s zero": lambda: UsbGpu(driver.controller, driver.topology, poll_s=0),
        "timeout_s bool": lambda: UsbGpu(driver.controller, driver.topology, timeout_s=True),
        "not a controller": lambda: UsbGpu(driver.topology, driver.topology),  # type: ignore[arg-type]
        "not a topology": lambda: UsbGpu(driver.controller, PcieBar(0, 0, 16, True, True)),  # type: ignore[arg-type]
    }


BAD = {
    "register offset unaligned": r"offset=0x2, expected a BAR5 register offset",
    "register offset past BAR5": r"offset=2097152",
    "register value too wide": r"register value=4294967296",
    "memory past BAR0": r"GPU address 0xfffffe\+0x4, expected VRAM the host reaches through BAR0",
    "system aperture from the host": r"system-aperture addresses are the bridge's memory",
    "empty read": r"nbytes=0",
    "doorbell past BAR2": r"doorbell_index=1024",
    "third SDMA queue": r"SDMA queue index=2",
    "second compute queue": r"COMPUTE queue index=1",
    "unknown queue kind": r"kind=7, expected one of 0 \(SDMA\), 1 \(COMPUTE\)",
    "ring not a power of two": r"ring_bytes=0x1800, expected a power of two",
    "ring past BAR0": r"GPU address 0x1000000\+0x1000",
    "zero timeout": r"timeout_s=0, expected a number of seconds > 0",
    "poll_s zero": r"poll_s=0",
    "timeout_s bool": r"timeout_s=True",
    "not a controller": r"controller=PcieTopology.*expected an Asm2464Controller",
    "not a topology": r"topology=PcieBar.*expected the PcieTopology pcie_bringup returned",
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_raises_invalid_argument_and_changes_nothing(usb: MockUSB3, driver: UsbGpu, case: str) -> None:
    before = usb.bridge.state_digest()
    queues = usb.gpu.queues
    with pytest.raises(InvalidArgument, match=BAD[case]):
        _bad_calls(driver)[case]()
    assert usb.bridge.state_digest() == before and usb.gpu.queues == queues and driver.queues == ()


def test_a_second_queue_in_one_block_is_a_state_error(driver: UsbGpu) -> None:
    driver.create_queue(QueueKind.COMPUTE, **LAYOUT)
    with pytest.raises(StateError, match=r"COMPUTE queue 0 \(BAR5 0x2000\) is already set up"):
        driver.create_queue(QueueKind.COMPUTE, **{**LAYOUT, "doorbell_index": 2})
