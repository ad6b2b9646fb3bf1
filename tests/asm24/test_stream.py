"""Cutting a PCIe memory access into an unaligned head, whole-dword streams and an unaligned tail."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.asm24 import MemPiece, plan_mem_access
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm24 import FmtType


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
    ],
)
def test_bad_plans(args: tuple[int, int, int], message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        plan_mem_access(args[0], args[1], stream_chunk_bytes=args[2])
    assert message in str(raised.value)
