"""Fuzz the SDMA and PM4 engines with rings nobody would write: raw headers with random fields, huge counts and sizes,
addresses in VRAM, in the bridge's SRAM (the system aperture of the USB path), past it and nowhere, random write
pointers, and indirect buffers of random dwords.

``test_random_rings.py`` drives the engines with packets from the reference builders (whose arguments are checked);
this file skips the builders, so every field takes any value the hardware could be handed. Each example must end in
one of the outcomes the engines define: the ring runs (idle, or waiting on a poll or for the rest of a packet), or
the queue stops with a typed reason (an error code, a message naming the queue, ``GpuQueueError`` from ``check()``).
Never a Python exception out of the engine, and never unbounded host work: the event kernel gets a budget of steps
(a count, not a time), and the host memory allocated while the ring runs is bounded (``tracemalloc``), so a 4 GB
fill or a 1 GB copy must fault without the host allocating it.
"""

from __future__ import annotations

import tracemalloc
from typing import TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.engine_queues import check_queue_outcome
from support.system_bus import FakePcie

from tinyhil.emulators.amdgpu import AmdGpu, QueueKind
from tinyhil.emulators.kernel import EventKernel
from tinyhil.spec.amdgpu import SYS_APERTURE
from tinyhil.spec.amdgpu_pm4 import PM4_HEADER_COUNT, PM4_TYPE_3, Pm4Op, ShReg
from tinyhil.spec.amdgpu_sdma import SdmaOp
from tinyhil.spec.asm2464 import PCIE_SRAM_BASE, SRAM_BYTES

pytestmark = pytest.mark.fuzz
T = TypeVar("T")

VRAM_BYTES = 4 << 20
# The ring and its pointers sit in host memory mapped far above VRAM (as KFD's userptr rings do), out of reach of
# the random fills and copies, so most examples get past their first packet; IBs are in VRAM.
HOST_VA = 0x10_0000_0000
RING_VA, RING_BYTES, POINTERS_VA = HOST_VA, 0x1000, HOST_VA + 0x1000
IB_VA, IB_BYTES = 0x100000, 0x4000
STEP_BUDGET = 20_000  # engine steps: every step consumes a packet, so a ring of <= 1024 dwords needs far fewer
HOST_BYTES_BUDGET = 16 << 20  # allocated at once while a ring runs (the packets themselves are at most 16 KB)


u32s = st.integers(0, 2**32 - 1)


