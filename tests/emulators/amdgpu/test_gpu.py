"""The GPU core driven directly: queues and doorbells, VRAM at address 0, a system bus behind the system aperture."""

from __future__ import annotations

import numpy as np
import pytest
from support.system_bus import FakePcie

from tinyhil.amdgpu import (
    AmdQueue,
    sdma_const_fill,
    sdma_copy_linear,
    sdma_fence,
    sdma_poll_regmem,
    sdma_timestamp,
    sdma_write,
)
from tinyhil.emulators.amdgpu import (
    SYS_APERTURE,
    AmdGpu,
    FlatTranslation,
    GpuQueueError,
    Interrupt,
    InterruptKind,
    QueueKind,
)
from tinyhil.emulators.amdgpu.model_choices import ErrorCode, QueueStatus
from tinyhil.emulators.kernel import EventKernel
from tinyhil.errors import InvalidArgument
from tinyhil.mocks.amdgpu import DirectQueueTransport

RING, RPTR, WPTR, DOORBELL = 0x100000, 0x1000, 0x1008, 5
DATA = 0x400000
WAIT_NS = 1_000_000_000


class FakeBus(FakePcie):
    """The bridge's SRAM; landing bytes notifies the GPU like the bridge."""

    def __init__(self) -> None:
        super().__init__()
        self.gpu: AmdGpu | None = None

    def land(self, pcie_addr: int, data: bytes) -> None:
        """What a host scsi_write does: bytes land in SRAM, then the bridge tells the GPU."""
        self.dma_write(pcie_addr, data)
        assert self.gpu is not None
        self.gpu.memory_written(SYS_APERTURE + pcie_addr, len(data))


def _sdma_queue(gpu: AmdGpu, doorbell_index: int = DOORBELL) -> AmdQueue:
    """An SDMA queue on the core, written and kicked through its memory and doorbells."""
    layout = {
        "ring_va": RING,
        "ring_bytes": 1 << 16,
        "rptr_va": RPTR,
        "wptr_va": WPTR,
        "doorbell_index": doorbell_index,
    }
    queue = AmdQueue(DirectQueueTransport(gpu, wait_ns=WAIT_NS), QueueKind.SDMA, **layout)
    queue.initialize()
    gpu.create_queue(QueueKind.SDMA, **layout)
    return queue


def test_sdma_packets_kicked_by_a_doorbell_run_and_their_results_sit_in_vram() -> None:
    gpu = AmdGpu(EventKernel(), vram_bytes=16 << 20, system_bus=FakeBus())
    queue = _sdma_queue(gpu)
    assert len(gpu.queues) == 1 and gpu.queues[0].doorbell_index == DOORBELL
    gpu.write(DATA + 0x1000, bytes(range(256)))
    queue.submit(
        sdma_write(DATA, [0x11111111, 0x22222222]),
        sdma_copy_linear(DATA + 0x2000, DATA + 0x1000, 256),
        sdma_const_fill(DATA + 0x3000, 0xA5A5A5A5, 64),
        sdma_timestamp(DATA + 0x10),
        sdma_fence(DATA + 0x20, 0x600D),
    )
    queue.wait_idle()
    vram = gpu.vram
    assert bytes(vram[DATA : DATA + 8]) == bytes.fromhex("1111111122222222")
    assert bytes(vram[DATA + 0x2000 : DATA + 0x2100]) == bytes(range(256))
    assert bytes(vram[DATA + 0x3000 : DATA + 0x3044]) == b"\xa5" * 64 + bytes(4)
    timing = gpu.timing
    elapsed_ns = 3 * timing.packet_ns + sum(timing.transfer_ns(n) for n in (8, 256, 64))
    assert int.from_bytes(vram[DATA + 0x10 : DATA + 0x18], "little") == elapsed_ns // 10
    assert bytes(vram[DATA + 0x20 : DATA + 0x24]) == (0x600D).to_bytes(4, "little")
    assert gpu.queues[0].status == QueueStatus.IDLE
    assert int.from_bytes(vram[RPTR : RPTR + 8], "little") == queue.wptr, "the engine wrote its read pointer back"


def test_a_stopped_queue_reports_its_status_error_code_rptr_and_fault_address() -> None:
    gpu = AmdGpu(EventKernel(), vram_bytes=16 << 20, system_bus=FakeBus())
    queue = _sdma_queue(gpu)
    with pytest.raises(GpuQueueError, match="memory fault"):
        queue.submit(sdma_fence(DATA, 1), sdma_fence(0x9_0000_0000, 1))
        queue.wait_idle()
    (stopped,) = gpu.queues
    assert (stopped.status, stopped.error_code, stopped.error_opcode) == (QueueStatus.MEMORY_FAULT,
                                                                          ErrorCode.MEMORY_FAULT, 5)  # fmt: skip
    assert (stopped.error_rptr, stopped.fault_va) == (16, 0x9_0000_0000), "the second FENCE, at its address"


