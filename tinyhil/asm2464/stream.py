"""How an arbitrary PCIe memory access is cut into 0xF0 stream transfers and single TLPs.

Streams (0xF0 modes 1/2) move whole dwords from a dword-aligned address; the unaligned bytes before the first and
after the last whole dword go as single TLPs with byte enables. A body of at most ``single_max_bytes`` whole dwords
goes as single TLPs too: a stream costs a control transfer plus a bulk transfer of at least one whole packet at the
slow stream rate, a single posted write one control transfer (a register, a doorbell, a write pointer). Long
bodies are cut into streams of at most ``stream_chunk_bytes`` (a whole number of bulk packets) so no single stream
gets long enough to wedge the bridge (docs/faults.md "Quirks": upstream saw a 4 MB stream wedge it).

Limits: an access lies in the 64-bit PCIe address space (``address + size <= 2**64``) and moves at most
:data:`MAX_MEM_ACCESS_BYTES` (1 GiB): about four minutes at the 0xF0 streams' 4 MB/s, and the most the client plans
and allocates for one call (a read returns a buffer of ``size`` bytes). Bulk data belongs on the 0xF2 SRAM path
(hundreds of MB/s, docs/copyin.md); a larger PCIe access is several calls. A plan holds at most
:data:`MAX_PLAN_PIECES` transactions (a 1 GiB access in chunks of 16 KB or more, at any alignment), so planning takes
bounded host time and memory whatever the chunk sizes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Final

from tinyhil._check import check_int
from tinyhil.align import ceil_div, round_down
from tinyhil.asm2464.tlp import byte_enables
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm2464 import BYTE_ENABLE_SHIFT, TLP_BYTE_ENABLE_ALL, FmtType
from tinyhil.usb.bridge_io import check_timeout_ms

__all__ = [
    "BASE_BULK_TIMEOUT_MS",
    "MAX_MEM_ACCESS_BYTES",
    "MAX_PLAN_PIECES",
    "SLOWEST_BYTES_PER_MS",
    "MemPiece",
    "WriteStep",
    "bulk_timeout_ms",
    "check_mem_access",
    "plan_mem_access",
    "plan_write",
]

DWORD_BYTES: Final = 4
ADDR32_LIMIT: Final = 1 << 32
ADDR64_LIMIT: Final = 1 << 64
MAX_MEM_ACCESS_BYTES: Final = 1 << 30  # the largest access planned (module docstring): 1024 streams of 1 MB
MAX_PLAN_PIECES: Final = (1 << 16) + 2  # the most transactions one plan holds: 1 GiB in 16 KB streams, head, tail
BASE_BULK_TIMEOUT_MS: Final = 1000
SLOWEST_BYTES_PER_MS: Final = 1000  # 1 MB/s: below the 0xF0 stream rate ("a few MB/s"), the slowest path


def bulk_timeout_ms(nbytes: int, timeout: object = None) -> int:
    """The timeout of a bulk transfer of ``nbytes``: the caller's ``timeout``, checked (so a bad one fails before the
    first request goes out), or by default one at the slowest path's rate (0xF2 and 0xF0 alike).

    Raises:
        InvalidArgument: ``timeout`` is not ``None`` or an int of milliseconds in ``1..MAX_TIMEOUT_MS``.
    """
    if timeout is None:
        return BASE_BULK_TIMEOUT_MS + nbytes // SLOWEST_BYTES_PER_MS
    return check_timeout_ms(timeout)


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


def check_mem_access(address: int, size: int, *, stream_chunk_bytes: int, single_max_bytes: int = 0) -> None:
    """The one check of a PCIe memory access and its plan's shape (what :func:`plan_mem_access` plans).

    Raises:
        InvalidArgument: a non-int argument, ``address`` < 0, ``size`` outside ``1..MAX_MEM_ACCESS_BYTES``, a range
            that leaves the 64-bit PCIe address space, a chunk size that is not a positive multiple of 4, or a plan
            of more than ``MAX_PLAN_PIECES`` transactions.
    """
    if not (
        type(address) is int
        and type(size) is int
        and type(stream_chunk_bytes) is int
        and type(single_max_bytes) is int
        and address >= 0
        and 1 <= size <= MAX_MEM_ACCESS_BYTES
        and address + size <= ADDR64_LIMIT
        and stream_chunk_bytes >= DWORD_BYTES
        and not stream_chunk_bytes % DWORD_BYTES
        and single_max_bytes >= 0
    ):
        _refuse(address, size, stream_chunk_bytes, single_max_bytes)
    head = min(-address % DWORD_BYTES, size)
    body = round_down(size - head, DWORD_BYTES)
    count = (head > 0) + (size - head - body > 0)
    count += body // DWORD_BYTES if body <= single_max_bytes else ceil_div(body, stream_chunk_bytes)
    if count > MAX_PLAN_PIECES:
        raise InvalidArgument(
            f"an access of {size:#x} bytes with stream_chunk_bytes={stream_chunk_bytes:#x} and "
            f"single_max_bytes={single_max_bytes:#x} takes {count} transactions, expected at most "
            f"MAX_PLAN_PIECES={MAX_PLAN_PIECES}: use larger chunks or a smaller access"
        )


def _refuse(address: Any, size: Any, stream_chunk_bytes: Any, single_max_bytes: Any) -> None:
    """Raise the InvalidArgument naming the first bad argument of :func:`check_mem_access` (an ``IntEnum`` member,
    an int like any other, passes)."""
    address = check_int("address", address, min_value=0)
    size = check_int("size", size, min_value=1)
    stream_chunk_bytes = check_int("stream_chunk_bytes", stream_chunk_bytes, min_value=DWORD_BYTES)
    check_int("single_max_bytes", single_max_bytes, min_value=0)
    if size > MAX_MEM_ACCESS_BYTES:
        raise InvalidArgument(
            f"size={size:#x}, expected at most MAX_MEM_ACCESS_BYTES={MAX_MEM_ACCESS_BYTES:#x} (1 GiB, minutes at the "
            "0xF0 streams' 4 MB/s): split the access, or move bulk data through the 0xF2 SRAM path"
        )
    if stream_chunk_bytes % DWORD_BYTES:
        raise InvalidArgument(f"stream_chunk_bytes={stream_chunk_bytes:#x}, expected a multiple of 4")
    if address + size > ADDR64_LIMIT:
        raise InvalidArgument(
            f"range {address:#x}+{size:#x} ends past the 64-bit PCIe address space (at {address + size:#x}, "
            f"expected at most {ADDR64_LIMIT:#x})"
        )


def plan_mem_access(
    address: int, size: int, *, stream_chunk_bytes: int, single_max_bytes: int = 0
) -> tuple[MemPiece, ...]:
    """Cut ``[address, address + size)`` into an unaligned head, whole-dword streams and an unaligned tail; a body
    of at most ``single_max_bytes`` goes as one single TLP per dword instead of a stream.

    Every argument is checked (:func:`check_mem_access`) before anything is planned (or cached: a value that cannot
    be hashed is refused by name, not by the cache).

    Raises:
        InvalidArgument: as :func:`check_mem_access`.
    """
    check_mem_access(address, size, stream_chunk_bytes=stream_chunk_bytes, single_max_bytes=single_max_bytes)
    return _plan(int(address), int(size), int(stream_chunk_bytes), int(single_max_bytes))


@functools.lru_cache(maxsize=4096)  # every ring write, pointer and doorbell: the same few ranges recur
def _plan(address: int, size: int, stream_chunk_bytes: int, single_max_bytes: int) -> tuple[MemPiece, ...]:
    """:func:`plan_mem_access` of checked plain ints."""
    pieces: list[MemPiece] = []
    offset = 0
    head = min(-address % DWORD_BYTES, size)
    if head:
        pieces.append(MemPiece(address, 0, head, stream=False))
        offset = head
    body_end = offset + round_down(size - offset, DWORD_BYTES)
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


@dataclass(frozen=True, slots=True)
class WriteStep:
    """One transaction of a PCIe memory write: data bytes ``[offset, end)`` at the write's address + ``offset``."""

    offset: int
    end: int
    stream: bool  # True: an 0xF0 stream of ``dwords``; False: one single TLP
    byte_enables: int  # shifted into wValue's high byte
    lane: int  # single TLP: the first byte's offset within its dword
    dwords: int  # stream: its length in dwords
    timeout_ms: int  # stream: of the bulk OUT


@functools.lru_cache(maxsize=1024)
def plan_write(lane: int, size: int, stream_chunk_bytes: int, single_max_bytes: int) -> tuple[WriteStep, ...]:
    """The steps of a PCIe memory write of ``size`` bytes at an address ``a`` with ``a % 4 == lane``: how
    :func:`plan_mem_access` cuts it depends on nothing else (a ring write moves along the ring every time)."""
    steps = []
    pieces = plan_mem_access(lane, size, stream_chunk_bytes=stream_chunk_bytes, single_max_bytes=single_max_bytes)
    for piece in pieces:
        end = piece.offset + piece.size
        if piece.stream:
            enables = TLP_BYTE_ENABLE_ALL << BYTE_ENABLE_SHIFT
            steps.append(
                WriteStep(piece.offset, end, True, enables, 0, piece.size // DWORD_BYTES, bulk_timeout_ms(piece.size))
            )
        else:
            piece_lane = piece.address % DWORD_BYTES
            enables = byte_enables(piece_lane, piece.size) << BYTE_ENABLE_SHIFT
            steps.append(WriteStep(piece.offset, end, False, enables, piece_lane, 0, 0))
    return tuple(steps)
