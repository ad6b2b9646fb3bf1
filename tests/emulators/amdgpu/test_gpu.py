"""The GPU core through its USB front door: BAR5 queue setup, BAR2 doorbells, BAR0 VRAM, the system aperture."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tinyhil.amdgpu import (
    AmdQueue,
    sdma_const_fill,
    sdma_copy_linear,
    sdma_fence,
    sdma_poll_regmem,
    sdma_timestamp,
    sdma_write,
)
from tinyhil.emulators.amdgpu import SYS_APERTURE, AmdGpu, GpuQueueError, Interrupt, InterruptKind, QueueKind
from tinyhil.emulators.kernel import EventKernel
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import Bar, Bar5, QueueReg, QueueStatus, RbCntl

RING, RPTR, WPTR, DOORBELL = 0x100000, 0x1000, 0x1008, 5
DATA = 0x400000
WAIT_NS = 1_000_000_000


class FakeBus:
    """The bridge's SRAM (PCIe 0x200000, 512 KB) as a bytearray; landing bytes notifies the GPU like the bridge."""

    BASE = 0x200000

    def __init__(self) -> None:
        self.sram = bytearray(0x80000)
        self.gpu: AmdGpu | None = None

    def dma_read(self, pcie_addr: int, nbytes: int) -> bytes:
        offset = pcie_addr - self.BASE
        if offset < 0 or offset + nbytes > len(self.sram):
            raise ValueError(f"PCIe {pcie_addr:#x} is not SRAM")
        return bytes(self.sram[offset : offset + nbytes])

    def dma_write(self, pcie_addr: int, data: bytes | memoryview) -> None:
        offset = pcie_addr - self.BASE
        if offset < 0 or offset + len(data) > len(self.sram):
            raise ValueError(f"PCIe {pcie_addr:#x} is not SRAM")
        self.sram[offset : offset + len(data)] = data

    def land(self, pcie_addr: int, data: bytes) -> None:
        """What a host scsi_write does: bytes land in SRAM, then the bridge tells the GPU."""
        self.sram[pcie_addr - self.BASE : pcie_addr - self.BASE + len(data)] = data
        assert self.gpu is not None
        self.gpu.host_memory_written(pcie_addr, len(data))


class BarTransport:
    """The USB-path transport: ring and pointers through BAR0, doorbells through BAR2."""

    def __init__(self, gpu: AmdGpu) -> None:
        self.gpu = gpu

    def write_memory(self, va: int, data: bytes | memoryview) -> None:
        self.gpu.mmio_write(Bar.VRAM, va, bytes(data))

    def read_memory(self, va: int, nbytes: int) -> bytes:
        return self.gpu.mmio_read(Bar.VRAM, va, nbytes)

    def ring_doorbell(self, doorbell_index: int, value: int) -> None:
        self.gpu.mmio_write(Bar.DOORBELL, doorbell_index * 8, value.to_bytes(8, "little"))

    def wait(self, condition: Callable[[], bool], what: str) -> None:
        self.gpu.wait(condition, WAIT_NS, what=what)


def _reg(gpu: AmdGpu, offset: int) -> int:
    return int.from_bytes(gpu.mmio_read(Bar.REGS, offset, 4), "little")


def _set_reg(gpu: AmdGpu, offset: int, value: int) -> None:
    gpu.mmio_write(Bar.REGS, offset, value.to_bytes(4, "little"))


def _bar5_sdma_queue(gpu: AmdGpu, block: int = Bar5.SDMA0) -> AmdQueue:
    """Program an SDMA queue the way a USB-path driver does: BAR5 registers, then RB_CNTL enable."""
    queue = AmdQueue(
        BarTransport(gpu), QueueKind.SDMA, ring_va=RING, ring_bytes=1 << 16, rptr_va=RPTR, wptr_va=WPTR,
        doorbell_index=DOORBELL,
    )  # fmt: skip
    queue.initialize()
    for reg, value in [
        (QueueReg.RB_BASE_LO, RING),
        (QueueReg.RB_BASE_HI, 0),
        (QueueReg.RB_SIZE_LOG2, 16),
        (QueueReg.RPTR_ADDR_LO, RPTR),
        (QueueReg.RPTR_ADDR_HI, 0),
        (QueueReg.WPTR_ADDR_LO, WPTR),
        (QueueReg.WPTR_ADDR_HI, 0),
        (QueueReg.DOORBELL, DOORBELL),
        (QueueReg.RB_CNTL, RbCntl.ENABLE),
    ]:
        _set_reg(gpu, block + reg, value)
    return queue


def test_identity_registers() -> None:
    gpu = AmdGpu(EventKernel(), vram_bytes=64 << 20, system_bus=FakeBus())
    assert gpu.mmio_read(Bar.REGS, Bar5.ID, 8) == (0x48494C31).to_bytes(4, "little") + (64).to_bytes(4, "little")