def test_destroying_a_queue_frees_its_doorbell() -> None:
    gpu = AmdGpu(EventKernel(), vram_bytes=16 << 20, system_bus=FakeBus())
    _sdma_queue(gpu)
    with pytest.raises(InvalidArgument, match=rf"doorbell_index={DOORBELL}, expected a free doorbell"):
        gpu.create_queue(QueueKind.SDMA, ring_va=0x200000, ring_bytes=1 << 16, rptr_va=0x2000, wptr_va=0x2008,
                         doorbell_index=DOORBELL)  # fmt: skip
    gpu.destroy_queue(gpu.queues[0])
    assert gpu.queues == ()
    _sdma_queue(gpu)  # the same doorbell is free again
    assert len(gpu.queues) == 1


def test_a_poll_on_sram_is_released_by_a_later_landing_write() -> None:
    """The issue's second check: POLL_REGMEM on a system-aperture address, released by bytes the bridge lands."""
    bus = FakeBus()
    kernel = EventKernel()
    gpu = bus.gpu = AmdGpu(kernel, vram_bytes=16 << 20, system_bus=bus)
    queue = _sdma_queue(gpu)
    window, wire = 0x200000, 0x1000
    sentinel = 0x51000000 | 7
    payload = np.random.default_rng(3).integers(0, 256, wire - 4, dtype=np.uint8).tobytes()
    queue.submit(
        sdma_poll_regmem(SYS_APERTURE + window + wire - 4, sentinel, interval=4, retry_count=0xFFF),
        sdma_copy_linear(DATA, SYS_APERTURE + window, wire - 4),
        sdma_write(SYS_APERTURE + 0x820800 - 0x600000, [8, 0]),  # the fence (here inside the fake SRAM)
    )
    kernel.run_for(50_000)
    assert gpu.queues[0].waiting and bytes(gpu.vram[DATA : DATA + 16]) == bytes(16)
    bus.land(window, payload)  # payload first: the sentinel is not there yet
    kernel.run_for(50_000)
    assert gpu.queues[0].waiting, "the payload alone does not release the poll"
    bus.land(window + wire - 4, sentinel.to_bytes(4, "little"))
    queue.wait_idle()
    assert bytes(gpu.vram[DATA : DATA + wire - 4]) == payload
    assert bus.memory[0x20800:0x20808] == (8).to_bytes(8, "little")


def _timestamps_run(seed: int) -> tuple[bytes, int]:
    kernel = EventKernel(seed=seed)
    gpu = AmdGpu(kernel, vram_bytes=16 << 20, system_bus=FakeBus())
    queue = _sdma_queue(gpu)
    for size in (64, 4096, 1 << 16):
        queue.submit(sdma_timestamp(DATA + 8 * (size.bit_length())), sdma_copy_linear(DATA + 0x10000, 0, size))
    queue.submit(sdma_timestamp(DATA + 0x200))
    queue.wait_idle()
    return bytes(gpu.vram[DATA : DATA + 0x208]), kernel.now_ns


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
    queue = _sdma_queue(gpu)
    with pytest.raises(GpuQueueError):
        queue.submit(sdma_fence(0x9_0000_0000, 1))
        queue.wait_idle()
    assert [(i.kind, i.fault_va) for i in seen] == [(InterruptKind.MEMORY_FAULT, 0x9_0000_0000)]


def test_a_doorbell_without_a_queue_is_dropped_and_one_with_a_queue_kicks_it() -> None:
    gpu = AmdGpu(EventKernel(), vram_bytes=16 << 20, system_bus=FakeBus())
    gpu.ring_doorbell(9, 0x40)  # no queue: logged, nothing happens
    queue = _sdma_queue(gpu)
    queue.append(sdma_fence(DATA, 3))
    gpu.write(WPTR, queue.wptr.to_bytes(8, "little"))
    gpu.ring_doorbell(DOORBELL, queue.wptr)
    fence = gpu.vram[DATA : DATA + 4]
    gpu.wait(lambda: bytes(fence) == (3).to_bytes(4, "little"), WAIT_NS, what="the fence")
    assert gpu.queues[0].rptr == queue.wptr


def test_with_a_system_bus_vram_sits_at_zero_and_the_kfd_path_maps_it() -> None:
    usb = AmdGpu(EventKernel(), vram_bytes=16 << 20, system_bus=FakeBus())
    kfd = AmdGpu(EventKernel(), vram_bytes=16 << 20)
    assert isinstance(usb.memory.translation, FlatTranslation) and isinstance(kfd.memory.translation, FlatTranslation)
    assert [(m.va, m.nbytes) for m in usb.memory.translation.mappings] == [(0, 16 << 20)]
    assert kfd.memory.translation.mappings == ()
    kfd.map_memory(0x7F00_0000_0000, kfd.vram[0x10000:0x20000])
    kfd.write(0x7F00_0000_0010, b"kfd!")
    assert bytes(kfd.vram[0x10010:0x10014]) == b"kfd!" and bytes(kfd.read(0x7F00_0000_0010, 4)) == b"kfd!"
