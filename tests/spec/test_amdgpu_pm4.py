"""PM4 layout facts against docs/amdgpu.md's PM4 table and the GC 9-11 bodies the module documents."""

from __future__ import annotations

from tinyhil.spec.amdgpu_pm4 import (
    PM4_BODY_DWORDS,
    PM4_HEADER_COUNT,
    PM4_HEADER_OPCODE,
    PM4_HEADER_TYPE,
    SH_REG_BASE,
    Pm4Op,
    ShReg,
)


def test_opcodes_match_the_spec_table() -> None:
    assert {op.name: op.value for op in Pm4Op} == {
        "NOP": 0x10,
        "DISPATCH_DIRECT": 0x15,
        "WRITE_DATA": 0x37,
        "WAIT_REG_MEM": 0x3C,
        "INDIRECT_BUFFER": 0x3F,
        "RELEASE_MEM": 0x49,
        "ACQUIRE_MEM": 0x58,
        "SET_SH_REG": 0x76,
        "SET_UCONFIG_REG": 0x79,
    }


def test_header_and_fixed_bodies() -> None:
    assert (PM4_HEADER_TYPE.mask, PM4_HEADER_COUNT.mask, PM4_HEADER_OPCODE.mask) == (3 << 30, 0x3FFF << 16, 0xFF << 8)
    assert PM4_BODY_DWORDS == {
        Pm4Op.RELEASE_MEM: 7,
        Pm4Op.WAIT_REG_MEM: 6,
        Pm4Op.INDIRECT_BUFFER: 3,
        Pm4Op.ACQUIRE_MEM: 7,
        Pm4Op.DISPATCH_DIRECT: 4,
    }


def test_dispatch_registers_match_the_spec() -> None:
    assert SH_REG_BASE == 0x2C00
    assert (ShReg.COMPUTE_PGM_LO, ShReg.COMPUTE_PGM_HI) == (0x2E0C, 0x2E0D)
    assert (ShReg.COMPUTE_NUM_THREAD_X, ShReg.COMPUTE_NUM_THREAD_Y, ShReg.COMPUTE_NUM_THREAD_Z) == (
        0x2E07,
        0x2E08,
        0x2E09,
    )
    assert (ShReg.COMPUTE_USER_DATA_0, ShReg.COMPUTE_USER_DATA_1, ShReg.COMPUTE_USER_DATA_15) == (
        0x2E40,
        0x2E41,
        0x2E4F,
    )
