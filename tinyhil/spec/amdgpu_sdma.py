"""SDMA packet layouts (docs/amdgpu.md "SDMA packets", as in SDMA 5/6).

Dword-index enums (``...Dw``) give each dword's position in the packet (header = 0); :class:`Field` constants give
bit positions inside one dword.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from .amdgpu import Field

__all__ = [
    "SDMA_CONST_FILL_COUNT",
    "SDMA_CONST_FILL_FILL_SIZE",
    "SDMA_COPY_LINEAR_COUNT",
    "SDMA_COPY_LINEAR_MAX_BYTES",
    "SDMA_HEADER_OP",
    "SDMA_HEADER_SUB_OP",
    "SDMA_NOP_COUNT",
    "SDMA_PACKET_DWORDS",
    "SDMA_POLL_REGMEM_FUNCTION",
    "SDMA_POLL_REGMEM_INTERVAL",
    "SDMA_POLL_REGMEM_MEM_POLL",
    "SDMA_POLL_REGMEM_RETRY_COUNT",
    "SDMA_SUBOP_COPY_LINEAR",
    "SDMA_SUBOP_TIMESTAMP_GET_GLOBAL",
    "SDMA_SUBOP_WRITE_LINEAR",
    "SDMA_WRITE_COUNT",
    "FillSize",
    "SdmaConstFillDw",
    "SdmaCopyLinearDw",
    "SdmaFenceDw",
    "SdmaIndirectDw",
    "SdmaOp",
    "SdmaPollRegmemDw",
    "SdmaTimestampDw",
    "SdmaTrapDw",
    "SdmaWriteDw",
]


# --- SDMA packets (docs/amdgpu.md "SDMA packets", layouts as in SDMA 5/6) ---
class SdmaOp(IntEnum):
    """SDMA header bits 0-7."""

    NOP = 0
    COPY_LINEAR = 1  # op COPY; only sub-op 0 (linear) is modelled
    WRITE = 2
    INDIRECT = 4
    FENCE = 5
    TRAP = 6
    POLL_REGMEM = 8
    CONST_FILL = 11
    TIMESTAMP = 13  # only sub-op 2 (get global timestamp) is modelled


SDMA_SUBOP_COPY_LINEAR: Final = 0
SDMA_SUBOP_WRITE_LINEAR: Final = 0
SDMA_SUBOP_TIMESTAMP_GET_GLOBAL: Final = 2

SDMA_HEADER_OP: Final = Field("op", 0, 8)
SDMA_HEADER_SUB_OP: Final = Field("sub_op", 8, 8)
SDMA_NOP_COUNT: Final = Field("count", 16, 14)  # header: dwords to skip after the header
SDMA_COPY_LINEAR_COUNT: Final = Field("count", 0, 30)  # DW1: byte count - 1
SDMA_COPY_LINEAR_MAX_BYTES: Final = 1 << 30
SDMA_WRITE_COUNT: Final = Field("count", 0, 20)  # DW3: data dwords - 1
SDMA_POLL_REGMEM_MEM_POLL: Final = Field("mem_poll", 31, 1)  # header
SDMA_POLL_REGMEM_FUNCTION: Final = Field("function", 28, 3)  # header
SDMA_POLL_REGMEM_INTERVAL: Final = Field("interval", 0, 16)  # DW5
SDMA_POLL_REGMEM_RETRY_COUNT: Final = Field("retry_count", 16, 12)  # DW5
SDMA_CONST_FILL_FILL_SIZE: Final = Field("fill_size", 30, 2)  # header
SDMA_CONST_FILL_COUNT: Final = Field("count", 0, 32)  # DW4: byte count - 1

# Fixed packet sizes in dwords (WRITE: 4 + n data dwords; NOP: 1 + count).
SDMA_PACKET_DWORDS: Final[dict[int, int]] = {  # keyed by SdmaOp members (an int finds them)
    SdmaOp.NOP: 1,
    SdmaOp.COPY_LINEAR: 7,
    SdmaOp.WRITE: 4,
    SdmaOp.INDIRECT: 6,
    SdmaOp.FENCE: 4,
    SdmaOp.TRAP: 2,
    SdmaOp.POLL_REGMEM: 6,
    SdmaOp.CONST_FILL: 5,
    SdmaOp.TIMESTAMP: 3,
}


class SdmaCopyLinearDw(IntEnum):
    HEADER = 0
    COUNT = 1
    PARAMETER = 2  # ignored
    SRC_ADDR_LO = 3
    SRC_ADDR_HI = 4
    DST_ADDR_LO = 5
    DST_ADDR_HI = 6


class SdmaWriteDw(IntEnum):
    HEADER = 0
    DST_ADDR_LO = 1
    DST_ADDR_HI = 2
    COUNT = 3
    DATA = 4  # first of n data dwords


class SdmaIndirectDw(IntEnum):
    HEADER = 0
    IB_BASE_LO = 1
    IB_BASE_HI = 2
    IB_SIZE = 3  # dwords
    CSA_ADDR_LO = 4  # ignored
    CSA_ADDR_HI = 5  # ignored


class SdmaFenceDw(IntEnum):
    HEADER = 0
    ADDR_LO = 1
    ADDR_HI = 2
    DATA = 3


class SdmaTrapDw(IntEnum):
    HEADER = 0
    INT_CONTEXT = 1


class SdmaPollRegmemDw(IntEnum):
    HEADER = 0
    ADDR_LO = 1
    ADDR_HI = 2
    REFERENCE = 3
    MASK = 4
    DW5 = 5  # interval bits 0-15, retry count bits 16-27


class FillSize(IntEnum):
    """CONST_FILL header bits 30-31."""

    BYTE = 0
    DWORD = 2


class SdmaConstFillDw(IntEnum):
    HEADER = 0
    DST_ADDR_LO = 1
    DST_ADDR_HI = 2
    DATA = 3
    COUNT = 4


class SdmaTimestampDw(IntEnum):
    HEADER = 0
    ADDR_LO = 1
    ADDR_HI = 2
