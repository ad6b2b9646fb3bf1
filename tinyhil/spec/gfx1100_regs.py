"""The gfx1100 (Navi 31) register map: IP bases and the registers a minimal driver uses, one table for both sides.

Every number cites ``spec/amdgpu-registers.md`` (section in the comment). A register is (IP, segment, offset); its
absolute **dword** address is ``IP_BASES[ip][segment] + offset`` (section 2.1); the BAR5 byte offset is the dword
address times 4. The emulator's gfx1100 front end and a driver import these same values. Offsets the spec gives
only by name come from the public register headers (Linux ``asic_reg/*_offset.h`` and ``*_sh_mask.h`` for gc 11.0.0,
mmhub 3.0.0, nbio 4.3.0, mp 13.0.0, osssys 6.0.0, hdp 6.0.0); ``docs/gfx1100.md`` lists those.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from .amdgpu import Field

__all__ = [
    "BAR5_BYTES",
    "BAR5_DWORDS",
    "CP_HQD_DEQUEUE_REQUEST_DEQUEUE_REQ",
    "CP_HQD_PQ_CONTROL_QUEUE_SIZE",
    "CP_HQD_PQ_DOORBELL_CONTROL_DOORBELL_EN",
    "CP_HQD_PQ_DOORBELL_CONTROL_DOORBELL_OFFSET",
    "CP_MEC_DOORBELL_RANGE",
    "CP_MEC_RS64_CNTL_MEC_HALT",
    "CP_MEC_RS64_CNTL_MEC_PIPE0_ACTIVE",
    "CP_MEC_RS64_CNTL_MEC_PIPE0_RESET",
    "GRBM_GFX_CNTL_MEID",
    "GRBM_GFX_CNTL_PIPEID",
    "GRBM_GFX_CNTL_QUEUEID",
    "GRBM_GFX_CNTL_VMID",
    "GRBM_SOFT_RESET_SOFT_RESET_SDMA0",
    "HQD_BANKED_FIRST",
    "HQD_BANKED_LAST",
    "INVALIDATE_ENG17_REQ_PER_VMID_INVALIDATE_REQ",
    "IP_BASES",
    "IP_VERSIONS",
    "RCC_DOORBELL_APER_EN_BIF_DOORBELL_APER_EN",
    "S2A_DOORBELL_ENTRY_ENABLE",
    "S2A_DOORBELL_ENTRY_RANGE_OFFSET",
    "S2A_DOORBELL_ENTRY_RANGE_SIZE",
    "SDMA0_F32_CNTL_HALT",
    "SDMA0_QUEUE0_DOORBELL_ENABLE",
    "SDMA0_QUEUE0_DOORBELL_OFFSET_OFFSET",
    "SDMA0_QUEUE0_RB_CNTL_RB_ENABLE",
    "SDMA0_QUEUE0_RB_CNTL_RB_SIZE",
    "SDMA0_QUEUE0_RB_CNTL_RPTR_WRITEBACK_ENABLE",
    "SH_MEM_BANKED",
    "VM_CONTEXT0_CNTL_ENABLE_CONTEXT",
    "VM_CONTEXT0_CNTL_PAGE_TABLE_BLOCK_SIZE",
    "VM_CONTEXT0_CNTL_PAGE_TABLE_DEPTH",
    "HwIp",
    "Reg",
    "reg_address",
]


class HwIp(IntEnum):
    """Hardware IP ids of the discovery table (Linux ``soc15_hw_ip.h``; section 2.2)."""

    MP1 = 1
    GC = 11
    MMHUB = 34
    ATHUB = 35
    OSSSYS = 40
    HDP = 41
    SDMA0 = 42
    SDMA1 = 43
    NBIF = 108
    MP0 = 255


# Section 2.2: Navi 31 IP versions (major, minor, revision) and bases (dwords) per segment.
IP_VERSIONS: Final[dict[HwIp, tuple[int, int, int]]] = {
    HwIp.GC: (11, 0, 0),
    HwIp.SDMA0: (6, 0, 0),
    HwIp.SDMA1: (6, 0, 0),
    HwIp.MMHUB: (3, 0, 0),
    HwIp.NBIF: (4, 3, 0),
    HwIp.MP0: (13, 0, 0),
    HwIp.MP1: (13, 0, 0),
    HwIp.HDP: (6, 0, 0),
    HwIp.OSSSYS: (6, 0, 0),
}
_GC_BASES: Final = (0x1260, 0xA000, 0x1C000, 0x2402C00)
_MP_BASES: Final = (0x16000, 0xDC0000, 0xE00000, 0xE40000, 0x243FC00)
IP_BASES: Final[dict[HwIp, tuple[int, ...]]] = {
    HwIp.GC: _GC_BASES,
    HwIp.SDMA0: _GC_BASES,  # SDMA 6 registers live in the GC register file (section 2.2)
    HwIp.SDMA1: _GC_BASES,
    HwIp.MMHUB: (0x1A000, 0x2408800),
    HwIp.NBIF: (0x0, 0x14, 0xD20, 0x10400, 0x241B000, 0x4040000),  # seg5 unverified (section 15)
    HwIp.MP0: _MP_BASES,
    HwIp.MP1: _MP_BASES,
    HwIp.HDP: (0xF20, 0x240A400),
    HwIp.OSSSYS: (0x10A0, 0x240A000),
    HwIp.ATHUB: (0xC00, 0x2408C00),
}

BAR5_BYTES: Final = 1 << 20  # section 1: 1 MB of registers
BAR5_DWORDS: Final = BAR5_BYTES // 4  # registers at dword >= 0x40000 need the index/data pairs (section 2.3)


def reg_address(ip: HwIp, segment: int, offset: int) -> int:
    """The absolute dword address of register ``offset`` in ``segment`` of ``ip`` (section 2.1)."""
    return IP_BASES[ip][segment] + offset


_gc = IP_BASES[HwIp.GC]
_mm = IP_BASES[HwIp.MMHUB]
_nb = IP_BASES[HwIp.NBIF]
_mp = IP_BASES[HwIp.MP0]
_ih = IP_BASES[HwIp.OSSSYS]


class Reg(IntEnum):
    """Absolute dword addresses of the registers the gfx1100 front end answers (spec names without ``reg``)."""

    # NBIO 4.3.0 (sections 2.3, 10)
    MM_INDEX = 0x0
    MM_DATA = 0x1
    MM_INDEX_HI = 0x6
    BIF_BX0_PCIE_INDEX2 = _nb[0] + 0xE
    BIF_BX0_PCIE_DATA2 = _nb[0] + 0xF
    BIF_BX0_PCIE_INDEX2_HI = _nb[0] + 0x11
    BIF_BX_PF0_RSMU_INDEX = _nb[1] + 0x0
    BIF_BX_PF0_RSMU_DATA = _nb[1] + 0x1
    DRIVER_SCRATCH_0 = 0x94
    DRIVER_SCRATCH_1 = 0x95
    DRIVER_SCRATCH_2 = 0x96
    RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN = _nb[2] + 0xC0
    RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE = _nb[2] + 0xC3
    BIF_BX0_BIF_DOORBELL_INT_CNTL = _nb[2] + 0xFE
    BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL = _nb[2] + 0x12D
    S2A_DOORBELL_ENTRY_0_CTRL = _nb[3] + 0x4F7640
    S2A_DOORBELL_ENTRY_2_CTRL = _nb[3] + 0x4F7642
    S2A_DOORBELL_ENTRY_3_CTRL = _nb[3] + 0x4F7643
    RCC_DEV0_EPF2_STRAP2 = _nb[5] + 0xD102
    # MP0 (PSP 13.0.0, section 5)
    MP0_SMN_C2PMSG_33 = _mp[0] + 0x61
    MP0_SMN_C2PMSG_35 = _mp[0] + 0x63
    MP0_SMN_C2PMSG_36 = _mp[0] + 0x64
    MP0_SMN_C2PMSG_64 = _mp[0] + 0x80
    MP0_SMN_C2PMSG_67 = _mp[0] + 0x83
    MP0_SMN_C2PMSG_69 = _mp[0] + 0x85
    MP0_SMN_C2PMSG_70 = _mp[0] + 0x86
    MP0_SMN_C2PMSG_71 = _mp[0] + 0x87
    MP0_SMN_C2PMSG_81 = _mp[0] + 0x91
    # MP1 (SMU 13.0.0, section 6)
    MP1_SMN_C2PMSG_53 = _mp[0] + 0x275
    MP1_SMN_C2PMSG_54 = _mp[0] + 0x276
    MP1_SMN_C2PMSG_66 = _mp[0] + 0x282
    MP1_SMN_C2PMSG_75 = _mp[0] + 0x28B
    MP1_SMN_C2PMSG_82 = _mp[0] + 0x292
    MP1_SMN_C2PMSG_90 = _mp[0] + 0x29A
    # MMHUB 3.0.0 (section 4)
    MMVM_L2_BANK_SELECT_RESERVED_CID2 = _mm[0] + 0x71B
    MMVM_CONTEXT0_CNTL = _mm[0] + 0x740
    MMVM_INVALIDATE_ENG17_SEM = _mm[0] + 0x762
    MMVM_INVALIDATE_ENG17_REQ = _mm[0] + 0x774
    MMVM_INVALIDATE_ENG17_ACK = _mm[0] + 0x786
    MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32 = _mm[0] + 0x7AB
    MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32 = _mm[0] + 0x7AC
    MMVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32 = _mm[0] + 0x7CB
    MMVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32 = _mm[0] + 0x7CC
    MMVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32 = _mm[0] + 0x7EB
    MMVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32 = _mm[0] + 0x7EC
    MMMC_VM_FB_LOCATION_BASE = _mm[0] + 0x8EC
    MMMC_VM_FB_LOCATION_TOP = _mm[0] + 0x8ED
    # GC 11.0.0 hub (section 4)
    GCMC_VM_FB_LOCATION_BASE = _gc[0] + 0x1678
    GCMC_VM_FB_LOCATION_TOP = _gc[0] + 0x1679
    GCVM_L2_PROTECTION_FAULT_STATUS = _gc[0] + 0x15C8
    GCVM_CONTEXT0_CNTL = _gc[0] + 0x1688
    GCVM_INVALIDATE_ENG17_SEM = _gc[0] + 0x16AA
    GCVM_INVALIDATE_ENG17_REQ = _gc[0] + 0x16BC
    GCVM_INVALIDATE_ENG17_ACK = _gc[0] + 0x16CE
    GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32 = _gc[0] + 0x16F3
    GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32 = _gc[0] + 0x16F4
    GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32 = _gc[0] + 0x1713
    GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32 = _gc[0] + 0x1714
    GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32 = _gc[0] + 0x1733
    GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32 = _gc[0] + 0x1734
    # GC 11.0.0: SDMA0 queue 0 (section 8)
    SDMA0_CNTL = _gc[0] + 0x01C
    SDMA0_QUEUE0_RB_CNTL = _gc[0] + 0x080
    SDMA0_QUEUE0_RB_BASE = _gc[0] + 0x081
    SDMA0_QUEUE0_RB_BASE_HI = _gc[0] + 0x082
    SDMA0_QUEUE0_RB_RPTR = _gc[0] + 0x083
    SDMA0_QUEUE0_RB_RPTR_HI = _gc[0] + 0x084
    SDMA0_QUEUE0_RB_WPTR = _gc[0] + 0x085
    SDMA0_QUEUE0_RB_WPTR_HI = _gc[0] + 0x086
    SDMA0_QUEUE0_RB_RPTR_ADDR_HI = _gc[0] + 0x088
    SDMA0_QUEUE0_RB_RPTR_ADDR_LO = _gc[0] + 0x089
    SDMA0_QUEUE0_IB_CNTL = _gc[0] + 0x08A
    SDMA0_QUEUE0_DOORBELL = _gc[0] + 0x092
    SDMA0_QUEUE0_DOORBELL_OFFSET = _gc[0] + 0x0AB
    SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI = _gc[0] + 0x0B2
    SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO = _gc[0] + 0x0B3
    SDMA0_QUEUE0_MINOR_PTR_UPDATE = _gc[0] + 0x0B5
    SDMA0_F32_CNTL = _gc[1] + 0x589A
    # GC 11.0.0: GRBM, CP, RLC (sections 9, 10)
    GRBM_SOFT_RESET = _gc[0] + 0xDA8
    CP_STAT = _gc[0] + 0xF40
    SPI_COMPUTE_QUEUE_RESET = _gc[0] + 0x1F73
    CP_MEC_DOORBELL_RANGE_LOWER = _gc[0] + 0x1DFC
    CP_MEC_DOORBELL_RANGE_UPPER = _gc[0] + 0x1DFD
    CP_MQD_BASE_ADDR = _gc[0] + 0x1FA9
    CP_MQD_BASE_ADDR_HI = _gc[0] + 0x1FAA
    CP_HQD_ACTIVE = _gc[0] + 0x1FAB
    CP_HQD_VMID = _gc[0] + 0x1FAC
    CP_HQD_PQ_BASE = _gc[0] + 0x1FB1
    CP_HQD_PQ_BASE_HI = _gc[0] + 0x1FB2
    CP_HQD_PQ_RPTR = _gc[0] + 0x1FB3
    CP_HQD_PQ_RPTR_REPORT_ADDR = _gc[0] + 0x1FB4
    CP_HQD_PQ_RPTR_REPORT_ADDR_HI = _gc[0] + 0x1FB5
    CP_HQD_PQ_WPTR_POLL_ADDR = _gc[0] + 0x1FB6
    CP_HQD_PQ_WPTR_POLL_ADDR_HI = _gc[0] + 0x1FB7
    CP_HQD_PQ_DOORBELL_CONTROL = _gc[0] + 0x1FB8
    CP_HQD_PQ_CONTROL = _gc[0] + 0x1FBA
    CP_HQD_IB_CONTROL = _gc[0] + 0x1FBE
    CP_HQD_DEQUEUE_REQUEST = _gc[0] + 0x1FC1
    CP_MQD_CONTROL = _gc[0] + 0x1FCB
    CP_HQD_EOP_BASE_ADDR = _gc[0] + 0x1FCE
    CP_HQD_EOP_BASE_ADDR_HI = _gc[0] + 0x1FCF
    CP_HQD_EOP_CONTROL = _gc[0] + 0x1FD0
    CP_HQD_AQL_CONTROL = _gc[0] + 0x1FDE
    CP_HQD_PQ_WPTR_LO = _gc[0] + 0x1FDF
    CP_HQD_PQ_WPTR_HI = _gc[0] + 0x1FE0
    GRBM_GFX_CNTL = _gc[1] + 0x900
    RLC_SAFE_MODE = _gc[1] + 0x980
    SH_MEM_BASES = _gc[1] + 0x9E3
    SH_MEM_CONFIG = _gc[1] + 0x9E4
    SCRATCH_REG6 = _gc[1] + 0x2046
    SCRATCH_REG7 = _gc[1] + 0x2047
    CP_MEC_RS64_PRGRM_CNTR_START = _gc[1] + 0x2900
    CP_MEC_RS64_CNTL = _gc[1] + 0x2904
    CP_MEC_RS64_PRGRM_CNTR_START_HI = _gc[1] + 0x2938
    RLC_RLCS_BOOTLOAD_STATUS = _gc[1] + 0x4E82
    # OSSSYS 6.0.0 (IH, section 10)
    IH_RB_CNTL = _ih[0] + 0x80
    IH_RB_RPTR = _ih[0] + 0x83
    IH_RB_WPTR = _ih[0] + 0x84


# The HQD registers GRBM_GFX_CNTL banks by (me, pipe, queue) (section 9): CP_MQD_BASE_ADDR .. CP_HQD_PQ_WPTR_HI,
# the 56 registers AM writes from the MQD, plus the dequeue status just past them.
HQD_BANKED_FIRST: Final = Reg.CP_MQD_BASE_ADDR
HQD_BANKED_LAST: Final = _gc[0] + 0x1FE8  # CP_HQD_DEQUEUE_STATUS
SH_MEM_BANKED: Final = frozenset({Reg.SH_MEM_BASES, Reg.SH_MEM_CONFIG})  # banked by GRBM_GFX_CNTL.vmid

# Fields (section and register in the name).
GRBM_GFX_CNTL_PIPEID: Final = Field("pipeid", 0, 2)
GRBM_GFX_CNTL_MEID: Final = Field("meid", 2, 2)
GRBM_GFX_CNTL_VMID: Final = Field("vmid", 4, 4)
GRBM_GFX_CNTL_QUEUEID: Final = Field("queueid", 8, 3)
GRBM_SOFT_RESET_SOFT_RESET_SDMA0: Final = Field("soft_reset_sdma0", 23, 1)
VM_CONTEXT0_CNTL_ENABLE_CONTEXT: Final = Field("enable_context", 0, 1)
VM_CONTEXT0_CNTL_PAGE_TABLE_DEPTH: Final = Field("page_table_depth", 1, 2)
VM_CONTEXT0_CNTL_PAGE_TABLE_BLOCK_SIZE: Final = Field("page_table_block_size", 3, 4)
INVALIDATE_ENG17_REQ_PER_VMID_INVALIDATE_REQ: Final = Field("per_vmid_invalidate_req", 0, 16)
SDMA0_QUEUE0_RB_CNTL_RB_ENABLE: Final = Field("rb_enable", 0, 1)
SDMA0_QUEUE0_RB_CNTL_RB_SIZE: Final = Field("rb_size", 1, 5)  # log2(ring bytes / 4)
SDMA0_QUEUE0_RB_CNTL_RPTR_WRITEBACK_ENABLE: Final = Field("rptr_writeback_enable", 12, 1)
SDMA0_QUEUE0_DOORBELL_ENABLE: Final = Field("enable", 28, 1)
SDMA0_QUEUE0_DOORBELL_OFFSET_OFFSET: Final = Field("offset", 2, 26)  # raw register value = BAR2 byte offset
SDMA0_F32_CNTL_HALT: Final = Field("halt", 0, 1)
CP_HQD_DEQUEUE_REQUEST_DEQUEUE_REQ: Final = Field("dequeue_req", 0, 4)  # 1 drain, 2 reset waves
CP_HQD_PQ_CONTROL_QUEUE_SIZE: Final = Field("queue_size", 0, 6)  # ring = 2 ** (queue_size + 1) dwords
CP_HQD_PQ_DOORBELL_CONTROL_DOORBELL_OFFSET: Final = Field("doorbell_offset", 2, 26)  # raw value = BAR2 byte offset
CP_HQD_PQ_DOORBELL_CONTROL_DOORBELL_EN: Final = Field("doorbell_en", 30, 1)
CP_MEC_DOORBELL_RANGE: Final = Field("doorbell_range", 2, 10)  # LOWER / UPPER: raw value = BAR2 byte offset
CP_MEC_RS64_CNTL_MEC_PIPE0_RESET: Final = Field("mec_pipe0_reset", 16, 1)
CP_MEC_RS64_CNTL_MEC_PIPE0_ACTIVE: Final = Field("mec_pipe0_active", 26, 1)
CP_MEC_RS64_CNTL_MEC_HALT: Final = Field("mec_halt", 30, 1)
# S2A_DOORBELL_ENTRY_n_CTRL (nbio 4.3.0): the doorbell port's range, in dword doorbell units.
RCC_DOORBELL_APER_EN_BIF_DOORBELL_APER_EN: Final = Field("bif_doorbell_aper_en", 0, 1)
S2A_DOORBELL_ENTRY_ENABLE: Final = Field("s2a_doorbell_port_enable", 0, 1)
S2A_DOORBELL_ENTRY_RANGE_OFFSET: Final = Field("s2a_doorbell_port_range_offset", 7, 10)
S2A_DOORBELL_ENTRY_RANGE_SIZE: Final = Field("s2a_doorbell_port_range_size", 17, 8)
