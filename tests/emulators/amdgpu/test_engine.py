"""What the engines share (engine.py): live views of the ring that follow remapping, a poll that holds its
decoded packet while it waits, and runs of NOPs skipped in one step with the virtual time of one at a time."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyhil.amdgpu import (
    pm4_header,
    pm4_indirect_buffer,
    pm4_nop,
    pm4_release_mem,
    pm4_write_data,
    sdma_fence,
    sdma_indirect,
    sdma_nop,
    sdma_poll_regmem,
    sdma_timestamp,
    sdma_trap,
)
from tinyhil.emulators.amdgpu import AmdGpu, Interrupt, QueueKind, QueueStatus
from tinyhil.emulators.kernel import EventKernel
from tinyhil.spec.amdgpu import POLL_RETRY_FOREVER, TIMESTAMP_PERIOD_NS
from tinyhil.spec.amdgpu_pm4 import Pm4Op, ReleaseMemDataSel, ReleaseMemIntSel
from tinyhil.spec.amdgpu_sdma import SdmaPollRegmemDw

DATA = 0x400000
HOST_RING_VA = 0x10_0000_0000
RING_BYTES = 0x10000


def _u32(gpu: AmdGpu, va: int) -> int:
    return int.from_bytes(gpu.read(va, 4), "little")


def test_a_ring_remapped_under_a_live_queue_is_fetched_from_its_new_backing(
    gpu: AmdGpu, make_queue: Callable[..., Any]
) -> None:
    first = bytearray(RING_BYTES)
    gpu.map_memory(HOST_RING_VA, memoryview(first))
    sdma = make_queue(QueueKind.SDMA, ring_va=HOST_RING_VA, ring_bytes=RING_BYTES)
    sdma.run(sdma_fence(DATA, 1))  # the engine has read this ring through its backing
    second = bytearray(first)
    gpu.unmap_memory(HOST_RING_VA)
    gpu.map_memory(HOST_RING_VA, memoryview(second))
    sdma.run(sdma_fence(DATA + 4, 2))
    assert (_u32(gpu, DATA), _u32(gpu, DATA + 4)) == (1, 2)
    fence_bytes = sdma_fence(0, 0).nbytes
    assert not any(first[fence_bytes:]), "the second packet went to the new backing only"


def test_a_waiting_poll_rechecks_the_memory_not_its_packet(gpu: AmdGpu, kernel: EventKernel, sdma: Any) -> None:
    sdma.driver.submit(sdma_poll_regmem(DATA, 1, retry_count=POLL_RETRY_FOREVER), sdma_fence(DATA + 4, 9))
    kernel.run_until_idle()
    assert sdma.device.waiting
    # The engine fetched and decoded the poll before it began to wait (as the hardware does): rewriting the packet
    # in the ring now changes nothing, and the next check compares memory with the reference it already holds.
    reference_va = sdma.device.config.ring_va + 4 * SdmaPollRegmemDw.REFERENCE
    gpu.write(reference_va, (2).to_bytes(4, "little"))
    gpu.write(DATA, (1).to_bytes(4, "little"))
    sdma.driver.wait_idle()
    assert _u32(gpu, DATA + 4) == 9


# --- NOP runs: one step, the same state and virtual time as one NOP at a time ---
NOP_VRAM_BYTES = 1 << 20
NOP_RING, NOP_RING_BYTES, NOP_POINTERS = 0x10000, 0x4000, 0x1000
NOP_IB, NOP_DATA = 0x20000, 0x40000
NOP_IB_AT_END = NOP_VRAM_BYTES - 0x40  # an IB whose last dwords lie past VRAM
NOP_UNMAPPED = 0x7_0000_0000

u32s = st.integers(0, 2**32 - 1)
slots = st.integers(0, 0x1FF)


def _sdma_counted_nop(body: list[int]) -> list[int]:
    return [int(sdma_nop(len(body))[0]), *body]


def _pm4_counted_nop(body: list[int]) -> list[int]:
    return [int(pm4_header(Pm4Op.NOP, len(body))), *body]


def _chunks(kind: QueueKind, *, with_ibs: bool) -> st.SearchStrategy[list[int]]:
    """Pieces of a ring or IB: runs of header-only NOPs, NOPs with random bodies, packets that write memory or read
    the clock, indirect buffers (mapped, running past VRAM, unmapped) and stray dwords."""
    if kind is QueueKind.SDMA:
        header_only = st.integers(0, 2**32 - 1).map(lambda d: d & 0xC000_FF00)  # op 0, count 0, any sub-op
        counted = st.lists(u32s, min_size=1, max_size=40).map(_sdma_counted_nop)
        packets = [
            st.builds(lambda i: sdma_timestamp(NOP_DATA + 8 * i), slots),
            st.builds(lambda i, v: sdma_fence(NOP_DATA + 0x1000 + 4 * i, v), slots, u32s),
            st.builds(sdma_trap, u32s),
        ]
        indirect = st.builds(
            sdma_indirect, st.sampled_from([NOP_IB, NOP_IB + 0x400, NOP_IB_AT_END, NOP_UNMAPPED]), st.integers(0, 600)
        )
    else:
        header_only = st.just(int(pm4_nop()[0]))
        counted = st.lists(u32s, min_size=1, max_size=40).map(_pm4_counted_nop)
        timestamp = ReleaseMemDataSel.TIMESTAMP
        packets = [
            st.builds(lambda i: pm4_release_mem(NOP_DATA + 8 * i, data_sel=timestamp), slots),
            st.builds(lambda i, v: pm4_write_data(NOP_DATA + 0x1000 + 4 * i, [v]), slots, u32s),
            st.builds(lambda c: pm4_release_mem(NOP_DATA, 0, int_sel=ReleaseMemIntSel.INTERRUPT, ctx_id=c), u32s),
        ]
        indirect = st.builds(
            pm4_indirect_buffer,
            st.sampled_from([NOP_IB, NOP_IB + 0x400, NOP_IB_AT_END, NOP_UNMAPPED]),
            st.integers(0, 600),
        )
    runs = st.tuples(header_only, st.integers(1, 300)).map(lambda run: [run[0]] * run[1])
    choices = [runs, runs, counted, *(p.map(lambda a: [int(d) for d in a]) for p in packets)]
    choices.append(st.lists(u32s, min_size=1, max_size=2))
    if with_ibs:
        choices.append(indirect.map(lambda a: [int(d) for d in a]))
    return st.lists(st.one_of(choices), max_size=40).map(lambda c: list(itertools.chain(*c)))


def _run_nops(kind: QueueKind, ring: list[int], ib: list[int], split: int, *, bulk: bool) -> tuple[object, ...]:
    gpu = AmdGpu(EventKernel(), vram_bytes=NOP_VRAM_BYTES, vram_at_zero=True)
    interrupts: list[Interrupt] = []
    gpu.on_interrupt = interrupts.append
    queue = gpu.create_queue(kind, ring_va=NOP_RING, ring_bytes=NOP_RING_BYTES, rptr_va=NOP_POINTERS,
                             wptr_va=NOP_POINTERS + 8, doorbell_index=0)  # fmt: skip
    queue.engine.bulk_nops = bulk
    gpu.write(NOP_IB, np.array(ib, "<u4")) if ib else None
    gpu.write(NOP_IB_AT_END, np.zeros(0x10, "<u4"))  # header-only SDMA NOPs up to the end of VRAM
    dwords = ring[: NOP_RING_BYTES // 4]
    gpu.write(NOP_RING, np.array(dwords, "<u4")) if dwords else None
    for end in sorted({min(split, len(dwords)), len(dwords)}):  # the host publishes the ring in two parts
        wptr = end * 4 // kind.unit_bytes
        gpu.write(NOP_POINTERS + 8, wptr.to_bytes(8, "little"))
        gpu.ring_doorbell(0, wptr)
        gpu.kernel.run_until_idle()
    engine = queue.engine
    seen = [(i.kind, i.time_ns, i.context, i.data, i.fault_va, i.message) for i in interrupts]
    state = (engine.rptr, engine.error_code, engine.error_rptr, engine.error_message, queue.describe())
    return hashlib.sha256(gpu.vram).hexdigest(), state, gpu.kernel.now_ns, seen


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), kind=st.sampled_from(QueueKind))
def test_a_nop_run_in_one_step_gives_the_state_and_timestamps_of_one_nop_at_a_time(
    data: st.DataObject, kind: QueueKind
) -> None:
    ib = data.draw(_chunks(kind, with_ibs=False), label="ib")
    ring = data.draw(_chunks(kind, with_ibs=True), label="ring")
    split = data.draw(st.integers(0, len(ring)), label="split")
    assert _run_nops(kind, ring, ib, split, bulk=True) == _run_nops(kind, ring, ib, split, bulk=False)


@pytest.mark.parametrize(
    ("kind", "nops"), [(QueueKind.SDMA, [0] * (1 << 20)), (QueueKind.COMPUTE, [int(pm4_nop()[0])] * ((1 << 20) - 1))]
)
def test_an_ib_of_a_million_nops_takes_a_few_engine_steps_and_the_full_virtual_time(
    kind: QueueKind, nops: list[int]
) -> None:
    gpu = AmdGpu(EventKernel(), vram_bytes=16 << 20, vram_at_zero=True)
    gpu.create_queue(kind, ring_va=NOP_RING, ring_bytes=NOP_RING_BYTES, rptr_va=NOP_POINTERS,
                     wptr_va=NOP_POINTERS + 8, doorbell_index=0)  # fmt: skip
    ib = 0x100000
    gpu.write(ib, np.array(nops, "<u4"))
    if kind is QueueKind.SDMA:
        stamps = [sdma_timestamp(NOP_DATA), sdma_indirect(ib, len(nops)), sdma_timestamp(NOP_DATA + 8)]
    else:
        stamp = ReleaseMemDataSel.TIMESTAMP
        stamps = [pm4_release_mem(NOP_DATA + 8 * i, data_sel=stamp) for i in (0, 1)]
        stamps.insert(1, pm4_indirect_buffer(ib, len(nops)))
    ring = np.concatenate(stamps)
    gpu.write(NOP_RING, ring)
    wptr = ring.nbytes // kind.unit_bytes
    gpu.write(NOP_POINTERS + 8, wptr.to_bytes(8, "little"))
    gpu.ring_doorbell(0, wptr)
    gpu.kernel.run_until_idle()
    assert gpu.kernel.events_run <= 6, "the IB's NOPs are one engine step, not one per NOP"
    ticks = int.from_bytes(gpu.read(NOP_DATA + 8, 8), "little") - int.from_bytes(gpu.read(NOP_DATA, 8), "little")
    assert ticks * TIMESTAMP_PERIOD_NS == (2 + len(nops)) * gpu.timing.packet_ns, "as if each NOP ran on its own"


def test_a_nop_run_stops_where_its_ib_becomes_unreadable_and_that_packet_faults() -> None:
    gpu = AmdGpu(EventKernel(), vram_bytes=NOP_VRAM_BYTES, vram_at_zero=True)
    queue = gpu.create_queue(QueueKind.SDMA, ring_va=NOP_RING, ring_bytes=NOP_RING_BYTES, rptr_va=NOP_POINTERS,
                             wptr_va=NOP_POINTERS + 8, doorbell_index=0)  # fmt: skip
    ib = NOP_VRAM_BYTES - 0x1000  # 1024 NOPs, then the IB runs past the end of VRAM
    ring = sdma_indirect(ib, 0x800)
    gpu.write(NOP_RING, ring)
    gpu.write(NOP_POINTERS + 8, ring.nbytes.to_bytes(8, "little"))
    gpu.ring_doorbell(0, ring.nbytes)
    gpu.kernel.run_until_idle()
    # One NOP at a time, the header prefetch (8 dwords) of the NOP 7 dwords before the end is the first to fault.
    assert queue.status == QueueStatus.MEMORY_FAULT, queue.describe()
    assert "in packet fetch at IB 0xff000 offset 0xfe4" in queue.error_message
    assert gpu.kernel.events_run < 40
