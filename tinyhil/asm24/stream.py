"""How an arbitrary PCIe memory access is cut into 0xF0 stream transfers and single TLPs.

Streams (0xF0 modes 1/2) move whole dwords from a dword-aligned address; the unaligned bytes before the first and
after the last whole dword go as single TLPs with byte enables. A body of at most ``single_max_bytes`` whole dwords
goes as single TLPs too: a stream costs a control transfer plus a bulk transfer of at least one whole packet at the
slow stream rate, a single posted write one control transfer (a register, a doorbell, a write pointer). Long
bodies are cut into streams of at most ``stream_chunk_bytes`` (a whole number of bulk packets) so no single stream
gets long enough to wedge the bridge (spec/asm24.md quirk 3: upstream saw a 4 MB stream wedge it).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm24 import FmtType

__all__ = ["MemPiece", "plan_mem_access"]

DWORD_BYTES: Final = 4
ADDR32_LIMIT: Final = 1 << 32
ADDR64_LIMIT: Final = 1 << 64


@dataclass(frozen=True, slots=True)
class MemPiece:
    """One transaction of a planned access: ``size`` bytes at PCIe ``address``, buffer bytes ``[offset, +size)``."""

    address: int
    offset: int
    size: int
    stream: bool  # True: an 0xF0 stream of size // 4 dwords; False: one single TLP (1-4 bytes within a dword)

    def fmt_type(self, *, write: bool) -> FmtType:
        """MRd/MWr, 32-bit unless the piece reaches above 4 GB."""
        wide = self.address + self.size > ADDR32_LIMIT
        if write:
            return FmtType.MWR64 if wide else FmtType.MWR32
        return FmtType.MRD64 if wide else FmtType.MRD32


@functools.lru_cache(maxsize=4096)  # hot: every ring write, pointer and doorbell; the same few ranges recur
def plan_mem_access(
    address: int, size: int, *, stream_chunk_bytes: int, single_max_bytes: int = 0
) -> tuple[MemPiece, ...]:
    """Cut ``[address, address + size)`` into an unaligned head, whole-dword streams and an unaligned tail; a body
    of at most ``single_max_bytes`` goes as one single TLP per dword instead of a stream.

    Raises:
        InvalidArgument: ``size`` < 1, the range leaves the 64-bit address space, or a chunk size that is not a
            positive multiple of 4.
    """
    check_int("address", address, min_value=0)
    check_int("size", size, min_value=1)
    check_int("stream_chunk_bytes", stream_chunk_bytes, min_value=DWORD_BYTES)
    check_int("single_max_bytes", single_max_bytes, min_value=0)
    if stream_chunk_bytes % DWORD_BYTES:
        raise InvalidArgument(f"stream_chunk_bytes={stream_chunk_bytes:#x}, expected a multiple of 4")
    if address + size > ADDR64_LIMIT:
        raise InvalidArgument(f"range {address:#x}+{size:#x} ends past the 64-bit PCIe address space")
    pieces: list[MemPiece] = []
    offset = 0
    head = min(-address % DWORD_BYTES, size)
    if head:
        pieces.append(MemPiece(address, 0, head, stream=False))
        offset = head
    body_end = offset + (size - offset) // DWORD_BYTES * DWORD_BYTES
    if body_end - offset <= single_max_bytes:
        for dword in range(offset, body_end, DWORD_BYTES):
            pieces.append(MemPiece(address + dword, dword, DWORD_BYTES, stream=False))
        offset = body_end
    while offset < body_end:
        n = min(stream_chunk_bytes, body_end - offset)
        pieces.append(MemPiece(address + offset, offset, n, stream=True))
        offset += n
    if offset < size:
        pieces.append(MemPiece(address + offset, offset, size - offset, stream=False))
    return tuple(pieces)
