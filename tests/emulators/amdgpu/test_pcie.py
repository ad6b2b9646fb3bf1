"""The GPU as a PCIe function: config space and BAR sizing, BAR routing, the system aperture through the host."""

from __future__ import annotations

from typing import Any

import pytest

from tinyhil.amdgpu import AmdQueue, sdma_copy_linear, sdma_fence, sdma_poll_regmem
from tinyhil.emulators.amdgpu import SYS_APERTURE, AmdGpu, AmdGpuFunction, GpuQueueError, QueueKind, QueueStatus
from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.emulators.kernel import EventKernel
from tinyhil.emulators.pcie import PcieFunction, PcieUnsupportedRequest
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.mocks.amdgpu import DirectQueueTransport
from tinyhil.spec.amdgpu import Bar, Bar5, QueueReg
from tinyhil.spec.pci import Config

SRAM = 0x200000
WAIT_NS = 1_000_000_000


class FakeHost:
    """A bridge stand-in: 64 KB of memory at PCIe 0x200000; anything else is an unsupported request."""

    def __init__(self) -> None:
        self.memory = bytearray(0x10000)

    def _offset(self, pcie_addr: int, nbytes: int) -> int:
        offset = pcie_addr - SRAM
        if offset < 0 or offset + nbytes > len(self.memory):
            raise PcieUnsupportedRequest(f"DMA {pcie_addr:#x}: nothing there", addr=pcie_addr, nbytes=nbytes)
        return offset

    def dma_read(self, pcie_addr: int, nbytes: int) -> bytes:
        offset = self._offset(pcie_addr, nbytes)
        return bytes(self.memory[offset : offset + nbytes])

    def dma_write(self, pcie_addr: int, data: bytes | memoryview) -> None:
        offset = self._offset(pcie_addr, len(data))
        self.memory[offset : offset + len(data)] = data


def _sdma(gpu: AmdGpu) -> AmdQueue:
    layout = {"ring_va": 0x100000, "ring_bytes": 0x1000, "rptr_va": 0x1000, "wptr_va": 0x1008, "doorbell_index": 0}
    queue = AmdQueue(DirectQueueTransport(gpu, wait_ns=WAIT_NS), QueueKind.SDMA, **layout)
    queue.initialize()
    gpu.create_queue(QueueKind.SDMA, **layout)
    return queue


def _size(function: AmdGpuFunction, reg: int) -> int:
    """Standard BAR sizing: write all ones, read back."""
    function.config_write(reg, 0xFFFF_FFFF, 0xF)
    return function.config_read(reg)


def test_it_is_a_pcie_function_with_amd_identity() -> None:
    function = AmdGpuFunction(kernel=EventKernel(), vram_bytes=16 << 20)
    assert isinstance(function, PcieFunction)
    assert function.config_read(Config.VENDOR_ID) == 0x744C << 16 | 0x1002
    assert function.config_read(Config.REVISION_ID) >> 8 == 0x030000, "class: VGA display controller"
    assert function.gpu.gfx_target_version == 110000 and function.gpu.memory.vram_at_zero


@pytest.mark.parametrize(
    ("options", "device_id"),
    [({"gfx_target_version": 90402}, 0x74A1), ({"gfx_target_version": 100300}, 0x73BF),
     ({"gfx_target_version": 120000, "device_id": 0x7550}, 0x7550)],
)  # fmt: skip
def test_the_device_id_follows_the_gfx_target(options: dict[str, int], device_id: int) -> None:
    function = AmdGpuFunction(kernel=EventKernel(), vram_bytes=16 << 20, **options)
    assert function.config.read(Config.DEVICE_ID, 2) == device_id


def test_bars_size_as_the_spec_says() -> None:
    function = AmdGpuFunction(kernel=EventKernel(), vram_bytes=16 << 20)
    base = Config.BASE_ADDRESS_0
    assert _size(function, base) == (~((16 << 20) - 1) & 0xFFFF_FFF0) | 0xC, "BAR0: 64-bit prefetchable VRAM"
    assert _size(function, base + 4) == 0xFFFF_FFFF, "BAR0's upper dword: below 4 GB of size"
    assert _size(function, base + 8) == (~(8192 - 1) & 0xFFFF_FFF0) | 0xC, "BAR2: 8 KB doorbells, 64-bit"
    assert _size(function, base + 20) == ~((2 << 20) - 1) & 0xFFFF_FFF0, "BAR5: 2 MB registers, 32-bit"


