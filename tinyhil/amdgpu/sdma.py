"""SDMA packet builders, one per packet of docs/amdgpu.md "SDMA packets" (SDMA 5/6 layouts).

Each returns the packet as a little-endian uint32 array; arguments are checked eagerly (``InvalidArgument``).
"""

from __future__ import annotations

from typing import Any

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import POLL_RETRY_FOREVER, CompareFunction
from tinyhil.spec.amdgpu_sdma import (
    SDMA_CONST_FILL_COUNT,
    SDMA_CONST_FILL_FILL_SIZE,
    SDMA_COPY_LINEAR_COUNT,
    SDMA_COPY_LINEAR_MAX_BYTES,
    SDMA_HEADER_OP,
    SDMA_HEADER_SUB_OP,
    SDMA_NOP_COUNT,
    SDMA_POLL_REGMEM_FUNCTION,
    SDMA_POLL_REGMEM_INTERVAL,
    SDMA_POLL_REGMEM_MEM_POLL,
    SDMA_POLL_REGMEM_RETRY_COUNT,
    SDMA_SUBOP_COPY_LINEAR,
    SDMA_SUBOP_TIMESTAMP_GET_GLOBAL,
    SDMA_SUBOP_WRITE_LINEAR,
    SDMA_WRITE_COUNT,
    FillSize,
    SdmaOp,
)

from ._packet import Packet, as_dwords, check_address, check_enum, hi32, lo32, packet

__all__ = [
    "sdma_const_fill",
    "sdma_copy_linear",
    "sdma_fence",
    "sdma_header",
    "sdma_indirect",
    "sdma_nop",
    "sdma_poll_regmem",
    "sdma_timestamp",
    "sdma_trap",
    "sdma_write",
]


def sdma_header(op: SdmaOp, sub_op: int = 0) -> int:
    """Header dword: op in bits 0-7, sub-op in bits 8-15."""
    return SDMA_HEADER_OP.put(int(check_enum("op", op, SdmaOp))) | SDMA_HEADER_SUB_OP.put(sub_op)


def sdma_nop(count: int = 0) -> Packet:
    """NOP: the header and ``count`` dwords the engine skips (zeros)."""
    return packet([sdma_header(SdmaOp.NOP) | SDMA_NOP_COUNT.put(count), *[0] * count])


def sdma_copy_linear(dst: int, src: int, nbytes: int) -> Packet:
    """COPY_LINEAR of ``nbytes`` (1 .. 1 GB) from ``src`` to ``dst``, any alignment, overlap allowed."""
    check_int("nbytes", nbytes, min_value=1, max_value=SDMA_COPY_LINEAR_MAX_BYTES)
    check_address("dst", dst)
    check_address("src", src)
    header = sdma_header(SdmaOp.COPY_LINEAR, SDMA_SUBOP_COPY_LINEAR)
    return packet([header, SDMA_COPY_LINEAR_COUNT.put(nbytes - 1), 0, lo32(src), hi32(src), lo32(dst), hi32(dst)])


def sdma_write(dst: int, data: Any) -> Packet:
    """WRITE (linear) of ``data`` (whole dwords: bytes-like or u32 values) to the dword-aligned ``dst``."""
    check_address("dst", dst, 4)
    dwords = as_dwords("data", data)
    if not dwords.size:
        raise InvalidArgument("data is empty, expected at least one dword")
    header = sdma_header(SdmaOp.WRITE, SDMA_SUBOP_WRITE_LINEAR)
    fixed = packet([header, lo32(dst), hi32(dst), SDMA_WRITE_COUNT.put(dwords.size - 1)])
    return packet([*fixed, *dwords.tolist()])


def sdma_indirect(ib_va: int, ib_dwords: int) -> Packet:
    """INDIRECT: run the ``ib_dwords``-dword indirect buffer at the dword-aligned ``ib_va``."""
    check_address("ib_va", ib_va, 4)
    check_int("ib_dwords", ib_dwords, min_value=0, max_value=0xFFFF_FFFF)
    return packet([sdma_header(SdmaOp.INDIRECT), lo32(ib_va), hi32(ib_va), ib_dwords, 0, 0])


def sdma_fence(addr: int, value: int) -> Packet:
    """FENCE: write the 32-bit ``value`` to the dword-aligned ``addr``."""
    check_address("addr", addr, 4)
    check_int("value", value, min_value=0, max_value=0xFFFF_FFFF)
    return packet([sdma_header(SdmaOp.FENCE), lo32(addr), hi32(addr), value])


def sdma_trap(context: int = 0) -> Packet:
    """TRAP: raise an interrupt carrying ``context``."""
    check_int("context", context, min_value=0, max_value=0xFFFF_FFFF)
    return packet([sdma_header(SdmaOp.TRAP), context])


def sdma_poll_regmem(
    addr: int,
    reference: int,
    *,
    mask: int = 0xFFFF_FFFF,
    function: CompareFunction = CompareFunction.EQUAL,
    interval: int = 10,
    retry_count: int = POLL_RETRY_FOREVER,
) -> Packet:
    """POLL_REGMEM on memory: wait until ``(mem & mask) <function> reference``.

    The engine re-checks every ``interval`` x 16 clock cycles, ``retry_count`` times (``0xFFF``: forever), then
    the queue hangs.
    """
    check_address("addr", addr, 4)
    check_int("reference", reference, min_value=0, max_value=0xFFFF_FFFF)
    check_int("mask", mask, min_value=0, max_value=0xFFFF_FFFF)
    header = (
        sdma_header(SdmaOp.POLL_REGMEM)
        | SDMA_POLL_REGMEM_MEM_POLL.put(1)
        | SDMA_POLL_REGMEM_FUNCTION.put(int(check_enum("function", function, CompareFunction)))
    )
    dw5 = SDMA_POLL_REGMEM_INTERVAL.put(interval) | SDMA_POLL_REGMEM_RETRY_COUNT.put(retry_count)
    return packet([header, lo32(addr), hi32(addr), reference, mask, dw5])


def sdma_const_fill(dst: int, data: int, nbytes: int, *, fill_size: FillSize = FillSize.DWORD) -> Packet:
    """CONST_FILL of ``nbytes`` at ``dst`` with the u32 ``data`` (dword fill: aligned address and size) or its
    low byte (byte fill)."""
    fill_size = check_enum("fill_size", fill_size, FillSize)
    check_int("nbytes", nbytes, min_value=1, max_value=1 << 32)
    check_int("data", data, min_value=0, max_value=0xFFFF_FFFF)
    check_address("dst", dst, 4 if fill_size is FillSize.DWORD else 1)
    if fill_size is FillSize.DWORD:
        check_address("nbytes", nbytes, 4)
    header = sdma_header(SdmaOp.CONST_FILL) | SDMA_CONST_FILL_FILL_SIZE.put(int(fill_size))
    return packet([header, lo32(dst), hi32(dst), data, SDMA_CONST_FILL_COUNT.put(nbytes - 1)])


def sdma_timestamp(addr: int) -> Packet:
    """TIMESTAMP (get global): write the 64-bit 100 MHz GPU timestamp to the 8-byte aligned ``addr``."""
    check_address("addr", addr, 8)
    return packet([sdma_header(SdmaOp.TIMESTAMP, SDMA_SUBOP_TIMESTAMP_GET_GLOBAL), lo32(addr), hi32(addr)])