def test_sdma_packets_through_bar5_bar2_and_bar0() -> None:
    """The issue's first check, minus the bridge: queue via BAR5, kick via BAR2, results read back via BAR0."""
    gpu = AmdGpu(EventKernel(), vram_bytes=16 << 20, system_bus=FakeBus())
    queue = _bar5_sdma_queue(gpu)
    assert _reg(gpu, Bar5.SDMA0 + QueueReg.RB_CNTL) == RbCntl.ENABLE and len(gpu.queues) == 1
    gpu.mmio_write(Bar.VRAM, DATA + 0x1000, bytes(range(256)))
    queue.submit(
        sdma_write(DATA, [0x11111111, 0x22222222]),
        sdma_copy_linear(DATA + 0x2000, DATA + 0x1000, 256),
        sdma_const_fill(DATA + 0x3000, 0xA5A5A5A5, 64),
        sdma_timestamp(DATA + 0x10),
        sdma_fence(DATA + 0x20, 0x600D),
    )
    queue.wait_idle()
    bar0 = gpu.mmio_read
    assert bar0(Bar.VRAM, DATA, 8) == bytes.fromhex("1111111122222222")
    assert bar0(Bar.VRAM, DATA + 0x2000, 256) == bytes(range(256))
    assert bar0(Bar.VRAM, DATA + 0x3000, 68) == b"\xa5" * 64 + bytes(4)
    timing = gpu.timing
    elapsed_ns = 3 * timing.packet_ns + sum(timing.transfer_ns(n) for n in (8, 256, 64))
    assert int.from_bytes(bar0(Bar.VRAM, DATA + 0x10, 8), "little") == elapsed_ns // 10
    assert bar0(Bar.VRAM, DATA + 0x20, 4) == (0x600D).to_bytes(4, "little")
    assert _reg(gpu, Bar5.SDMA0 + QueueReg.STATUS) == QueueStatus.IDLE
    assert int.from_bytes(bar0(Bar.VRAM, RPTR, 8), "little") == queue.wptr, "the engine wrote its read pointer back"


def test_a_stopped_queue_reports_status_error_code_and_rptr_through_bar5() -> None:
    gpu = AmdGpu(EventKernel(), vram_bytes=16 << 20, system_bus=FakeBus())
    queue = _bar5_sdma_queue(gpu)
    with pytest.raises(GpuQueueError, match="memory fault"):
        queue.submit(sdma_fence(DATA, 1), sdma_fence(0x9_0000_0000, 1))
        queue.wait_idle()
    block = Bar5.SDMA0
    assert _reg(gpu, block + QueueReg.STATUS) == QueueStatus.MEMORY_FAULT
    assert _reg(gpu, block + QueueReg.ERROR_CODE) == 3 | 5 << 8, "MEMORY_FAULT in a FENCE (opcode 5)"
    assert _reg(gpu, block + QueueReg.ERROR_RPTR) == 16
    assert (_reg(gpu, block + QueueReg.FAULT_ADDR_LO), _reg(gpu, block + QueueReg.FAULT_ADDR_HI)) == (0, 9)


def test_clearing_rb_cntl_destroys_the_queue_and_frees_its_doorbell() -> None:
    gpu = AmdGpu(EventKernel(), vram_bytes=16 << 20, system_bus=FakeBus())
    _bar5_sdma_queue(gpu)
    _set_reg(gpu, Bar5.SDMA0 + QueueReg.RB_CNTL, 0)
    assert gpu.queues == () and _reg(gpu, Bar5.SDMA0 + QueueReg.RB_CNTL) == 0
    _bar5_sdma_queue(gpu, Bar5.SDMA1)  # the same doorbell is free again
    assert len(gpu.queues) == 1


def test_a_poll_on_sram_is_released_by_a_later_landing_write() -> None:
    """The issue's second check: POLL_REGMEM on a system-aperture address, released by bytes the bridge lands."""
    bus = FakeBus()
    kernel = EventKernel()
    gpu = bus.gpu = AmdGpu(kernel, vram_bytes=16 << 20, system_bus=bus)
    queue = _bar5_sdma_queue(gpu)
    window, wire = 0x200000, 0x1000
    sentinel = 0x51000000 | 7
    payload = np.random.default_rng(3).integers(0, 256, wire - 4, dtype=np.uint8).tobytes()
    queue.submit(
        sdma_poll_regmem(SYS_APERTURE + window + wire - 4, sentinel, interval=4, retry_count=0xFFF),
        sdma_copy_linear(DATA, SYS_APERTURE + window, wire - 4),
        sdma_write(SYS_APERTURE + 0x820800 - 0x600000, [8, 0]),  # the fence (here inside the fake SRAM)
    )
    kernel.run_for(50_000)
    assert gpu.queues[0].waiting and gpu.mmio_read(Bar.VRAM, DATA, 16) == bytes(16)
    bus.land(window, payload)  # payload first: the sentinel is not there yet
    kernel.run_for(50_000)
    assert gpu.queues[0].waiting, "the payload alone does not release the poll"
    bus.land(window + wire - 4, sentinel.to_bytes(4, "little"))
    queue.wait_idle()
    assert gpu.mmio_read(Bar.VRAM, DATA, wire - 4) == payload
    assert bus.sram[0x20800:0x20808] == (8).to_bytes(8, "little")


