"""PM4 type-3 packet layouts and the SH registers DISPATCH_DIRECT reads (docs/amdgpu.md "PM4 packets").

The spec fixes the header, the opcodes and the dispatch registers; the bodies of RELEASE_MEM, WAIT_REG_MEM,
WRITE_DATA, INDIRECT_BUFFER and ACQUIRE_MEM follow the GC 9-11 PM4 conventions (GC 10/11 where 9 differs), written
next to each constant. Dword-index enums (``...Dw``) give each dword's position in the packet (header = 0).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from .amdgpu import Field

__all__ = [
    "COMPUTE_NUM_THREAD_FULL",
    "COMPUTE_PGM_ADDR_SHIFT",
    "COMPUTE_SCRATCH_BASE_SHIFT",
    "COMPUTE_TMPRING_SIZE_WAVES",
    "COMPUTE_TMPRING_SIZE_WAVESIZE",
    "DISPATCH_INITIATOR_COMPUTE_SHADER_EN",
    "DISPATCH_INITIATOR_CS_W32_EN",
    "EVENT_CACHE_FLUSH_AND_INV_TS",
    "EVENT_INDEX_END_OF_PIPE",
    "GFX1100_SHADER_ENGINES",
    "INDIRECT_BUFFER_IB_SIZE",
    "INDIRECT_BUFFER_VALID",
    "PM4_BODY_DWORDS",
    "PM4_HEADER_COUNT",
    "PM4_HEADER_OPCODE",
    "PM4_HEADER_TYPE",
    "PM4_NOP_HEADER_ONLY_COUNT",
    "PM4_TYPE_3",
    "RELEASE_MEM_DATA_SEL",
    "RELEASE_MEM_DST_SEL",
    "RELEASE_MEM_EVENT_INDEX",
    "RELEASE_MEM_EVENT_TYPE",
    "RELEASE_MEM_INT_SEL",
    "SH_REG_BASE",
    "SH_REG_END",
    "TMPRING_WAVESIZE_UNIT_BYTES",
    "UCONFIG_REG_BASE",
    "UCONFIG_REG_END",
    "USER_DATA_REGS",
    "WAIT_REG_MEM_ENGINE_SEL",
    "WAIT_REG_MEM_FUNCTION",
    "WAIT_REG_MEM_MEM_SPACE",
    "WAIT_REG_MEM_OPERATION",
    "WAIT_REG_MEM_POLL_INTERVAL",
    "WRITE_DATA_DST_SEL",
    "WRITE_DATA_ENGINE_SEL",
    "WRITE_DATA_WR_CONFIRM",
    "AcquireMemDw",
    "DispatchDirectDw",
    "IndirectBufferDw",
    "MemSpace",
    "Pm4Op",
    "ReleaseMemDataSel",
    "ReleaseMemDw",
    "ReleaseMemIntSel",
    "ShReg",
    "WaitRegMemDw",
    "WriteDataDstSel",
    "WriteDataDw",
]


# --- PM4 type-3 packets (docs/amdgpu.md "PM4 packets") ---
PM4_TYPE_3: Final = 3
PM4_HEADER_TYPE: Final = Field("type", 30, 2)
PM4_HEADER_COUNT: Final = Field("count", 16, 14)  # body dwords - 1
PM4_HEADER_OPCODE: Final = Field("opcode", 8, 8)
PM4_NOP_HEADER_ONLY_COUNT: Final = 0x3FFF  # GC convention: a NOP with count 0x3FFF is the header alone


class Pm4Op(IntEnum):
    """PM4 type-3 opcodes (header bits 8-15)."""

    NOP = 0x10
    DISPATCH_DIRECT = 0x15
    WRITE_DATA = 0x37
    WAIT_REG_MEM = 0x3C
    INDIRECT_BUFFER = 0x3F
    RELEASE_MEM = 0x49
    ACQUIRE_MEM = 0x58
    SET_SH_REG = 0x76
    SET_UCONFIG_REG = 0x79


SH_REG_BASE: Final = 0x2C00  # SET_SH_REG body[0] is the offset from here (dword register index)
SH_REG_END: Final = 0x3000
UCONFIG_REG_BASE: Final = 0xC000  # GC 9-11 UCONFIG block start (the spec leaves it open)
UCONFIG_REG_END: Final = 0x10000
USER_DATA_REGS: Final = 16


class ShReg(IntEnum):
    """SH registers DISPATCH_DIRECT reads (dword register indices, as in GC 9-11)."""

    COMPUTE_START_X = 0x2E04  # first workgroup id of the dispatch, per dimension
    COMPUTE_START_Y = 0x2E05
    COMPUTE_START_Z = 0x2E06
    COMPUTE_NUM_THREAD_X = 0x2E07
    COMPUTE_NUM_THREAD_Y = 0x2E08
    COMPUTE_NUM_THREAD_Z = 0x2E09
    COMPUTE_PGM_LO = 0x2E0C  # program address >> 8
    COMPUTE_PGM_HI = 0x2E0D
    COMPUTE_DISPATCH_SCRATCH_BASE_LO = 0x2E10  # GFX11: scratch address >> 8 (byte offset 0xB840)
    COMPUTE_DISPATCH_SCRATCH_BASE_HI = 0x2E11  # GFX11: scratch address >> 40 (byte offset 0xB844)
    COMPUTE_PGM_RSRC1 = 0x2E12  # the kernel descriptor's compute_pgm_rsrc1/2/3 (docs/rdna3.md)
    COMPUTE_PGM_RSRC2 = 0x2E13
    COMPUTE_RESOURCE_LIMITS = 0x2E15
    COMPUTE_TMPRING_SIZE = 0x2E18  # scratch waves and bytes per wave
    COMPUTE_PGM_RSRC3 = 0x2E28
    COMPUTE_USER_DATA_0 = 0x2E40  # user data 0/1: GPU address of the kernel-argument buffer
    COMPUTE_USER_DATA_1 = 0x2E41
    COMPUTE_USER_DATA_15 = 0x2E4F


COMPUTE_PGM_ADDR_SHIFT: Final = 8
# Scratch on GFX11 (docs/amdgpu.md "Scratch"): COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI hold the dispatch's scratch
# address >> 8; COMPUTE_TMPRING_SIZE.WAVES counts scratch slots per shader engine, WAVESIZE each slot's bytes in
# 256-byte units (GFX10 used 1 KiB units and a total WAVES).
COMPUTE_SCRATCH_BASE_SHIFT: Final = 8
COMPUTE_TMPRING_SIZE_WAVES: Final = Field("waves", 0, 12)
COMPUTE_TMPRING_SIZE_WAVESIZE: Final = Field("wavesize", 12, 15)
TMPRING_WAVESIZE_UNIT_BYTES: Final = 256
GFX1100_SHADER_ENGINES: Final = 6  # Navi 31: 6 SE x 2 SA x 8 CU (the discovery table's gc_num_se)
COMPUTE_NUM_THREAD_FULL: Final = Field("num_thread_full", 0, 16)  # workgroup size in this dimension


class ReleaseMemDw(IntEnum):
    """RELEASE_MEM, 7 body dwords (GC 10/11 layout)."""

    HEADER = 0
    EVENT_CNTL = 1  # event type bits 0-5, event index bits 8-11 (cache actions ignored)
    DATA_CNTL = 2  # dst_sel bits 16-17, int_sel bits 24-26, data_sel bits 29-31
    ADDR_LO = 3
    ADDR_HI = 4
    DATA_LO = 5
    DATA_HI = 6
    INT_CTXID = 7  # interrupt context passed with the event


RELEASE_MEM_EVENT_TYPE: Final = Field("event_type", 0, 6)
RELEASE_MEM_EVENT_INDEX: Final = Field("event_index", 8, 4)
RELEASE_MEM_DST_SEL: Final = Field("dst_sel", 16, 2)  # 0 memory, 1 L2: both are memory in the model
RELEASE_MEM_INT_SEL: Final = Field("int_sel", 24, 3)
RELEASE_MEM_DATA_SEL: Final = Field("data_sel", 29, 3)
EVENT_CACHE_FLUSH_AND_INV_TS: Final = 0x14
EVENT_INDEX_END_OF_PIPE: Final = 5


class ReleaseMemDataSel(IntEnum):
    NONE = 0
    VALUE_32 = 1  # DATA_LO
    VALUE_64 = 2  # DATA_HI:DATA_LO
    TIMESTAMP = 3  # the 64-bit GPU timestamp


class ReleaseMemIntSel(IntEnum):
    NONE = 0
    INTERRUPT = 1  # fire the event
    INTERRUPT_AFTER_WRITE = 2  # fire the event once the data write is confirmed (same instant in the model)


class WaitRegMemDw(IntEnum):
    """WAIT_REG_MEM, 6 body dwords (GC 9-11)."""

    HEADER = 0
    CONTROL = 1  # function bits 0-2, mem_space bits 4-5, operation bits 6-7, engine_sel bits 8-9
    ADDR_LO = 2
    ADDR_HI = 3
    REFERENCE = 4
    MASK = 5
    POLL_INTERVAL = 6  # bits 0-15, in units of 16 model clock cycles


WAIT_REG_MEM_FUNCTION: Final = Field("function", 0, 3)
WAIT_REG_MEM_MEM_SPACE: Final = Field("mem_space", 4, 2)
WAIT_REG_MEM_OPERATION: Final = Field("operation", 6, 2)  # 0 wait; others not modelled
WAIT_REG_MEM_ENGINE_SEL: Final = Field("engine_sel", 8, 2)
WAIT_REG_MEM_POLL_INTERVAL: Final = Field("poll_interval", 0, 16)


class MemSpace(IntEnum):
    REGISTER = 0  # not modelled: a packet error
    MEMORY = 1


class IndirectBufferDw(IntEnum):
    """INDIRECT_BUFFER, 3 body dwords (GC 9-11)."""

    HEADER = 0
    IB_BASE_LO = 1  # dword aligned
    IB_BASE_HI = 2
    CONTROL = 3  # ib_size bits 0-19 (dwords), valid bit 23


INDIRECT_BUFFER_IB_SIZE: Final = Field("ib_size", 0, 20)
INDIRECT_BUFFER_VALID: Final = Field("valid", 23, 1)


class WriteDataDw(IntEnum):
    """WRITE_DATA, 3 + n body dwords (GC 9-11)."""

    HEADER = 0
    CONTROL = 1  # dst_sel bits 8-11, wr_confirm bit 20, engine_sel bits 30-31
    DST_ADDR_LO = 2
    DST_ADDR_HI = 3
    DATA = 4  # first of n data dwords


WRITE_DATA_DST_SEL: Final = Field("dst_sel", 8, 4)
WRITE_DATA_WR_CONFIRM: Final = Field("wr_confirm", 20, 1)
WRITE_DATA_ENGINE_SEL: Final = Field("engine_sel", 30, 2)


class WriteDataDstSel(IntEnum):
    MEMORY = 5  # the only destination modelled (GC 9-11 "memory, async")


class AcquireMemDw(IntEnum):
    """ACQUIRE_MEM, 7 body dwords (GC 10/11); cache control, a no-op in the model."""

    HEADER = 0
    COHER_CNTL = 1
    COHER_SIZE = 2
    COHER_SIZE_HI = 3
    COHER_BASE_LO = 4
    COHER_BASE_HI = 5
    POLL_INTERVAL = 6
    GCR_CNTL = 7


class DispatchDirectDw(IntEnum):
    """DISPATCH_DIRECT, 4 body dwords: workgroup counts and the dispatch initiator."""

    HEADER = 0
    DIM_X = 1
    DIM_Y = 2
    DIM_Z = 3
    DISPATCH_INITIATOR = 4  # COMPUTE_DISPATCH_INITIATOR: DISPATCH_INITIATOR_* fields


DISPATCH_INITIATOR_COMPUTE_SHADER_EN: Final = Field("compute_shader_en", 0, 1)
DISPATCH_INITIATOR_CS_W32_EN: Final = Field("cs_w32_en", 15, 1)  # GC 10+: the dispatch runs wave32


# Fixed body sizes (dwords after the header) of the PM4 packets whose body length the spec or GC 9-11 fixes.
PM4_BODY_DWORDS: Final = {
    Pm4Op.RELEASE_MEM: len(ReleaseMemDw) - 1,
    Pm4Op.WAIT_REG_MEM: len(WaitRegMemDw) - 1,
    Pm4Op.INDIRECT_BUFFER: len(IndirectBufferDw) - 1,
    Pm4Op.ACQUIRE_MEM: len(AcquireMemDw) - 1,
    Pm4Op.DISPATCH_DIRECT: len(DispatchDirectDw) - 1,
}
