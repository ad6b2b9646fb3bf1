"""PM4 packet builders: type-3 headers and each body decoded with the layouts documented in tinyhil.spec.amdgpu."""

from __future__ import annotations

from typing import Any

import pytest

from tinyhil.amdgpu import pm4
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import CompareFunction
from tinyhil.spec.amdgpu_pm4 import Pm4Op, ReleaseMemDataSel, ReleaseMemIntSel


def bits(dword: Any, lo: int, hi: int) -> int:
    return (int(dword) >> lo) & ((1 << (hi - lo + 1)) - 1)


def header(packet: Any) -> tuple[int, int, int]:
    """(type, body dwords, opcode) as docs/amdgpu.md defines the type-3 header."""
    return bits(packet[0], 30, 31), bits(packet[0], 16, 29) + 1, bits(packet[0], 8, 15)


def test_headers_carry_type_3_count_and_opcode() -> None:
    assert header([pm4.pm4_header(Pm4Op.WRITE_DATA, 5)]) == (3, 5, 0x37)


def test_nops() -> None:
    assert len(pm4.pm4_nop()) == 1 and bits(pm4.pm4_nop()[0], 16, 29) == 0x3FFF, "the header-only NOP"
    assert header(pm4.pm4_nop(4)) == (3, 4, 0x10) and len(pm4.pm4_nop(4)) == 5


def test_set_sh_reg_and_set_uconfig_reg_offsets_from_their_block_start() -> None:
    packet = pm4.pm4_set_sh_reg(0x2E0C, [0x12, 0x34])
    assert header(packet) == (3, 3, 0x76) and list(packet[1:]) == [0x2E0C - 0x2C00, 0x12, 0x34]
    packet = pm4.pm4_set_uconfig_reg(0xC010, [5])
    assert header(packet) == (3, 2, 0x79) and list(packet[1:]) == [0x10, 5]


def test_acquire_mem_covers_everything() -> None:
    packet = pm4.pm4_acquire_mem()
    assert header(packet) == (3, 7, 0x58) and packet[2] == 0xFFFF_FFFF


def test_release_mem() -> None:
    packet = pm4.pm4_release_mem(
        0x7_0000_0010, 0x1_2345_6789, data_sel=ReleaseMemDataSel.VALUE_64, int_sel=ReleaseMemIntSel.INTERRUPT, ctx_id=9
    )
    assert header(packet) == (3, 7, 0x49)
    assert (bits(packet[1], 0, 5), bits(packet[1], 8, 11)) == (0x14, 5), "event type / index (end of pipe)"
    assert (bits(packet[2], 16, 17), bits(packet[2], 24, 26), bits(packet[2], 29, 31)) == (0, 1, 2)
    assert list(packet[3:8]) == [0x10, 7, 0x2345_6789, 1, 9]


def test_wait_reg_mem() -> None:
    packet = pm4.pm4_wait_reg_mem(0x8_0000_0004, 3, mask=0xF0, function=CompareFunction.GREATER_EQUAL, interval=8)
    assert header(packet) == (3, 6, 0x3C)
    assert (bits(packet[1], 0, 2), bits(packet[1], 4, 5), bits(packet[1], 6, 7)) == (5, 1, 0)
    assert list(packet[2:7]) == [4, 8, 3, 0xF0, 8]


def test_indirect_buffer() -> None:
    packet = pm4.pm4_indirect_buffer(0x9_0000_0100, 77)
    assert header(packet) == (3, 3, 0x3F)
    assert (packet[1], packet[2], bits(packet[3], 0, 19), bits(packet[3], 23, 23)) == (0x100, 9, 77, 1)


def test_write_data() -> None:
    packet = pm4.pm4_write_data(0xA_0000_0008, [1, 2])
    assert header(packet) == (3, 5, 0x37)
    assert (bits(packet[1], 8, 11), bits(packet[1], 20, 20)) == (5, 1), "dst_sel memory, write confirm"
    assert list(packet[2:]) == [8, 0xA, 1, 2]


def test_dispatch_direct() -> None:
    packet = pm4.pm4_dispatch_direct((4, 5, 6))
    assert header(packet) == (3, 4, 0x15) and list(packet[1:]) == [4, 5, 6, 1]


def test_launch_sets_the_registers_dispatch_reads() -> None:
    packets = pm4.pm4_launch(0x12_3456_7800, 0xB_0000_0040, (8, 1, 1), (64, 2, 1))
    regs: dict[int, int] = {}
    index = 0
    while header(packets[index:])[2] == 0x76:
        _, body, _ = header(packets[index:])
        base = 0x2C00 + int(packets[index + 1])
        for i, value in enumerate(packets[index + 2 : index + 1 + body]):
            regs[base + i] = int(value)
        index += 1 + body
    assert (regs[0x2E0D] << 32 | regs[0x2E0C]) << 8 == 0x12_3456_7800, "COMPUTE_PGM_LO/HI = address >> 8"
    assert [regs[0x2E07], regs[0x2E08], regs[0x2E09]] == [64, 2, 1]
    assert regs[0x2E41] << 32 | regs[0x2E40] == 0xB_0000_0040, "USER_DATA_0/1 = argument buffer"
    assert header(packets[index:]) == (3, 4, 0x15) and list(packets[index + 1 : index + 4]) == [8, 1, 1]


BAD_ARGUMENTS = [
    (lambda: pm4.pm4_header(Pm4Op.NOP, 0), "body_dwords=0, expected an int >= 1"),
    (lambda: pm4.pm4_header(0x99, 1), "opcode=153, expected one of"),  # type: ignore[arg-type]
    (lambda: pm4.pm4_release_mem(0, data_sel=5), "data_sel=5, expected one of"),  # type: ignore[arg-type]
    (lambda: pm4.pm4_wait_reg_mem(0, 0, function=7), "function=7"),  # type: ignore[arg-type]
    (lambda: pm4.pm4_set_sh_reg(0x2BFF, [1]), "reg=11263, expected an int >= 11264"),
    (lambda: pm4.pm4_set_sh_reg(0x2FFF, [1, 2]), "2 values from register 0x2fff"),
    (lambda: pm4.pm4_set_sh_reg(0x2E00, []), "0 values from register"),
    (lambda: pm4.pm4_release_mem(4, 0, data_sel=ReleaseMemDataSel.VALUE_64), "addr=0x4, expected a multiple of 8"),
    (lambda: pm4.pm4_release_mem(0, 1 << 32), "value=4294967296, expected an int <= 4294967295"),
    (lambda: pm4.pm4_wait_reg_mem(2, 0), "addr=0x2"),
    (lambda: pm4.pm4_indirect_buffer(0, 1 << 20), "ib_size=1048576"),
    (lambda: pm4.pm4_write_data(0, []), "data is empty"),
    (lambda: pm4.pm4_dispatch_direct((1, 1, -1)), r"grid\[2\]=-1"),
    (lambda: pm4.pm4_launch(0x80, 0, (1, 1, 1), (1, 1, 1)), "program_va=0x80, expected a multiple of 256"),
    (lambda: pm4.pm4_launch(0x100, 0, (1, 1, 1), (0, 1, 1)), "group_size=0"),
    (lambda: pm4.pm4_launch(0x100, 0, (1, 1), (1, 1, 1)), "expected three dimensions each"),
]


@pytest.mark.parametrize(("build", "message"), BAD_ARGUMENTS)
def test_bad_arguments_are_refused_naming_them(build: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        build()
