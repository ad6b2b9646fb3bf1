"""SDMA layout facts against docs/amdgpu.md's SDMA table."""

from __future__ import annotations

from tinyhil.spec.amdgpu_sdma import (
    SDMA_CONST_FILL_FILL_SIZE,
    SDMA_NOP_COUNT,
    SDMA_PACKET_DWORDS,
    SDMA_POLL_REGMEM_FUNCTION,
    SDMA_POLL_REGMEM_RETRY_COUNT,
    FillSize,
    SdmaCopyLinearDw,
    SdmaOp,
)


def test_opcodes_and_packet_sizes_match_the_spec_table() -> None:
    assert {op.name: (op.value, SDMA_PACKET_DWORDS[op]) for op in SdmaOp} == {
        "NOP": (0, 1),
        "COPY_LINEAR": (1, 7),
        "WRITE": (2, 4),
        "INDIRECT": (4, 6),
        "FENCE": (5, 4),
        "TRAP": (6, 2),
        "POLL_REGMEM": (8, 6),
        "CONST_FILL": (11, 5),
        "TIMESTAMP": (13, 3),
    }


def test_field_positions_match_the_spec_table() -> None:
    assert SDMA_NOP_COUNT.mask == 0x3FFF << 16, "NOP count: header bits 16-29"
    assert SDMA_POLL_REGMEM_FUNCTION.mask == 0b111 << 28, "POLL_REGMEM function: header bits 28-30"
    assert SDMA_POLL_REGMEM_RETRY_COUNT.mask == 0xFFF << 16, "POLL_REGMEM retry count: DW5 bits 16-27"
    assert SDMA_CONST_FILL_FILL_SIZE.mask == 0b11 << 30 and (FillSize.BYTE, FillSize.DWORD) == (0, 2)
    assert (SdmaCopyLinearDw.SRC_ADDR_LO, SdmaCopyLinearDw.DST_ADDR_LO) == (3, 5)