def _timestamps_run(seed: int) -> tuple[bytes, int]:
    kernel = EventKernel(seed=seed)
    gpu = AmdGpu(kernel, vram_bytes=16 << 20, system_bus=FakeBus())
    queue = _bar5_sdma_queue(gpu)
    for size in (64, 4096, 1 << 16):
        queue.submit(sdma_timestamp(DATA + 8 * (size.bit_length())), sdma_copy_linear(DATA + 0x10000, 0, size))
    queue.submit(sdma_timestamp(DATA + 0x200))
    queue.wait_idle()
    return gpu.mmio_read(Bar.VRAM, DATA, 0x208), kernel.now_ns


def test_timestamps_are_monotonic_and_identical_across_runs_with_the_same_seed() -> None:
    first, first_now = _timestamps_run(seed=11)
    second, second_now = _timestamps_run(seed=11)
    assert (first, first_now) == (second, second_now)
    words = np.frombuffer(first, "<u8")
    stamps = [int(words[n]) for n in (7, 13, 17, 64)]
    assert stamps == sorted(stamps) and len(set(stamps)) == 4


def test_interrupts_reach_the_listener() -> None:
    gpu = AmdGpu(EventKernel(), vram_bytes=16 << 20, system_bus=FakeBus())
    seen: list[Interrupt] = []
    gpu.on_interrupt = seen.append
    queue = _bar5_sdma_queue(gpu)
    with pytest.raises(GpuQueueError):
        queue.submit(sdma_fence(0x9_0000_0000, 1))
        queue.wait_idle()
    assert [(i.kind, i.fault_va) for i in seen] == [(InterruptKind.MEMORY_FAULT, 0x9_0000_0000)]


def test_doorbell_writes_ring_on_their_low_dword_only() -> None:
    gpu = AmdGpu(EventKernel(), vram_bytes=16 << 20, system_bus=FakeBus())
    rung: list[tuple[int, int]] = []
    gpu.ring_doorbell = lambda index, value: rung.append((index, value))  # type: ignore[method-assign]
    gpu.mmio_write(Bar.DOORBELL, 8 * 3, (0x1_0000_0040).to_bytes(8, "little"))
    gpu.mmio_write(Bar.DOORBELL, 8 * 4 + 4, b"\x01\x00\x00\x00")  # high half only: no ring
    gpu.mmio_write(Bar.DOORBELL, 8 * 4, b"\x80\x00\x00\x00")
    gpu.mmio_write(Bar.DOORBELL, 8 * 6 + 3, b"\x00\x00\x00\x00\x00\x00")  # touches slot 6's and 7's low dwords
    assert rung == [(3, 0x1_0000_0040), (4, 0x1_0000_0080), (6, 0), (7, 0)]
    assert gpu.mmio_read(Bar.DOORBELL, 8 * 4, 8) == (0x1_0000_0080).to_bytes(8, "little")


BAD_MMIO = [
    ("read", 1, 0, 4, "bar=1, expected 0 .VRAM., 2 .doorbells. or 5 .registers."),
    ("read", Bar.VRAM, (16 << 20) - 2, 4, "BAR0 range 0xfffffe\\+0x4 ends at 0x1000002, past the end 0x1000000"),
    ("write", Bar.VRAM, -4, 4, "BAR0 offset=-4"),
    ("read", Bar.DOORBELL, 8188, 8, "BAR2 range"),
    ("write", Bar.REGS, 2, 4, "BAR5 access 0x2\\+0x4, expected whole aligned 32-bit registers"),
    ("read", Bar.REGS, 0, 3, "BAR5 access 0x0\\+0x3"),
    ("read", Bar.REGS, 2 << 20, 4, "BAR5 range"),
]


@pytest.mark.parametrize(("op", "bar", "offset", "nbytes", "message"), BAD_MMIO)
def test_bad_mmio_accesses_raise_invalid_argument(op: str, bar: int, offset: int, nbytes: int, message: str) -> None:
    gpu = AmdGpu(EventKernel(), vram_bytes=16 << 20, system_bus=FakeBus())
    with pytest.raises(InvalidArgument, match=message):
        if op == "read":
            gpu.mmio_read(bar, offset, nbytes)
        else:
            gpu.mmio_write(bar, offset, bytes(nbytes))


def test_the_usb_path_maps_vram_at_zero_and_the_kfd_path_does_not() -> None:
    usb = AmdGpu(EventKernel(), vram_bytes=16 << 20, system_bus=FakeBus())
    kfd = AmdGpu(EventKernel(), vram_bytes=16 << 20)
    assert [(m.va, m.nbytes) for m in usb.memory.mappings] == [(0, 16 << 20)]
    assert kfd.memory.mappings == ()
    kfd.map_memory(0x7F00_0000_0000, kfd.vram[0x10000:0x20000])
    kfd.write(0x7F00_0000_0010, b"kfd!")
    assert bytes(kfd.vram[0x10010:0x10014]) == b"kfd!" and bytes(kfd.read(0x7F00_0000_0010, 4)) == b"kfd!"
