"""Cutting a PCIe memory access into an unaligned head, whole-dword streams and an unaligned tail."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.asm2464 import MemPiece, plan_mem_access
from tinyhil.asm2464.stream import MAX_MEM_ACCESS_BYTES, MAX_PLAN_PIECES
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm2464 import FmtType


def test_a_ragged_access_gets_head_streams_and_tail() -> None:
    assert plan_mem_access(0x1001, 0x1006, stream_chunk_bytes=0x800) == (
        MemPiece(0x1001, 0, 3, stream=False),
        MemPiece(0x1004, 3, 0x800, stream=True),
        MemPiece(0x1804, 0x803, 0x800, stream=True),
        MemPiece(0x2004, 0x1003, 3, stream=False),
    )


def test_an_access_inside_one_dword_is_one_single_tlp() -> None:
    assert plan_mem_access(0x1001, 2, stream_chunk_bytes=1024) == (MemPiece(0x1001, 0, 2, stream=False),)


def test_the_tlp_width_follows_the_address() -> None:
    below, across, above = (MemPiece(a, 0, 8, True) for a in ((1 << 32) - 8, (1 << 32) - 4, 1 << 32))
    assert (below.fmt_type(write=False), below.fmt_type(write=True)) == (FmtType.MRD32, FmtType.MWR32)
    assert (across.fmt_type(write=False), across.fmt_type(write=True)) == (FmtType.MRD64, FmtType.MWR64)
    assert above.fmt_type(write=True) == FmtType.MWR64


@given(st.integers(0, 1 << 40), st.integers(1, 20_000), st.sampled_from([4, 1024, 4096]))
def test_pieces_tile_the_access_and_respect_the_engine(address: int, size: int, chunk: int) -> None:
    pieces = plan_mem_access(address, size, stream_chunk_bytes=chunk)
    offset = 0
    for piece in pieces:
        assert piece.offset == offset and piece.address == address + offset
        if piece.stream:
            assert piece.address % 4 == 0 and piece.size % 4 == 0 and 0 < piece.size <= chunk
        else:
            assert 1 <= piece.size <= 4 and piece.address % 4 + piece.size <= 4
        offset += piece.size
    assert offset == size
    assert sum(not p.stream for p in pieces) <= 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 0, 1024), "size=0"),
        ((-1, 4, 1024), "address=-1"),
        ((0, 4, 6), "stream_chunk_bytes=0x6, expected a multiple of 4"),
        ((0, 4, 0), "stream_chunk_bytes=0"),
        (((1 << 64) - 2, 4, 1024), "ends past the 64-bit PCIe address space"),
        ((0, 1 << 62, 1 << 20), "size=0x4000000000000000, expected at most MAX_MEM_ACCESS_BYTES=0x40000000"),
        ((0, MAX_MEM_ACCESS_BYTES + 1, 1 << 20), "size=0x40000001"),
        ((0, MAX_MEM_ACCESS_BYTES, 4), "takes 268435456 transactions, expected at most MAX_PLAN_PIECES=65538"),
        (([0], 4, 1024), "address=[0], expected an int"),  # refused by name, not by the plan cache's hash
        ((0, {4}, 1024), "size={4}, expected an int"),
        ((0, 4, [1024]), "stream_chunk_bytes=[1024], expected an int"),
    ],
)
def test_bad_plans(args: tuple[Any, Any, Any], message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        plan_mem_access(args[0], args[1], stream_chunk_bytes=args[2])
    assert message in str(raised.value)


def test_the_largest_access_plans_within_the_piece_limit() -> None:
    pieces = plan_mem_access(1, MAX_MEM_ACCESS_BYTES, stream_chunk_bytes=1 << 14)  # 16 KB chunks: the documented floor
    assert len(pieces) <= MAX_PLAN_PIECES and sum(p.size for p in pieces) == MAX_MEM_ACCESS_BYTES
