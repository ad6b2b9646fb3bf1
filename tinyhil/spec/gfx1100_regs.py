"""The gfx1100 (Navi 31) register map: IP bases and the registers a minimal driver uses, one table for both sides.

Every number cites ``docs/gfx1100.md`` "The register interface" (section in the comment). A register is (IP,
segment, offset); its absolute **dword** address is ``IP_BASES[ip][segment] + offset`` (section 2.1); the BAR5 byte
offset is the dword address times 4. The emulator's gfx1100 front end and a driver import these same values. Offsets
that page gives only by name come from the public register headers (Linux ``asic_reg/*_offset.h`` and
``*_sh_mask.h`` for gc 11.0.0, mmhub 3.0.0, nbio 4.3.0, mp 13.0.0, osssys 6.0.0, hdp 6.0.0); ``docs/gfx1100.md``
lists those.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from .amdgpu import Field

__all__ = [
    "BAR5_BYTES",
    "BAR5_DWORDS",
    "BIF_DOORBELL_INT_CNTL_RAS_ATHUB_ERR_EVENT_INTERRUPT_STATUS",
    "BIF_DOORBELL_INT_CNTL_RAS_CNTLR_INTERRUPT_STATUS",
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
    "GRBM_SOFT_RESET_SOFT_RESET_CP",
    "GRBM_SOFT_RESET_SOFT_RESET_CPC",
    "GRBM_SOFT_RESET_SOFT_RESET_SDMA0",
    "HQD_BANKED_FIRST",
    "HQD_BANKED_LAST",
    "IH_RB_WPTR_OFFSET",
    "INVALIDATE_ENG17_REQ_PER_VMID_INVALIDATE_REQ",
    "IP_BASES",
    "IP_VERSIONS",
    "MC_VM_SYSTEM_APERTURE_LOGICAL_ADDR",
    "RCC_DOORBELL_APER_EN_BIF_DOORBELL_APER_EN",
    "RLC_SAFE_MODE_CMD",
    "S2A_DOORBELL_ENTRY_ENABLE",
    "S2A_DOORBELL_ENTRY_RANGE_OFFSET",
    "S2A_DOORBELL_ENTRY_RANGE_SIZE",
    "SDMA0_F32_CNTL_HALT",
    "SDMA0_QUEUE0_DOORBELL_ENABLE",
    "SDMA0_QUEUE0_DOORBELL_OFFSET_OFFSET",
    "SDMA0_QUEUE0_RB_CNTL_RB_ENABLE",
    "SDMA0_QUEUE0_RB_CNTL_RB_SIZE",
    "SDMA0_QUEUE0_RB_CNTL_RPTR_WRITEBACK_ENABLE",
    "SDMA1_REGISTER_STRIDE",
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
_hdp = IP_BASES[HwIp.HDP]


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
    # MM hub system aperture, L2 and identity aperture (section 4, 10)
    MMMC_VM_AGP_BASE = _mm[0] + 0x8F0
    MMMC_VM_AGP_BOT = _mm[0] + 0x8EF
    MMMC_VM_AGP_TOP = _mm[0] + 0x8EE
    MMMC_VM_SYSTEM_APERTURE_LOW_ADDR = _mm[0] + 0x8F1
    MMMC_VM_SYSTEM_APERTURE_HIGH_ADDR = _mm[0] + 0x8F2
    MMMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB = _mm[0] + 0x8D8
    MMMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB = _mm[0] + 0x8D9
    MMMC_VM_MX_L1_TLB_CNTL = _mm[0] + 0x8F3
    MMVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32 = _mm[0] + 0x70F
    MMVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32 = _mm[0] + 0x710
    MMVM_L2_PROTECTION_FAULT_CNTL2 = _mm[0] + 0x709
    MMVM_L2_PROTECTION_FAULT_CNTL = _mm[0] + 0x708
    MMVM_L2_PROTECTION_FAULT_STATUS = _mm[0] + 0x70C
    MMVM_L2_PROTECTION_FAULT_ADDR_LO32 = _mm[0] + 0x70D
    MMVM_L2_PROTECTION_FAULT_ADDR_HI32 = _mm[0] + 0x70E
    MMVM_L2_CNTL = _mm[0] + 0x700
    MMVM_L2_CNTL2 = _mm[0] + 0x701
    MMVM_L2_CNTL3 = _mm[0] + 0x702
    MMVM_L2_CNTL4 = _mm[0] + 0x718
    MMVM_L2_CNTL5 = _mm[0] + 0x71E
    MMVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32 = _mm[0] + 0x712
    MMVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32 = _mm[0] + 0x713
    MMVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32 = _mm[0] + 0x714
    MMVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32 = _mm[0] + 0x715
    MMVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32 = _mm[0] + 0x716
    MMVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32 = _mm[0] + 0x717
    MMVM_INVALIDATE_ENG0_ADDR_RANGE_LO32 = _mm[0] + 0x787
    MMVM_INVALIDATE_ENG0_ADDR_RANGE_HI32 = _mm[0] + 0x788
    MMVM_INVALIDATE_ENG1_ADDR_RANGE_LO32 = _mm[0] + 0x789
    MMVM_INVALIDATE_ENG1_ADDR_RANGE_HI32 = _mm[0] + 0x78A
    MMVM_INVALIDATE_ENG2_ADDR_RANGE_LO32 = _mm[0] + 0x78B
    MMVM_INVALIDATE_ENG2_ADDR_RANGE_HI32 = _mm[0] + 0x78C
    MMVM_INVALIDATE_ENG3_ADDR_RANGE_LO32 = _mm[0] + 0x78D
    MMVM_INVALIDATE_ENG3_ADDR_RANGE_HI32 = _mm[0] + 0x78E
    MMVM_INVALIDATE_ENG4_ADDR_RANGE_LO32 = _mm[0] + 0x78F
    MMVM_INVALIDATE_ENG4_ADDR_RANGE_HI32 = _mm[0] + 0x790
    MMVM_INVALIDATE_ENG5_ADDR_RANGE_LO32 = _mm[0] + 0x791
    MMVM_INVALIDATE_ENG5_ADDR_RANGE_HI32 = _mm[0] + 0x792
    MMVM_INVALIDATE_ENG6_ADDR_RANGE_LO32 = _mm[0] + 0x793
    MMVM_INVALIDATE_ENG6_ADDR_RANGE_HI32 = _mm[0] + 0x794
    MMVM_INVALIDATE_ENG7_ADDR_RANGE_LO32 = _mm[0] + 0x795
    MMVM_INVALIDATE_ENG7_ADDR_RANGE_HI32 = _mm[0] + 0x796
    MMVM_INVALIDATE_ENG8_ADDR_RANGE_LO32 = _mm[0] + 0x797
    MMVM_INVALIDATE_ENG8_ADDR_RANGE_HI32 = _mm[0] + 0x798
    MMVM_INVALIDATE_ENG9_ADDR_RANGE_LO32 = _mm[0] + 0x799
    MMVM_INVALIDATE_ENG9_ADDR_RANGE_HI32 = _mm[0] + 0x79A
    MMVM_INVALIDATE_ENG10_ADDR_RANGE_LO32 = _mm[0] + 0x79B
    MMVM_INVALIDATE_ENG10_ADDR_RANGE_HI32 = _mm[0] + 0x79C
    MMVM_INVALIDATE_ENG11_ADDR_RANGE_LO32 = _mm[0] + 0x79D
    MMVM_INVALIDATE_ENG11_ADDR_RANGE_HI32 = _mm[0] + 0x79E
    MMVM_INVALIDATE_ENG12_ADDR_RANGE_LO32 = _mm[0] + 0x79F
    MMVM_INVALIDATE_ENG12_ADDR_RANGE_HI32 = _mm[0] + 0x7A0
    MMVM_INVALIDATE_ENG13_ADDR_RANGE_LO32 = _mm[0] + 0x7A1
    MMVM_INVALIDATE_ENG13_ADDR_RANGE_HI32 = _mm[0] + 0x7A2
    MMVM_INVALIDATE_ENG14_ADDR_RANGE_LO32 = _mm[0] + 0x7A3
    MMVM_INVALIDATE_ENG14_ADDR_RANGE_HI32 = _mm[0] + 0x7A4
    MMVM_INVALIDATE_ENG15_ADDR_RANGE_LO32 = _mm[0] + 0x7A5
    MMVM_INVALIDATE_ENG15_ADDR_RANGE_HI32 = _mm[0] + 0x7A6
    MMVM_INVALIDATE_ENG16_ADDR_RANGE_LO32 = _mm[0] + 0x7A7
    MMVM_INVALIDATE_ENG16_ADDR_RANGE_HI32 = _mm[0] + 0x7A8
    MMVM_INVALIDATE_ENG17_ADDR_RANGE_LO32 = _mm[0] + 0x7A9
    MMVM_INVALIDATE_ENG17_ADDR_RANGE_HI32 = _mm[0] + 0x7AA
    # GC 11.0.0 hub (section 4)
    GCMC_VM_FB_LOCATION_BASE = _gc[0] + 0x1678
    GCMC_VM_FB_LOCATION_TOP = _gc[0] + 0x1679
    GCVM_L2_PROTECTION_FAULT_STATUS = _gc[0] + 0x15C8
    GCVM_L2_PROTECTION_FAULT_CNTL = _gc[0] + 0x15C4  # its fields: tinyhil.spec.gfx1100_ih
    GCVM_L2_PROTECTION_FAULT_ADDR_LO32 = _gc[0] + 0x15C9  # the faulting page (address >> 12), bits 31:0
    GCVM_L2_PROTECTION_FAULT_ADDR_HI32 = _gc[0] + 0x15CA  # ... bits 35:32
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
    # GC hub system aperture, L2 and identity aperture (section 4, 10)
    GCMC_VM_AGP_BASE = _gc[0] + 0x167C
    GCMC_VM_AGP_BOT = _gc[0] + 0x167B
    GCMC_VM_AGP_TOP = _gc[0] + 0x167A
    GCMC_VM_SYSTEM_APERTURE_LOW_ADDR = _gc[0] + 0x167D
    GCMC_VM_SYSTEM_APERTURE_HIGH_ADDR = _gc[0] + 0x167E
    GCMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB = _gc[0] + 0x15A8
    GCMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB = _gc[0] + 0x15A9
    GCMC_VM_MX_L1_TLB_CNTL = _gc[0] + 0x167F
    GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32 = _gc[0] + 0x15CB
    GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32 = _gc[0] + 0x15CC
    GCVM_L2_PROTECTION_FAULT_CNTL2 = _gc[0] + 0x15C5
    GCVM_L2_CNTL = _gc[0] + 0x15BC
    GCVM_L2_CNTL2 = _gc[0] + 0x15BD
    GCVM_L2_CNTL3 = _gc[0] + 0x15BE
    GCVM_L2_CNTL4 = _gc[0] + 0x15D4
    GCVM_L2_CNTL5 = _gc[0] + 0x15DA
    GCVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32 = _gc[0] + 0x15CE
    GCVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32 = _gc[0] + 0x15CF
    GCVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32 = _gc[0] + 0x15D0
    GCVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32 = _gc[0] + 0x15D1
    GCVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32 = _gc[0] + 0x15D2
    GCVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32 = _gc[0] + 0x15D3
    GCVM_INVALIDATE_ENG0_ADDR_RANGE_LO32 = _gc[0] + 0x16CF
    GCVM_INVALIDATE_ENG0_ADDR_RANGE_HI32 = _gc[0] + 0x16D0
    GCVM_INVALIDATE_ENG1_ADDR_RANGE_LO32 = _gc[0] + 0x16D1
    GCVM_INVALIDATE_ENG1_ADDR_RANGE_HI32 = _gc[0] + 0x16D2
    GCVM_INVALIDATE_ENG2_ADDR_RANGE_LO32 = _gc[0] + 0x16D3
    GCVM_INVALIDATE_ENG2_ADDR_RANGE_HI32 = _gc[0] + 0x16D4
    GCVM_INVALIDATE_ENG3_ADDR_RANGE_LO32 = _gc[0] + 0x16D5
    GCVM_INVALIDATE_ENG3_ADDR_RANGE_HI32 = _gc[0] + 0x16D6
    GCVM_INVALIDATE_ENG4_ADDR_RANGE_LO32 = _gc[0] + 0x16D7
    GCVM_INVALIDATE_ENG4_ADDR_RANGE_HI32 = _gc[0] + 0x16D8
    GCVM_INVALIDATE_ENG5_ADDR_RANGE_LO32 = _gc[0] + 0x16D9
    GCVM_INVALIDATE_ENG5_ADDR_RANGE_HI32 = _gc[0] + 0x16DA
    GCVM_INVALIDATE_ENG6_ADDR_RANGE_LO32 = _gc[0] + 0x16DB
    GCVM_INVALIDATE_ENG6_ADDR_RANGE_HI32 = _gc[0] + 0x16DC
    GCVM_INVALIDATE_ENG7_ADDR_RANGE_LO32 = _gc[0] + 0x16DD
    GCVM_INVALIDATE_ENG7_ADDR_RANGE_HI32 = _gc[0] + 0x16DE
    GCVM_INVALIDATE_ENG8_ADDR_RANGE_LO32 = _gc[0] + 0x16DF
    GCVM_INVALIDATE_ENG8_ADDR_RANGE_HI32 = _gc[0] + 0x16E0
    GCVM_INVALIDATE_ENG9_ADDR_RANGE_LO32 = _gc[0] + 0x16E1
    GCVM_INVALIDATE_ENG9_ADDR_RANGE_HI32 = _gc[0] + 0x16E2
    GCVM_INVALIDATE_ENG10_ADDR_RANGE_LO32 = _gc[0] + 0x16E3
    GCVM_INVALIDATE_ENG10_ADDR_RANGE_HI32 = _gc[0] + 0x16E4
    GCVM_INVALIDATE_ENG11_ADDR_RANGE_LO32 = _gc[0] + 0x16E5
    GCVM_INVALIDATE_ENG11_ADDR_RANGE_HI32 = _gc[0] + 0x16E6
    GCVM_INVALIDATE_ENG12_ADDR_RANGE_LO32 = _gc[0] + 0x16E7
    GCVM_INVALIDATE_ENG12_ADDR_RANGE_HI32 = _gc[0] + 0x16E8
    GCVM_INVALIDATE_ENG13_ADDR_RANGE_LO32 = _gc[0] + 0x16E9
    GCVM_INVALIDATE_ENG13_ADDR_RANGE_HI32 = _gc[0] + 0x16EA
    GCVM_INVALIDATE_ENG14_ADDR_RANGE_LO32 = _gc[0] + 0x16EB
    GCVM_INVALIDATE_ENG14_ADDR_RANGE_HI32 = _gc[0] + 0x16EC
    GCVM_INVALIDATE_ENG15_ADDR_RANGE_LO32 = _gc[0] + 0x16ED
    GCVM_INVALIDATE_ENG15_ADDR_RANGE_HI32 = _gc[0] + 0x16EE
    GCVM_INVALIDATE_ENG16_ADDR_RANGE_LO32 = _gc[0] + 0x16EF
    GCVM_INVALIDATE_ENG16_ADDR_RANGE_HI32 = _gc[0] + 0x16F0
    GCVM_INVALIDATE_ENG17_ADDR_RANGE_LO32 = _gc[0] + 0x16F1
    GCVM_INVALIDATE_ENG17_ADDR_RANGE_HI32 = _gc[0] + 0x16F2
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
    # GC 11.0.0 misc and clock gating (sections 10, 11 steps 15, 17, 19)
    SDMA0_WATCHDOG_CNTL = _gc[0] + 0x2E
    SDMA0_UTCL1_CNTL = _gc[0] + 0x3C
    SDMA0_UTCL1_PAGE = _gc[0] + 0x3F
    SDMA0_RLC_CGCG_CTRL = _gc[0] + 0x5C
    SDMA1_CNTL = _gc[0] + 0x61C
    SDMA1_WATCHDOG_CNTL = _gc[0] + 0x62E
    SDMA1_UTCL1_CNTL = _gc[0] + 0x63C
    SDMA1_UTCL1_PAGE = _gc[0] + 0x63F
    SDMA1_RLC_CGCG_CTRL = _gc[0] + 0x65C
    GRBM_CNTL = _gc[0] + 0xDA0
    CP_RB_WPTR_POLL_CNTL = _gc[0] + 0xF62
    CP_INT_CNTL = _gc[0] + 0x1DE9
    RLC_SPM_MC_CNTL = _gc[1] + 0x982
    TCP_CNTL = _gc[1] + 0x19A2
    RLC_CNTL = _gc[1] + 0x4C00
    RLC_CGTT_MGCG_OVERRIDE = _gc[1] + 0x4C48
    RLC_CGCG_CGLS_CTRL = _gc[1] + 0x4C49
    RLC_SRM_CNTL = _gc[1] + 0x4C80
    SDMA1_F32_CNTL = _gc[1] + 0x58BA
    MM_ATC_L2_MISC_CG = _mm[0] + 0x6CD  # MMHUB 3.0.0
    # OSSSYS 6.0.0 (IH, section 10)
    IH_RB_CNTL = _ih[0] + 0x80
    IH_RB_RPTR = _ih[0] + 0x83
    IH_RB_WPTR = _ih[0] + 0x84
    IH_RB_BASE = _ih[0] + 0x81
    IH_RB_BASE_HI = _ih[0] + 0x82
    IH_RB_WPTR_ADDR_HI = _ih[0] + 0x85
    IH_RB_WPTR_ADDR_LO = _ih[0] + 0x86
    IH_DOORBELL_RPTR = _ih[0] + 0x87
    IH_RB_CNTL_RING1 = _ih[0] + 0x8C
    IH_RB_BASE_RING1 = _ih[0] + 0x8D
    IH_RB_BASE_HI_RING1 = _ih[0] + 0x8E
    IH_RB_RPTR_RING1 = _ih[0] + 0x8F
    IH_RB_WPTR_RING1 = _ih[0] + 0x90
    IH_DOORBELL_RPTR_RING1 = _ih[0] + 0x93
    IH_INT_FLOOD_CNTL = _ih[0] + 0xD5
    IH_STORM_CLIENT_LIST_CNTL = _ih[0] + 0xDA
    IH_MSI_STORM_CTRL = _ih[0] + 0xF1
    # HDP 6.0.0 (section 10)
    HDP_MEM_POWER_CTRL = _hdp[0] + 0xD4


# The HQD registers GRBM_GFX_CNTL banks by (me, pipe, queue) (section 9): CP_MQD_BASE_ADDR .. CP_HQD_PQ_WPTR_HI,
# the 56 registers AM writes from the MQD, plus the dequeue status just past them.
HQD_BANKED_FIRST: Final = Reg.CP_MQD_BASE_ADDR
HQD_BANKED_LAST: Final = _gc[0] + 0x1FE8  # CP_HQD_DEQUEUE_STATUS
SDMA1_REGISTER_STRIDE: Final = Reg.SDMA1_CNTL - Reg.SDMA0_CNTL  # section 8: SDMA1's copies sit 0x600 dwords above
SH_MEM_BANKED: Final = frozenset({Reg.SH_MEM_BASES, Reg.SH_MEM_CONFIG})  # banked by GRBM_GFX_CNTL.vmid

# Fields (section and register in the name).
GRBM_GFX_CNTL_PIPEID: Final = Field("pipeid", 0, 2)
GRBM_GFX_CNTL_MEID: Final = Field("meid", 2, 2)
GRBM_GFX_CNTL_VMID: Final = Field("vmid", 4, 4)
GRBM_GFX_CNTL_QUEUEID: Final = Field("queueid", 8, 3)
GRBM_SOFT_RESET_SOFT_RESET_CP: Final = Field("soft_reset_cp", 0, 1)
GRBM_SOFT_RESET_SOFT_RESET_CPC: Final = Field("soft_reset_cpc", 18, 1)
GRBM_SOFT_RESET_SOFT_RESET_SDMA0: Final = Field("soft_reset_sdma0", 23, 1)
# *MC_VM_SYSTEM_APERTURE_LOW_ADDR / _HIGH_ADDR: MC address >> 18 (256 KB units; HIGH is inclusive, section 4).
MC_VM_SYSTEM_APERTURE_LOGICAL_ADDR: Final = Field("logical_addr", 0, 30)
IH_RB_WPTR_OFFSET: Final = Field("offset", 2, 16)  # IH_RB_WPTR / _RPTR: ring byte offset bits 17:2 (section 10)
RLC_SAFE_MODE_CMD: Final = Field("cmd", 0, 1)  # the RLC clears it when it has acted (section 10)
# BIF_BX0_BIF_DOORBELL_INT_CNTL: the RAS status bits that must read 0 (section 10).
BIF_DOORBELL_INT_CNTL_RAS_CNTLR_INTERRUPT_STATUS: Final = Field("ras_cntlr_interrupt_status", 1, 1)
BIF_DOORBELL_INT_CNTL_RAS_ATHUB_ERR_EVENT_INTERRUPT_STATUS: Final = Field("ras_athub_err_event_interrupt_status", 2, 1)
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