def test_bar0_powers_on_at_256_mb_and_resizes_up_to_the_vram() -> None:
    function = AmdGpuFunction(kernel=EventKernel(), vram_bytes=1 << 30)
    config = function.config
    assert config.bar_size(Bar.VRAM) == 256 << 20
    assert config.read(0x104, 4) >> 4 == 0b111 << 8, "supported sizes: 256 MB, 512 MB, 1 GB"
    control = config.read(0x108, 4)
    function.config_write(0x108, control & ~0x3F00 | 10 << 8, 0xF)  # size code 10: 1 MB << 10 = 1 GB
    assert config.bar_size(Bar.VRAM) == 1 << 30


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"vram_bytes": 3 << 20}, InvalidArgument, r"vram_bytes=0x300000, expected a power of two >= 1 MB"),
        ({"vram_bytes": 1 << 19}, InvalidArgument, r"vram_bytes=524288"),
        ({"gfx_target_version": 120000}, InvalidArgument, r"gfx_target_version=120000, expected one of .*device_id="),
        ({"gfx_target_version": 0}, InvalidArgument, r"gfx_target_version=0"),
        ({"device_id": 0xFFFF}, InvalidArgument, r"device_id=65535"),
        ({"kernel": None}, InvalidArgument, r"kernel=None, expected the EventKernel the bridge runs on"),
    ],
)
def test_bad_constructor_arguments(options: dict[str, Any], error: type[Exception], message: str) -> None:
    arguments: dict[str, Any] = {"kernel": EventKernel(), "vram_bytes": 16 << 20, **options}
    with pytest.raises(error, match=message):
        AmdGpuFunction(**arguments)


def test_bar_accesses_reach_the_gpu() -> None:
    function = AmdGpuFunction(kernel=EventKernel(), vram_bytes=16 << 20)
    gpu = function.gpu
    function.mmio_write(Bar.VRAM, 0x1234, b"vram")
    assert bytes(gpu.vram[0x1234:0x1238]) == b"vram" and function.mmio_read(Bar.VRAM, 0x1234, 4) == b"vram"
    assert function.mmio_read(Bar.REGS, Bar5.ID, 4) == (0x48494C31).to_bytes(4, "little")
    _sdma(gpu)
    assert function.mmio_read(Bar.DOORBELL, 0, 8) == bytes(8)
    function.mmio_write(Bar.DOORBELL, 0, (0).to_bytes(8, "little"))
    assert gpu.queues[0].status == QueueStatus.IDLE


def test_narrow_bar5_accesses_read_and_merge_bytes_of_whole_registers() -> None:
    function = AmdGpuFunction(kernel=EventKernel(), vram_bytes=16 << 20)
    assert function.mmio_read(Bar.REGS, Bar5.ID + 1, 2) == (0x48494C31).to_bytes(4, "little")[1:3]
    doorbell = Bar5.SDMA1 + QueueReg.DOORBELL
    function.mmio_write(Bar.REGS, doorbell, (0x11223344).to_bytes(4, "little"))
    function.mmio_write(Bar.REGS, doorbell + 1, b"\xaa")
    assert function.mmio_read(Bar.REGS, doorbell, 4) == (0x1122AA44).to_bytes(4, "little")


def test_before_it_is_plugged_in_the_system_aperture_is_a_memory_fault() -> None:
    function = AmdGpuFunction(kernel=EventKernel(), vram_bytes=16 << 20)
    queue = _sdma(function.gpu)
    with pytest.raises(GpuQueueError, match=r"memory fault at 0x100000200000.*not plugged into a bridge"):
        queue.submit(sdma_copy_linear(0x400000, SYS_APERTURE + SRAM, 16))
        queue.wait_idle()


def test_the_host_is_the_system_bus_and_its_writes_wake_pollers() -> None:
    kernel = EventKernel()
    function = AmdGpuFunction(kernel=kernel, vram_bytes=16 << 20)
    host = FakeHost()
    function.attach_host(host)
    function.attach_host(host)  # the same host again is harmless
    assert function.host is host
    queue = _sdma(function.gpu)
    host.memory[0x100:0x104] = b"data"
    queue.submit(
        sdma_poll_regmem(SYS_APERTURE + SRAM, 7, interval=1),
        sdma_copy_linear(0x400000, SYS_APERTURE + SRAM + 0x100, 4),
        sdma_fence(SYS_APERTURE + SRAM + 0x200, 9),
    )
    kernel.run_for(100_000)
    assert function.gpu.queues[0].waiting and bytes(function.gpu.vram[0x400000:0x400004]) == bytes(4)
    host.memory[0:4] = (7).to_bytes(4, "little")
    function.host_memory_written(SRAM, 4)
    queue.wait_idle()
    assert bytes(function.gpu.vram[0x400000:0x400004]) == b"data"
    assert host.memory[0x200:0x204] == (9).to_bytes(4, "little"), "GPU writes reach the host"
    with pytest.raises(StateError, match="already plugged into"):
        function.attach_host(FakeHost())


def test_the_bridge_attaches_itself_and_its_power_cycle_resets_the_gpu() -> None:
    kernel = EventKernel()
    function = AmdGpuFunction(kernel=kernel, vram_bytes=16 << 20)
    bridge = Asm2464(kernel=kernel, function=function)
    assert function.host is bridge and function.kernel is bridge.kernel
    _sdma(function.gpu)
    function.mmio_write(Bar.VRAM, 0, b"old")
    bridge.reset()
    assert function.gpu.queues == () and bytes(function.gpu.vram[0:3]) == bytes(3)
    assert function.mmio_read(Bar.REGS, Bar5.SDMA0 + QueueReg.RB_CNTL, 4) == bytes(4)
