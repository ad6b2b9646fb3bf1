"""The stamped SDMA program of a copyin (and of a copyout) equals the one built packet by packet, and the chunk plans
follow the spec.

``copyin_program`` stamps full chunks from a template and patches the sentinel, destination and fence columns with
numpy; ``chunk_packets`` calls the packet builders. They must agree dword for dword for every size class (one
chunk, a short last chunk, a full window, many chunks), for both sentinel revisions and for ``seq`` at the 24-bit
wrap of the sentinel and the 32-bit wrap of the fence's low dword.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhil.align import ceil_div, round_up
from tinyhil.spec.amdgpu import SYS_APERTURE
from tinyhil.spec.asm2464 import CPL_RELEASE_OFFSET, PCIE_CQ_WINDOW, PCIE_SRAM_BASE, SECTOR_BYTES, WINDOW_BYTES
from tinyhil.spec.copyin import (
    CHUNK_BYTES,
    COPYOUT_PIECE_BYTES,
    FENCE_PCIE,
    NAIVE_CHUNK_BYTES,
    SECTOR_CHUNK_BYTES,
    SENTINEL_BYTES,
    sentinel,
    window_pcie,
)
from tinyhil.usbgpu.copy import CopyRevision, chunk_plans
from tinyhil.usbgpu.program import ChunkPlan, chunk_packets, copyin_program, copyout_packets, copyout_program

CHUNK = {CopyRevision.PIPELINED: CHUNK_BYTES, CopyRevision.SENTINEL_SECTOR: SECTOR_CHUNK_BYTES}
SENTINEL_REVISIONS = tuple(CHUNK)
POLL, COPY, WRITE = 6, 7, 6  # dwords of the three packets of a chunk


def spec_plans(revision: CopyRevision, nbytes: int, seq: int) -> list[ChunkPlan]:
    """The chunk plans as docs/copyin.md words them, written independently of the driver."""
    chunk = CHUNK[revision]
    plans = []
    for index in range(ceil_div(nbytes, chunk)):
        size = min(chunk, nbytes - index * chunk)
        if revision is CopyRevision.PIPELINED:  # [payload][zero pad][sentinel as the last dword]
            wire = round_up(size + SENTINEL_BYTES, SECTOR_BYTES)
            at = wire - SENTINEL_BYTES
        else:  # [payload padded to sectors][one 512 B sentinel sector]
            at = round_up(size, SECTOR_BYTES)
            wire = at + SECTOR_BYTES
        plans.append(ChunkPlan(index, seq + index, index * chunk, size, wire, at))
    return plans


def built(plans: list[ChunkPlan], dest_va: int) -> np.ndarray:
    return np.concatenate([packet for plan in plans for packet in chunk_packets(plan, dest_va)])


def sizes(revision: CopyRevision) -> list[int]:
    chunk = CHUNK[revision]
    return [1, 511, 512, chunk - 1, chunk, chunk + 1, 2 * chunk, 3 * chunk + 17, 7 * chunk]


SEQS = [0, 1, 0xFFFFFE, 0xFFFFFF, 0x1000000, 0xFFFF_FFFE, (1 << 62) + 0xFFFFFD]


@pytest.mark.parametrize("revision", SENTINEL_REVISIONS, ids=str)
@pytest.mark.parametrize("seq", SEQS, ids=hex)
def test_stamped_program_equals_the_built_one(revision: CopyRevision, seq: int) -> None:
    for nbytes in sizes(revision):
        for dest_va in (0x400000, 0x400001, 0x1_2345_6789):
            plans = spec_plans(revision, nbytes, seq)
            stamped = copyin_program(plans, dest_va)
            assert stamped.dtype == np.dtype("<u4")
            np.testing.assert_array_equal(stamped, built(plans, dest_va), err_msg=f"{nbytes=:#x} {dest_va=:#x}")


@pytest.mark.parametrize("revision", SENTINEL_REVISIONS, ids=str)
@pytest.mark.parametrize("seq", SEQS, ids=hex)
def test_driver_plans_follow_the_spec(revision: CopyRevision, seq: int) -> None:
    for nbytes in sizes(revision):
        assert chunk_plans(revision, nbytes, seq) == spec_plans(revision, nbytes, seq)


def test_naive_plans_are_whole_windows_without_sentinel() -> None:
    plans = chunk_plans(CopyRevision.NAIVE, 2 * NAIVE_CHUNK_BYTES + 1, 5)
    assert [(p.offset, p.size, p.wire) for p in plans] == [
        (0, NAIVE_CHUNK_BYTES, NAIVE_CHUNK_BYTES),
        (NAIVE_CHUNK_BYTES, NAIVE_CHUNK_BYTES, NAIVE_CHUNK_BYTES),
        (2 * NAIVE_CHUNK_BYTES, 1, SECTOR_BYTES),
    ]


def test_a_full_pipelined_chunk_fills_its_window_and_a_sentinel_sector_chunk_does_not() -> None:
    (full,) = spec_plans(CopyRevision.PIPELINED, CHUNK_BYTES, 0)
    assert (full.wire, full.sentinel_offset) == (WINDOW_BYTES, WINDOW_BYTES - 4)
    (sector,) = spec_plans(CopyRevision.SENTINEL_SECTOR, SECTOR_CHUNK_BYTES, 0)
    assert (sector.wire, sector.sentinel_offset) == (WINDOW_BYTES - 0x4000 + SECTOR_BYTES, SECTOR_CHUNK_BYTES)


def test_sentinel_wraps_in_24_bits_and_the_fence_does_not() -> None:
    plans = spec_plans(CopyRevision.PIPELINED, 3 * CHUNK_BYTES, 0xFFFFFE)
    program = copyin_program(plans, 0x400000).reshape(3, POLL + COPY + WRITE)
    assert [sentinel(p.seq) for p in plans] == [0x51FFFFFE, 0x51FFFFFF, 0x51000000]
    assert program[:, 3].tolist() == [0x51FFFFFE, 0x51FFFFFF, 0x51000000]  # POLL_REGMEM reference
    fence = program[:, POLL + COPY + 4].astype(np.uint64) | program[:, POLL + COPY + 5].astype(np.uint64) << 32
    assert fence.tolist() == [0xFFFFFF, 0x1000000, 0x1000001]  # WRITE data: seq + 1, all 64 bits


def test_program_fields_address_the_windows_the_destination_and_the_fence() -> None:
    dest = 0x400001
    plans = spec_plans(CopyRevision.PIPELINED, 2 * CHUNK_BYTES + 100, 7)
    rows = copyin_program(plans[:2], dest).reshape(2, -1)
    for row, plan in zip(rows, plans[:2], strict=True):
        poll_addr = int(row[1]) | int(row[2]) << 32
        assert poll_addr == SYS_APERTURE + window_pcie(plan.seq & 1) + plan.sentinel_offset
        copy = row[POLL : POLL + COPY]
        assert int(copy[1]) + 1 == plan.size  # COPY_LINEAR count is bytes - 1
        assert int(copy[3]) | int(copy[4]) << 32 == SYS_APERTURE + window_pcie(plan.seq & 1)  # src
        assert int(copy[5]) | int(copy[6]) << 32 == dest + plan.offset  # dst
        write = row[POLL + COPY :]
        assert int(write[1]) | int(write[2]) << 32 == SYS_APERTURE + FENCE_PCIE


def test_empty_program() -> None:
    assert copyin_program([], 0x400000).size == 0


@settings(max_examples=40, deadline=None)
@given(
    revision=st.sampled_from(SENTINEL_REVISIONS),
    chunks=st.integers(1, 12),
    tail=st.integers(0, CHUNK_BYTES - 1),
    seq=st.one_of(st.integers(0, 1 << 40), st.integers(0xFFFFF0, 0x1000010)),
    dest_va=st.integers(0, 1 << 36),
    first=st.integers(0, 5),
)
def test_stamped_equals_built_property(
    revision: CopyRevision, chunks: int, tail: int, seq: int, dest_va: int, first: int
) -> None:
    nbytes = (chunks - 1) * CHUNK[revision] + min(tail, CHUNK[revision] - 1) + 1
    plans = spec_plans(revision, nbytes, seq)
    plans = plans[min(first, len(plans) - 1) :]  # a later batch of a copyin starts mid-way
    np.testing.assert_array_equal(copyin_program(plans, dest_va), built(plans, dest_va))


# --- copyout ---
@pytest.mark.parametrize("src_va", [0, 0x400001, 0xFFFF_FF00, 0x1_2345_6789])
def test_stamped_copyout_pieces_equal_the_built_ones(src_va: int) -> None:
    """Each piece's bytes are its COPY_LINEAR (VRAM into the SRAM) and its release WRITE, as the builders make them."""
    for nbytes in (
        1,
        COPYOUT_PIECE_BYTES - 1,
        COPYOUT_PIECE_BYTES,
        COPYOUT_PIECE_BYTES + 1,
        5 * COPYOUT_PIECE_BYTES + 3,
    ):
        offsets = range(0, nbytes, COPYOUT_PIECE_BYTES)
        expected = [
            np.concatenate(copyout_packets(src_va, offset, min(COPYOUT_PIECE_BYTES, nbytes - offset))).tobytes()
            for offset in offsets
        ]
        assert copyout_program(src_va, nbytes) == expected, f"{nbytes=:#x} {src_va=:#x}"


def test_copyout_packets_copy_into_the_sram_and_release_the_bulk_in() -> None:
    copy, release = copyout_packets(0x1_0000_0000, 0x80000, 0x100)
    assert int(copy[1]) + 1 == 0x100  # COPY_LINEAR count is bytes - 1
    assert int(copy[3]) | int(copy[4]) << 32 == 0x1_0008_0000  # src: VRAM
    assert int(copy[5]) | int(copy[6]) << 32 == SYS_APERTURE + PCIE_SRAM_BASE  # dst: the SRAM
    assert int(release[1]) | int(release[2]) << 32 == SYS_APERTURE + PCIE_CQ_WINDOW + CPL_RELEASE_OFFSET
    assert release[4:].tolist() == [1]
