"""SDMA packet builders against docs/amdgpu.md's field table: each field decoded with the spec's bit positions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tinyhil.amdgpu import sdma
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import CompareFunction
from tinyhil.spec.amdgpu_sdma import FillSize, SdmaOp


def bits(dword: Any, lo: int, hi: int) -> int:
    """Bits lo..hi (inclusive) of a dword, as the spec table writes them."""
    return (int(dword) >> lo) & ((1 << (hi - lo + 1)) - 1)


def test_every_builder_returns_little_endian_dwords() -> None:
    packet = sdma.sdma_fence(0x1234_5678_9ABC, 0xDEADBEEF)
    assert packet.dtype == np.dtype("<u4") and packet.tobytes()[-4:] == bytes.fromhex("efbeadde")


def test_nop() -> None:
    packet = sdma.sdma_nop(3)
    assert len(packet) == 1 + 3
    assert (bits(packet[0], 0, 7), bits(packet[0], 8, 15), bits(packet[0], 16, 29)) == (0, 0, 3)


def test_copy_linear() -> None:
    packet = sdma.sdma_copy_linear(dst=0x0000_00AB_CDEF_0123, src=0x0000_0012_3456_7890, nbytes=0x1000)
    assert len(packet) == 7
    assert (bits(packet[0], 0, 7), bits(packet[0], 8, 15)) == (1, 0)
    assert bits(packet[1], 0, 29) == 0xFFF, "DW1 bits 0-29: byte count - 1"
    assert (packet[3], packet[4]) == (0x3456_7890, 0x12), "DW3/4 src lo/hi"
    assert (packet[5], packet[6]) == (0xCDEF_0123, 0xAB), "DW5/6 dst lo/hi"


def test_write() -> None:
    packet = sdma.sdma_write(0x1_0000_0010, [7, 8, 9])
    assert len(packet) == 4 + 3 and bits(packet[0], 0, 7) == 2
    assert (packet[1], packet[2]) == (0x10, 1)
    assert bits(packet[3], 0, 19) == 2, "DW3 bits 0-19: n - 1"
    assert list(packet[4:]) == [7, 8, 9]
    assert list(sdma.sdma_write(0, b"\x01\x00\x00\x00\x02\x00\x00\x00")[4:]) == [1, 2]


def test_indirect() -> None:
    packet = sdma.sdma_indirect(0x2_0000_1000, 64)
    assert len(packet) == 6 and bits(packet[0], 0, 7) == 4
    assert (packet[1], packet[2], packet[3]) == (0x1000, 2, 64)


def test_fence() -> None:
    packet = sdma.sdma_fence(0x3_0000_0004, 0xFFFF_FFFF)
    assert len(packet) == 4 and bits(packet[0], 0, 7) == 5
    assert (packet[1], packet[2], packet[3]) == (4, 3, 0xFFFF_FFFF)


def test_trap() -> None:
    packet = sdma.sdma_trap(0xABCD)
    assert len(packet) == 2 and bits(packet[0], 0, 7) == 6 and packet[1] == 0xABCD


def test_poll_regmem() -> None:
    packet = sdma.sdma_poll_regmem(
        0x4_0000_0008, 0x51000007, mask=0xFFFF, function=CompareFunction.NOT_EQUAL, interval=4, retry_count=0xFFF
    )
    assert len(packet) == 6 and bits(packet[0], 0, 7) == 8
    assert bits(packet[0], 31, 31) == 1, "header bit 31 mem_poll"
    assert bits(packet[0], 28, 30) == 4, "header bits 28-30 function (4 = not-equal)"
    assert (packet[1], packet[2], packet[3], packet[4]) == (8, 4, 0x51000007, 0xFFFF)
    assert (bits(packet[5], 0, 15), bits(packet[5], 16, 27)) == (4, 0xFFF), "DW5 interval / retry count"


@pytest.mark.parametrize(("fill_size", "code"), [(FillSize.BYTE, 0), (FillSize.DWORD, 2)])
def test_const_fill(fill_size: FillSize, code: int) -> None:
    packet = sdma.sdma_const_fill(0x5_0000_0000, 0x11223344, 64, fill_size=fill_size)
    assert len(packet) == 5 and bits(packet[0], 0, 7) == 11
    assert bits(packet[0], 30, 31) == code, "header bits 30-31 fill size"
    assert (packet[1], packet[2], packet[3], packet[4]) == (0, 5, 0x11223344, 63), "DW4 byte count - 1"


def test_timestamp() -> None:
    packet = sdma.sdma_timestamp(0x6_0000_0010)
    assert len(packet) == 3
    assert (bits(packet[0], 0, 7), bits(packet[0], 8, 15)) == (13, 2), "op 13, sub-op 2 (global)"
    assert (packet[1], packet[2]) == (0x10, 6)


BAD_ARGUMENTS = [
    (lambda: sdma.sdma_nop(1 << 14), "count=16384, expected an int in 0..0x3fff"),
    (lambda: sdma.sdma_copy_linear(0, 0, 0), "nbytes=0, expected an int >= 1"),
    (lambda: sdma.sdma_copy_linear(0, 0, (1 << 30) + 1), "nbytes=1073741825, expected an int <= 1073741824"),
    (lambda: sdma.sdma_copy_linear(-1, 0, 4), "dst=-1"),
    (lambda: sdma.sdma_write(2, [1]), "dst=0x2, expected a multiple of 4"),
    (lambda: sdma.sdma_write(0, []), "data is empty"),
    (lambda: sdma.sdma_write(0, b"abc"), "data of 3 bytes, expected whole dwords"),
    (lambda: sdma.sdma_write(0, [1 << 32]), r"data\[0\]=4294967296"),
    (lambda: sdma.sdma_write(0, np.zeros(2, np.float32)), "expected 1-D u32 values"),
    (lambda: sdma.sdma_fence(1 << 64, 0), "addr=18446744073709551616"),
    (lambda: sdma.sdma_poll_regmem(0, 0, retry_count=0x1000), "retry_count=4096"),
    (lambda: sdma.sdma_poll_regmem(0, 0, interval=1 << 16), "interval=65536"),
    (lambda: sdma.sdma_poll_regmem(0, 0, function=9), r"function=9, expected one of 0 \(ALWAYS\)"),  # type: ignore[arg-type]
    (lambda: sdma.sdma_const_fill(0, 0, 4, fill_size=1), "fill_size=1, expected one of 0 .BYTE., 2 .DWORD."),  # type: ignore[arg-type]
    (lambda: sdma.sdma_header(3), "op=3, expected one of"),  # type: ignore[arg-type]
    (lambda: sdma.sdma_const_fill(2, 0, 4), "dst=0x2, expected a multiple of 4"),
    (lambda: sdma.sdma_const_fill(0, 0, 6), "nbytes=0x6, expected a multiple of 4"),
    (lambda: sdma.sdma_timestamp(4), "addr=0x4, expected a multiple of 8"),
    (lambda: sdma.sdma_header(SdmaOp.NOP, 256), "sub_op=256"),
]


@pytest.mark.parametrize(("build", "message"), BAD_ARGUMENTS)
def test_bad_arguments_are_refused_naming_them(build: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        build()
