"""Bad input: rings of random dwords and randomly corrupted packets, for the SDMA and the PM4 engine.

The engines must never crash the process, never write outside mapped memory (VRAM outside the mapped slices is
checked byte for byte), and every stop must carry a reason.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.engine_queues import check_queue_outcome

from tinyhil.amdgpu import (
    pm4_acquire_mem,
    pm4_dispatch_direct,
    pm4_indirect_buffer,
    pm4_nop,
    pm4_release_mem,
    pm4_set_sh_reg,
    pm4_wait_reg_mem,
    pm4_write_data,
    sdma_const_fill,
    sdma_copy_linear,
    sdma_fence,
    sdma_indirect,
    sdma_nop,
    sdma_poll_regmem,
    sdma_timestamp,
    sdma_trap,
    sdma_write,
)
from tinyhil.emulators.amdgpu import AmdGpu, QueueKind
from tinyhil.emulators.kernel import EventKernel
from tinyhil.spec.amdgpu import CompareFunction
from tinyhil.spec.amdgpu_pm4 import ReleaseMemDataSel, ReleaseMemIntSel, ShReg

VRAM_BYTES = 4 << 20
RING_VA, TARGET_VA, POINTERS_VA = 0x10_0000_0000, 0x20_0000_0000, 0x30_0000_0000
RING_BYTES, TARGET_BYTES, POINTER_BYTES = 0x1000, 0x10000, 0x1000
# (GPU address, VRAM offset, size) of the three mapped slices
SLICES = ((RING_VA, 0x10000, RING_BYTES), (TARGET_VA, 0x40000, TARGET_BYTES), (POINTERS_VA, 0x80000, POINTER_BYTES))
FILLER = 0xA5


def fuzz_gpu() -> tuple[AmdGpu, Callable[[], None]]:
    """A KFD-style GPU with three VRAM slices mapped; returns a check that VRAM outside them still holds filler."""
    gpu = AmdGpu(EventKernel(seed=0), vram_bytes=VRAM_BYTES, vram_at_zero=False)
    vram = np.frombuffer(gpu.vram, np.uint8)
    vram[:] = FILLER
    for va, phys, size in SLICES:
        vram[phys : phys + size] = 0
        gpu.map_memory(va, gpu.vram[phys : phys + size])

    def untouched() -> None:
        outside = vram.copy()
        for _, phys, size in SLICES:
            outside[phys : phys + size] = FILLER
        assert np.all(outside == FILLER), "an engine wrote VRAM outside every mapping"

    return gpu, untouched


u32s = st.integers(0, 2**32 - 1)
# Addresses inside the mapped slices (mostly) and outside them, 8-byte aligned so every builder accepts them.
in_target = st.integers(0, TARGET_BYTES // 8 - 1).map(lambda i: TARGET_VA + 8 * i)
addresses = st.one_of(
    in_target,
    in_target,
    in_target,
    st.integers(0, RING_BYTES // 8 - 1).map(lambda i: RING_VA + 8 * i),
    st.sampled_from([0, POINTERS_VA, TARGET_VA + TARGET_BYTES - 8, TARGET_VA + TARGET_BYTES, 0x7FFF_0000_0000]),
)
sizes = st.one_of(st.integers(1, 0x100), st.integers(1, 0x3000))
functions = st.sampled_from(CompareFunction)

sdma_packets = st.one_of(
    st.builds(sdma_fence, addresses, u32s),
    st.builds(sdma_write, addresses, st.lists(u32s, min_size=1, max_size=8)),
    st.builds(sdma_copy_linear, addresses, addresses, sizes),
    st.builds(sdma_const_fill, addresses, u32s, sizes.map(lambda n: n * 4)),
    st.builds(sdma_timestamp, addresses),
    st.builds(
        sdma_poll_regmem,
        addresses,
        st.integers(0, 3),
        mask=st.sampled_from([0xFFFFFFFF, 1, 0]),
        function=functions,
        interval=st.integers(0, 20),
        retry_count=st.sampled_from([0, 3, 0xFFF]),
    ),
    st.builds(sdma_trap, u32s),
    st.builds(sdma_nop, st.integers(0, 3)),
    st.builds(sdma_indirect, addresses, st.integers(0, 64)),
)

pm4_packets = st.one_of(
    st.builds(pm4_nop, st.integers(0, 3)),
    st.builds(pm4_write_data, addresses, st.lists(u32s, min_size=1, max_size=8)),
    st.builds(
        pm4_release_mem,
        addresses,
        st.integers(0, 2**32 - 1),
        data_sel=st.sampled_from(ReleaseMemDataSel),
        int_sel=st.sampled_from(ReleaseMemIntSel),
    ),
    st.builds(pm4_wait_reg_mem, addresses, st.integers(0, 3), function=functions, interval=st.integers(0, 20)),
    st.builds(pm4_indirect_buffer, addresses, st.integers(0, 64)),
    st.builds(pm4_acquire_mem),
    st.builds(pm4_set_sh_reg, st.sampled_from(ShReg), st.lists(st.one_of(u32s, st.integers(0, 4)), min_size=1)),
    st.builds(pm4_dispatch_direct, st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2))),
)


def _corrupt(drawn: tuple[np.ndarray, int, int]) -> list[int]:
    packet, index, value = drawn
    dwords = [int(d) for d in packet]
    dwords[index % len(dwords)] = value
    return dwords


def rings(packets: st.SearchStrategy[np.ndarray]) -> st.SearchStrategy[list[int]]:
    """Ring contents: valid packets with random fields, raw random dwords, and packets with one dword corrupted."""
    valid = packets.map(lambda p: [int(d) for d in p])
    chunk = st.one_of(
        valid,
        valid,
        valid,
        st.lists(st.one_of(u32s, st.integers(0, 64)), min_size=1, max_size=3),
        st.tuples(packets, st.integers(0, 10), u32s).map(_corrupt),
    )
    ring_dwords = RING_BYTES // 4
    return st.lists(chunk, min_size=2, max_size=60).map(lambda c: list(itertools.chain(*c))[:ring_dwords])


def run_ring(kind: QueueKind, dwords: list[int]) -> None:
    gpu, untouched = fuzz_gpu()
    queue = gpu.create_queue(
        kind, ring_va=RING_VA, ring_bytes=RING_BYTES, rptr_va=POINTERS_VA, wptr_va=POINTERS_VA + 8, doorbell_index=0
    )
    gpu.write(RING_VA, np.array(dwords, "<u4"))
    wptr = len(dwords) * 4 // kind.unit_bytes
    gpu.write(POINTERS_VA + 8, wptr.to_bytes(8, "little"))
    gpu.ring_doorbell(0, wptr)
    gpu.kernel.run_until_idle()
    check_queue_outcome(queue)
    untouched()


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(dwords=rings(sdma_packets))
def test_random_sdma_rings_never_crash_and_never_write_outside_mappings(dwords: list[int]) -> None:
    run_ring(QueueKind.SDMA, dwords)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(dwords=rings(pm4_packets))
def test_random_pm4_rings_never_crash_and_never_write_outside_mappings(dwords: list[int]) -> None:
    run_ring(QueueKind.COMPUTE, dwords)
