"""The SDMA engine: every packet of the spec table, polls and hangs, stops with reasons."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.system_bus import FakePcie

from tinyhil.amdgpu import (
    sdma_const_fill,
    sdma_copy_linear,
    sdma_fence,
    sdma_header,
    sdma_indirect,
    sdma_nop,
    sdma_poll_regmem,
    sdma_timestamp,
    sdma_trap,
    sdma_write,
)
from tinyhil.emulators.amdgpu import AmdGpu, GpuQueueError, Interrupt, InterruptKind, QueueKind, QueueStatus
from tinyhil.emulators.amdgpu.model_choices import ErrorCode
from tinyhil.emulators.kernel import EventKernel, VirtualTimeout
from tinyhil.spec.amdgpu import POLL_INTERVAL_CYCLES, POLL_RETRY_FOREVER, SYS_APERTURE, CompareFunction
from tinyhil.spec.amdgpu_sdma import FillSize, SdmaOp

DATA = 0x400000
WAIT_NS = 1_000_000_000


def _u32(gpu: AmdGpu, va: int) -> int:
    return int.from_bytes(gpu.read(va, 4), "little")


def _u64(gpu: AmdGpu, va: int) -> int:
    return int.from_bytes(gpu.read(va, 8), "little")


# --- each packet ---
def test_fence_writes_its_value(gpu: AmdGpu, sdma: Any) -> None:
    sdma.run(sdma_fence(DATA + 4, 0xCAFEF00D))
    assert _u32(gpu, DATA + 4) == 0xCAFEF00D
    assert _u32(gpu, DATA) == 0 and _u32(gpu, DATA + 8) == 0, "only the fence dword changes"


def test_write_places_its_dwords(gpu: AmdGpu, sdma: Any) -> None:
    values = np.arange(1, 100, dtype="<u4") * 0x01010101
    sdma.run(sdma_write(DATA + 0x40, values))
    assert np.array_equal(np.frombuffer(gpu.read(DATA + 0x40, values.nbytes), "<u4"), values)
    assert _u32(gpu, DATA + 0x3C) == 0 and _u32(gpu, DATA + 0x40 + values.nbytes) == 0


@pytest.mark.parametrize(("src", "dst", "nbytes"), [(0, 0x1000, 4096), (3, 0x2005, 1000), (0, 5, 200), (100, 0, 300)])
def test_copy_linear_is_a_memmove(gpu: AmdGpu, sdma: Any, src: int, dst: int, nbytes: int) -> None:
    pattern = np.random.default_rng(1).integers(0, 256, 0x4000, dtype=np.uint8)
    gpu.write(DATA, pattern)
    sdma.run(sdma_copy_linear(DATA + dst, DATA + src, nbytes))
    expected = bytearray(pattern.tobytes())
    expected[dst : dst + nbytes] = expected[src : src + nbytes]
    assert bytes(gpu.read(DATA, len(expected))) == bytes(expected)


@pytest.mark.parametrize(
    ("fill_size", "data", "nbytes", "expected"),
    [
        (FillSize.DWORD, 0x11223344, 16, bytes.fromhex("44332211") * 4),
        (FillSize.BYTE, 0x1234_56AB, 7, b"\xab" * 7),
    ],
)
def test_const_fill_by_byte_and_by_dword(
    gpu: AmdGpu, sdma: Any, fill_size: FillSize, data: int, nbytes: int, expected: bytes
) -> None:
    sdma.run(sdma_const_fill(DATA + 8, data, nbytes, fill_size=fill_size))
    assert bytes(gpu.read(DATA, 8 + nbytes + 8)) == bytes(8) + expected + bytes(8)


def test_timestamps_follow_virtual_time_at_100_mhz(gpu: AmdGpu, kernel: EventKernel, sdma: Any) -> None:
    kernel.run_for(12_340)
    sdma.run(sdma_timestamp(DATA), sdma_nop(3), sdma_timestamp(DATA + 8), sdma_copy_linear(DATA + 0x100, 0, 0x10000))
    sdma.run(sdma_timestamp(DATA + 16))
    first, second, third = _u64(gpu, DATA), _u64(gpu, DATA + 8), _u64(gpu, DATA + 16)
    assert first == 1234, "the timestamp counts 10 ns ticks of virtual time"
    assert first < second < third
    assert third - second > 0x10000 * 1000 // gpu.timing.bytes_per_us // 10, "a 64 KB copy costs virtual time"


def test_nop_skips_its_count_dwords(gpu: AmdGpu, sdma: Any) -> None:
    nop = sdma_nop(2)
    nop[1:] = sdma_fence(DATA, 1)[:2]  # payload that would be a packet if it were not skipped
    sdma.run(nop, sdma_fence(DATA + 4, 2))
    assert (_u32(gpu, DATA), _u32(gpu, DATA + 4)) == (0, 2)


def test_indirect_runs_a_buffer_then_returns_to_the_ring(gpu: AmdGpu, sdma: Any) -> None:
    ib = np.concatenate([sdma_fence(DATA, 1), sdma_write(DATA + 4, [2, 3])])
    gpu.write(DATA + 0x1000, ib)
    sdma.run(sdma_indirect(DATA + 0x1000, ib.size), sdma_fence(DATA + 12, 4))
    assert [_u32(gpu, DATA + 4 * i) for i in range(4)] == [1, 2, 3, 4]


def test_indirect_buffers_do_not_nest(gpu: AmdGpu, sdma: Any) -> None:
    inner = sdma_fence(DATA, 1)
    gpu.write(DATA + 0x1000, inner)
    outer = sdma_indirect(DATA + 0x1000, inner.size)
    gpu.write(DATA + 0x2000, outer)
    with pytest.raises(GpuQueueError, match=r"INDIRECT: indirect buffers nest at most 1 deep at IB 0x402000"):
        sdma.run(sdma_indirect(DATA + 0x2000, outer.size))


def test_trap_raises_an_interrupt_with_its_context(sdma: Any, interrupts: list[Interrupt]) -> None:
    sdma.run(sdma_trap(0x1234))
    assert [(i.kind, i.context, i.queue_id) for i in interrupts] == [(InterruptKind.TRAP, 0x1234, sdma.device.id)]


# --- polls ---
FUNCTION_CASES = [
    (CompareFunction.ALWAYS, 5, 9, True),
    (CompareFunction.LESS, 5, 9, True),
    (CompareFunction.LESS, 9, 9, False),
    (CompareFunction.LESS_EQUAL, 9, 9, True),
    (CompareFunction.LESS_EQUAL, 10, 9, False),
    (CompareFunction.EQUAL, 9, 9, True),
    (CompareFunction.EQUAL, 8, 9, False),
    (CompareFunction.NOT_EQUAL, 8, 9, True),
    (CompareFunction.NOT_EQUAL, 9, 9, False),
    (CompareFunction.GREATER_EQUAL, 9, 9, True),
    (CompareFunction.GREATER_EQUAL, 8, 9, False),
    (CompareFunction.GREATER, 10, 9, True),
    (CompareFunction.GREATER, 9, 9, False),
]


@pytest.mark.parametrize(("function", "mem", "reference", "passes"), FUNCTION_CASES)
def test_poll_regmem_functions(
    gpu: AmdGpu, sdma: Any, function: CompareFunction, mem: int, reference: int, passes: bool
) -> None:
    gpu.write(DATA, (mem | 0xF00).to_bytes(4, "little"))  # bits outside the mask must not matter
    sdma.driver.submit(sdma_poll_regmem(DATA, reference, mask=0xFF, function=function), sdma_fence(DATA + 4, 1))
    if passes:
        sdma.driver.wait_idle()
        assert _u32(gpu, DATA + 4) == 1
    else:
        with pytest.raises(VirtualTimeout, match="waiting: POLL_REGMEM"):
            sdma.driver.wait_idle()
        assert sdma.device.waiting and _u32(gpu, DATA + 4) == 0


def test_a_forever_poll_is_released_by_a_later_host_write(gpu: AmdGpu, kernel: EventKernel, sdma: Any) -> None:
    sdma.driver.submit(sdma_poll_regmem(DATA, 7, interval=4), sdma_timestamp(DATA + 8))
    kernel.run_for(100_000)
    assert sdma.device.waiting and kernel.pending == 0, "a forever poll schedules no busy events while it waits"
    gpu.write(DATA, (7).to_bytes(4, "little"))
    sdma.driver.wait_idle()
    interval_ns = 4 * POLL_INTERVAL_CYCLES * gpu.timing.clock_ns
    released_ns = _u64(gpu, DATA + 8) * 10 - gpu.timing.packet_ns  # the timestamp runs one packet later
    assert released_ns % interval_ns == 0 and 100_000 <= released_ns < 100_000 + interval_ns, (
        "the poll notices the write at its next interval instant"
    )


def test_a_poll_that_never_holds_hangs_after_its_retries_in_virtual_time(
    gpu: AmdGpu, kernel: EventKernel, sdma: Any, interrupts: list[Interrupt]
) -> None:
    sdma.driver.submit(sdma_poll_regmem(DATA, 0x51000001, interval=4, retry_count=10))
    with pytest.raises(GpuQueueError, match=r"SDMA queue 0: queue hung: POLL_REGMEM on 0x400000") as info:
        sdma.driver.wait_idle()
    assert kernel.now_ns == 10 * 4 * POLL_INTERVAL_CYCLES * gpu.timing.clock_ns
    assert sdma.device.status == QueueStatus.HUNG and info.value.error_code == ErrorCode.POLL_TIMEOUT
    assert interrupts[-1].kind is InterruptKind.QUEUE_ERROR


def test_writes_elsewhere_do_not_release_a_poll(gpu: AmdGpu, kernel: EventKernel, sdma: Any) -> None:
    sdma.driver.submit(sdma_poll_regmem(DATA, 1, retry_count=POLL_RETRY_FOREVER))
    kernel.run_until_idle()
    gpu.write(DATA + 4, b"\x01\x00\x00\x00")
    kernel.run_until_idle()
    assert sdma.device.waiting


# --- stops carry a reason ---
def test_unknown_opcode_stops_the_queue_naming_opcode_queue_and_ring_offset(gpu: AmdGpu, sdma: Any) -> None:
    bad = np.array([0x7F], "<u4")
    with pytest.raises(GpuQueueError, match=r"SDMA queue 0: unknown SDMA opcode 0x7f .* at ring offset 0x10$"):
        sdma.run(sdma_fence(DATA, 1), bad, sdma_fence(DATA + 4, 2))
    queue = sdma.device
    assert queue.status == QueueStatus.PACKET_ERROR and queue.error_code == ErrorCode.UNKNOWN_OPCODE
    assert (queue.error_rptr, queue.rptr, queue.error_opcode) == (0x10, 0x10, 0x7F)
    assert _u32(gpu, DATA + 4) == 0, "nothing after the bad packet runs"


def test_an_unmapped_access_is_a_memory_fault_not_a_crash(gpu: AmdGpu, sdma: Any, interrupts: list[Interrupt]) -> None:
    bad_va = 0x7_0000_0000
    with pytest.raises(GpuQueueError, match=r"GPU memory fault at 0x700000000\+0x4: no mapping .* in FENCE"):
        sdma.run(sdma_fence(bad_va, 1))
    assert sdma.device.status == QueueStatus.MEMORY_FAULT and sdma.device.fault_va == bad_va
    assert interrupts[-1].kind is InterruptKind.MEMORY_FAULT and interrupts[-1].fault_va == bad_va


def test_a_copy_that_faults_writes_nothing(gpu: AmdGpu, sdma: Any) -> None:
    gpu.write(DATA, b"\x55" * 64)
    with pytest.raises(GpuQueueError, match="memory fault"):
        sdma.run(sdma_copy_linear(DATA, gpu.vram_bytes - 32, 64))
    assert bytes(gpu.read(DATA, 64)) == b"\x55" * 64


@pytest.mark.parametrize(
    "packet",
    [
        sdma_const_fill(SYS_APERTURE + 0x200000, 0, 1 << 32),  # 4 GB into 512 KB of SRAM
        sdma_const_fill(SYS_APERTURE + 0x27FFFC, 0, 1 << 32, fill_size=FillSize.BYTE),
        sdma_copy_linear(SYS_APERTURE + 0x200000, 0, 1 << 30),  # 1 GB of VRAM (not there either) into SRAM
    ],
    ids=["dword-fill", "byte-fill", "copy"],
)
def test_a_transfer_past_the_bridge_memory_faults_before_host_memory_is_allocated_for_it(packet: np.ndarray) -> None:
    bus = FakePcie()  # the bridge's SRAM
    gpu = AmdGpu(EventKernel(), vram_bytes=16 << 20, system_bus=bus)
    queue = gpu.create_queue(QueueKind.SDMA, ring_va=0x100000, ring_bytes=0x1000, rptr_va=0x1000, wptr_va=0x1008,
                             doorbell_index=0)  # fmt: skip
    ring = np.concatenate([packet, sdma_fence(SYS_APERTURE + 0x200000, 7)])
    gpu.write(0x100000, ring)
    gpu.write(0x1008, ring.nbytes.to_bytes(8, "little"))
    tracemalloc.start()
    try:
        gpu.ring_doorbell(0, ring.nbytes)
        gpu.kernel.run_until_idle()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert queue.status == QueueStatus.MEMORY_FAULT and queue.error_rptr == 0, queue.describe()
    assert peak < 1 << 20, f"{peak:#x} bytes allocated on the host for a transfer that faults"
    assert not any(bus.memory), "nothing was written, and the fence after the packet did not run"


@pytest.mark.parametrize(
    ("packet", "message"),
    [
        (sdma_header(SdmaOp.COPY_LINEAR, 1), "COPY_LINEAR: sub-op 1 is not modelled"),
        (sdma_header(SdmaOp.TIMESTAMP, 0), "TIMESTAMP: sub-op 0 is not modelled"),
        (sdma_header(SdmaOp.WRITE, 1), "WRITE: sub-op 1 is not modelled"),
        (sdma_header(SdmaOp.POLL_REGMEM), "mem_poll=0 .register poll. is not modelled"),
        (sdma_header(SdmaOp.POLL_REGMEM) | 1 << 31 | 7 << 28, "function=7, expected 0..6"),
        (sdma_header(SdmaOp.CONST_FILL) | 1 << 30, "fill_size=1, expected 0 .byte. or 2 .dword."),
        (sdma_header(SdmaOp.FENCE), "fence address=0x2, expected a multiple of 4"),
    ],
)
def test_malformed_packets_stop_with_a_reason(sdma: Any, packet: int, message: str) -> None:
    body = np.array([packet, 2, 0, 0, 0, 0, 0], "<u4")  # DW1 = 2: a misaligned address for FENCE
    with pytest.raises(GpuQueueError, match=message):
        sdma.run(body)
    assert sdma.device.error_code == ErrorCode.BAD_PACKET


def test_a_packet_longer_than_the_ring_is_an_error_not_a_wait(make_queue: Callable[..., Any]) -> None:
    small = make_queue(QueueKind.SDMA, ring_bytes=256)
    with pytest.raises(GpuQueueError, match="NOP packet of 1000 dwords is longer than the 0x100-byte ring"):
        small.run(np.array([sdma_header(SdmaOp.NOP) | 999 << 16], "<u4"))


def test_an_incomplete_packet_waits_for_the_rest(gpu: AmdGpu, kernel: EventKernel, sdma: Any) -> None:
    fence = sdma_fence(DATA, 9)
    sdma.driver.submit(fence[:2])
    kernel.run_until_idle()
    assert not sdma.device.stopped and "waiting for the rest of a FENCE packet" in sdma.device.describe()
    sdma.run(fence[2:])
    assert _u32(gpu, DATA) == 9


def test_packets_wrap_around_the_end_of_the_ring(gpu: AmdGpu, make_queue: Callable[..., Any]) -> None:
    small = make_queue(QueueKind.SDMA, ring_bytes=256)
    for round_ in range(20):  # 20 x 40 bytes: the ring wraps several times, packets straddle its end
        small.run(sdma_write(DATA + 8 * round_, [round_, ~round_ & 0xFFFFFFFF]), sdma_fence(DATA + 0x800, round_))
    words = np.frombuffer(gpu.read(DATA, 160), "<u4").reshape(20, 2)
    assert [tuple(w) for w in words] == [(r, ~r & 0xFFFFFFFF) for r in range(20)]
    assert small.device.rptr == 20 * 40 and small.driver.read_rptr() == 20 * 40


def test_a_write_pointer_behind_the_read_pointer_stops_the_queue(gpu: AmdGpu, sdma: Any) -> None:
    sdma.run(sdma_fence(DATA, 1))
    gpu.write(sdma.driver.wptr_va, (4).to_bytes(8, "little"))
    gpu.ring_doorbell(sdma.driver.doorbell_index, 4)
    gpu.kernel.run_until_idle()
    with pytest.raises(GpuQueueError, match=r"write pointer 0x4 .* is unusable: read pointer 0x10"):
        sdma.device.check()
    assert sdma.device.error_code == ErrorCode.BAD_WPTR