def mostly(likely: st.SearchStrategy[T], anything: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """``likely`` (a value the engine accepts) four times in five, else ``anything`` (whatever the bits can hold)."""
    return st.tuples(st.integers(0, 4), likely, anything).map(lambda drawn: drawn[1] if drawn[0] else drawn[2])


# Addresses: VRAM, the IB region, the bridge's SRAM and just around it, the aperture's far end, unmapped, anything.
addresses = st.one_of(
    st.integers(0, VRAM_BYTES // 8 - 1).map(lambda i: 8 * i),
    st.integers(IB_VA // 8, (IB_VA + IB_BYTES) // 8).map(lambda i: 8 * i),
    st.integers(SYS_APERTURE + PCIE_SRAM_BASE - 8, SYS_APERTURE + PCIE_SRAM_BASE + SRAM_BYTES + 8).map(
        lambda a: a & ~3
    ),
    st.sampled_from([VRAM_BYTES - 4, VRAM_BYTES, SYS_APERTURE, 2 * SYS_APERTURE - 4, 1 << 47, 2**64 - 4]),
    st.integers(0, 2**64 - 1),
)
# Counts and sizes: small, around the limits of their fields (huge), and anything.
counts = st.one_of(
    st.integers(0, 64),
    st.integers(0, 64),
    st.sampled_from([0x3FFF, 0xFFFFF, (1 << 30) - 1, 1 << 30, 0xFFFF_FFFF, 0x7FFF_FFFF]),
    u32s,
)


def lo_hi(va: int) -> list[int]:
    return [va & 0xFFFF_FFFF, va >> 32]


def _sdma(op: SdmaOp, sub_op: int, high: int, *fields: int | list[int]) -> list[int]:
    dwords = [field for item in fields for field in (item if isinstance(item, list) else [item])]
    return [int(op) | (sub_op & 0xFF) << 8 | (high & 0xFFFF) << 16, *dwords]


sub_ops = mostly(st.just(0), st.integers(0, 0xFF))
sdma_packets = st.one_of(
    st.builds(lambda n, body: _sdma(SdmaOp.NOP, 0, n, body[:n]), mostly(st.integers(0, 8), counts), st.lists(u32s)),
    st.builds(
        lambda sub, count, src, dst: _sdma(SdmaOp.COPY_LINEAR, sub, 0, count, 0, lo_hi(src), lo_hi(dst)),
        sub_ops,
        counts,
        addresses,
        addresses,
    ),
    st.builds(
        lambda sub, dst, count, data: _sdma(SdmaOp.WRITE, sub, 0, lo_hi(dst), count, data),
        sub_ops,
        addresses,
        mostly(st.integers(0, 7), counts),
        st.lists(u32s, max_size=8),
    ),
    st.builds(lambda ib, size: _sdma(SdmaOp.INDIRECT, 0, 0, lo_hi(ib), size, 0, 0), addresses, counts),
    st.builds(lambda dst, value: _sdma(SdmaOp.FENCE, 0, 0, lo_hi(dst), value), addresses, u32s),
    st.builds(lambda context: _sdma(SdmaOp.TRAP, 0, 0, context), u32s),
    st.builds(
        lambda high, va, ref, mask, dw5: _sdma(SdmaOp.POLL_REGMEM, 0, high, lo_hi(va), ref, mask, dw5),
        mostly(st.integers(0, 6).map(lambda f: 0x8000 | f << 12), st.integers(0, 0xFFFF)),
        addresses,
        st.integers(0, 4),
        mostly(st.sampled_from([0xFFFF_FFFF, 1, 0]), u32s),
        mostly(st.tuples(st.integers(0, 20), st.sampled_from([0, 3, 0xFFF])).map(lambda p: p[0] | p[1] << 16), u32s),
    ),
    st.builds(
        lambda size, dst, data, count: _sdma(SdmaOp.CONST_FILL, 0, size << 14, lo_hi(dst), data, count),
        mostly(st.sampled_from([0, 2]), st.integers(0, 3)),
        addresses,
        u32s,
        counts,
    ),
    st.builds(
        lambda sub, dst: _sdma(SdmaOp.TIMESTAMP, sub, 0, lo_hi(dst)),
        mostly(st.just(2), st.integers(0, 0xFF)),
        addresses,
    ),
)


def _pm4(opcode: Pm4Op, body: list[int], count: int | None = None) -> list[int]:
    """A type-3 header (``count``: body dwords - 1, by default the body's own), then the body."""
    size = len(body) - 1 if count is None else count
    return [PM4_TYPE_3 << 30 | (size & PM4_HEADER_COUNT.max_value) << 16 | int(opcode) << 8, *body]


body_counts: st.SearchStrategy[int | None] = mostly(st.none(), st.one_of(st.integers(0, 8), counts))
pm4_packets = st.one_of(
    st.builds(lambda body, n: _pm4(Pm4Op.NOP, body, n), st.lists(u32s, min_size=1, max_size=8), body_counts),
    st.builds(
        lambda control, va, value, ctx, n: _pm4(Pm4Op.RELEASE_MEM, [0, control, *lo_hi(va), *lo_hi(value), ctx], n),
        mostly(st.tuples(st.integers(0, 3), st.integers(0, 2)).map(lambda p: p[0] << 29 | p[1] << 24), u32s),
        addresses,
        st.integers(0, 2**64 - 1),
        u32s,
        body_counts,
    ),
    st.builds(
        lambda control, va, ref, mask, interval, n: _pm4(
            Pm4Op.WAIT_REG_MEM, [control, *lo_hi(va), ref, mask, interval], n
        ),
        mostly(st.integers(0, 6).map(lambda f: 1 << 4 | f), u32s),
        addresses,
        st.integers(0, 4),
        mostly(st.sampled_from([0xFFFF_FFFF, 1]), u32s),
        st.integers(0, 20),
        body_counts,
    ),
    st.builds(
        lambda ib, size, n: _pm4(Pm4Op.INDIRECT_BUFFER, [*lo_hi(ib), size | 1 << 23], n),
        addresses,
        mostly(st.integers(0, 64), st.integers(0, 0xFFFFF)),
        body_counts,
    ),
    st.builds(
        lambda control, va, data, n: _pm4(Pm4Op.WRITE_DATA, [control, *lo_hi(va), *data], n),
        mostly(st.just(5 << 8), u32s),
        addresses,
        st.lists(u32s, min_size=1, max_size=8),
        body_counts,
    ),
    st.builds(
        lambda reg, values, n: _pm4(Pm4Op.SET_SH_REG, [reg, *values], n),
        mostly(st.sampled_from([int(r) - 0x2C00 for r in ShReg]), st.integers(0, 0xFFFF)),
        st.lists(st.one_of(st.integers(0, 4), u32s), min_size=1, max_size=4),
        body_counts,
    ),
    st.builds(lambda body, n: _pm4(Pm4Op.ACQUIRE_MEM, body, n), st.lists(u32s, min_size=7, max_size=7), body_counts),
    st.builds(
        lambda grid, n: _pm4(Pm4Op.DISPATCH_DIRECT, [*grid, 1], n),
        st.lists(st.one_of(st.integers(0, 3), counts), min_size=3, max_size=3),
        body_counts,
    ),
)
# A launch whose registers are random: program and argument addresses, workgroup sizes and a grid of any size.
pm4_launches = st.builds(
    lambda program, size, args, grid: [
        *_pm4(Pm4Op.SET_SH_REG, [ShReg.COMPUTE_PGM_LO - 0x2C00, *lo_hi(program >> 8)]),
        *_pm4(Pm4Op.SET_SH_REG, [ShReg.COMPUTE_NUM_THREAD_X - 0x2C00, *size]),
        *_pm4(Pm4Op.SET_SH_REG, [ShReg.COMPUTE_USER_DATA_0 - 0x2C00, *lo_hi(args)]),
        *_pm4(Pm4Op.DISPATCH_DIRECT, [*grid, 1]),
    ],
    addresses,
    st.lists(mostly(st.integers(1, 64), st.integers(0, 0xFFFF)), min_size=3, max_size=3),
    addresses,
    st.lists(st.one_of(st.integers(0, 3), counts), min_size=3, max_size=3),
)


def rings(packets: st.SearchStrategy[list[int]]) -> st.SearchStrategy[list[int]]:
    chunk = st.one_of(packets, packets, packets, st.lists(u32s, min_size=1, max_size=4))
    return st.lists(chunk, min_size=1, max_size=30).map(lambda c: [d for p in c for d in p][: RING_BYTES // 4])


# The write pointer the host publishes: mostly the end of the ring's contents (None), sometimes any value.
write_pointers: st.SearchStrategy[int | None] = mostly(
    st.none(), st.one_of(st.integers(0, 8), st.integers(0, 2**64 - 1))
)


def run(kind: QueueKind, ring: list[int], ib: list[int], wptr: int | None) -> None:
    bus = FakePcie()  # the bridge's SRAM
    gpu = AmdGpu(EventKernel(seed=0), vram_bytes=VRAM_BYTES, system_bus=bus)
    gpu.map_memory(HOST_VA, memoryview(bytearray(0x2000)))
    queue = gpu.create_queue(kind, ring_va=RING_VA, ring_bytes=RING_BYTES, rptr_va=POINTERS_VA,
                             wptr_va=POINTERS_VA + 8, doorbell_index=0)  # fmt: skip
    gpu.write(IB_VA, np.array(ib, "<u4")[: IB_BYTES // 4]) if ib else None
    gpu.write(RING_VA, np.array(ring, "<u4"))
    end = len(ring) * 4 // kind.unit_bytes if wptr is None else wptr
    gpu.write(POINTERS_VA + 8, end.to_bytes(8, "little"))
    tracemalloc.start()
    try:
        gpu.ring_doorbell(0, end)
        for _ in range(STEP_BUDGET):
            if not gpu.kernel.step():
                break
        else:
            pytest.fail(f"the engine still runs after {STEP_BUDGET} steps: {queue.describe()}")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < HOST_BYTES_BUDGET, f"{peak:#x} bytes of host memory for a {len(ring)}-dword ring"
    check_queue_outcome(queue)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(ring=rings(sdma_packets), ib=rings(sdma_packets), wptr=write_pointers)
def test_sdma_rings_with_random_fields_run_or_stop_with_a_reason(
    ring: list[int], ib: list[int], wptr: int | None
) -> None:
    run(QueueKind.SDMA, ring, ib, wptr)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(ring=rings(st.one_of(pm4_packets, pm4_launches)), ib=rings(pm4_packets), wptr=write_pointers)
def test_pm4_rings_with_random_fields_run_or_stop_with_a_reason(
    ring: list[int], ib: list[int], wptr: int | None
) -> None:
    run(QueueKind.COMPUTE, ring, ib, wptr)
