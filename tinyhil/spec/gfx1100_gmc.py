"""The gfx1100 GMC (GC hub and MM hub, section 4): the memory model, the PTE / PDE bits, and each hub's bring-up
registers (sections 4, 11: AM's values, tinygrad ``ip.py``; field layouts from the mmhub 3.0.0 / gc 11.0.0
``_sh_mask.h``, docs/gfx1100.md).

Numbers cite ``docs/gfx1100.md`` "The register interface" (section in the comment); values the spec leaves open and this
project chose are marked "model".
"""

from __future__ import annotations

from enum import IntFlag
from typing import Final

from .gfx1100_reg_updates import U32_MASK, RegUpdate

__all__ = [
    "FB_BLOCK_BYTES",
    "HUB_SETUP",
    "NAVI31_FB_BASE",
    "PDE_ADDRESS_MASK",
    "PTE_ADDRESS_MASK",
    "PT_ENTRIES",
    "PT_INDEX_BITS",
    "SYSTEM_APERTURE_SHIFT",
    "VMID0_VA_START",
    "VM_CONTEXT0_CNTL_FAULT_ENABLES",
    "PteFlag",
]

# --- section 4: memory model
NAVI31_FB_BASE: Final = 0x80_0000_0000  # MMMC_VM_FB_LOCATION_BASE = 0x8000 (<< 24)
FB_BLOCK_BYTES: Final = 1 << 24  # FB_BASE / FB_TOP are in 16 MB blocks; TOP is the start of the last one
VMID0_VA_START: Final = 0x2000_0000_0000  # CONTEXT0_PAGE_TABLE_START_ADDR 0x2_0000_0000 (pages)
PT_ENTRIES: Final = 512  # per table level, u64 entries
PT_INDEX_BITS: Final = 9
PTE_ADDRESS_MASK: Final = 0x0000_FFFF_FFFF_F000  # PTE bits 47:12
PDE_ADDRESS_MASK: Final = 0x0000_FFFF_FFFF_FFC0  # PDE bits 47:6


class PteFlag(IntFlag):
    """PTE / PDE bits (gfx11, section 4)."""

    VALID = 1 << 0
    SYSTEM = 1 << 1
    SNOOPED = 1 << 2  # PDE: C (coherent)
    TMZ = 1 << 3
    EXECUTE = 1 << 4
    READABLE = 1 << 5
    WRITEABLE = 1 << 6
    PRT = 1 << 51
    PDE_IS_PTE = 1 << 54  # "P": a PDB2/1/0 entry that is a leaf (huge page)


SYSTEM_APERTURE_SHIFT: Final = 18  # *MC_VM_SYSTEM_APERTURE_LOW/HIGH_ADDR = MC address >> 18 (256 KB units)


# Steps 6 / 13 (section 4), each hub's *VM_CONTEXT0_CNTL (the rest of its value: enable_context, page_table_depth 3):
VM_CONTEXT0_CNTL_FAULT_ENABLES: Final = 0xFFFF  # bits 24:9, all the fault interrupt / default enables (AM's value)
# Each hub: AGP off, fault-retry, L1 TLB, L2 cache controls, identity aperture off, the
# invalidate ranges of engines 0-17. (The system aperture and the default pages depend on the board: the driver.)
HUB_SETUP: Final[tuple[RegUpdate, ...]] = (
    RegUpdate("{hub}MC_VM_AGP_BASE", 0),
    RegUpdate("{hub}MC_VM_AGP_BOT", 0xFF_FFFF),  # 0xFFFF_FFFF_FFFF >> 24: AGP off
    RegUpdate("{hub}MC_VM_AGP_TOP", 0),
    RegUpdate("{hub}VM_L2_PROTECTION_FAULT_CNTL2", 1 << 18, 1 << 18),  # active_page_migration_pte_read_retry
    # enable_l1_tlb, system_access_mode 3 [4:3], advanced driver model [6], unmapped access 0 [5], MTYPE UC 3 [13:11]
    RegUpdate("{hub}MC_VM_MX_L1_TLB_CNTL", 0x1859, 0x3879),
    # enable_l2_cache, default page out to system memory [11], context1_identity_access_mode 1 [20:19]; fragment
    # processing [1], pde0 tag mode [8], pde fault classification [18], identity fragment size [25:21] 0
    RegUpdate("{hub}VM_L2_CNTL", 0x8_0801, 0x3FC_0903),
    RegUpdate("{hub}VM_L2_CNTL2", 0x3, 0x3),  # invalidate_all_l1_tlbs, invalidate_l2_cache
    RegUpdate("{hub}VM_L2_CNTL3", 0x8013_0009),  # 4k / bigk associativity, bigk fragment size 6, bank_select 9
    RegUpdate("{hub}VM_L2_CNTL4", 0x1),  # l2_cache_4k_partition_count 1
    RegUpdate("{hub}VM_L2_CNTL5", 0x1FF << 5),  # walker_priority_client_id 0x1FF
    RegUpdate("{hub}VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32", U32_MASK),  # LOW 0xF_FFFF_FFFF, HIGH 0: off
    RegUpdate("{hub}VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32", 0xF),
    RegUpdate("{hub}VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32", 0),
    RegUpdate("{hub}VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32", 0),
    RegUpdate("{hub}VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32", 0),
    RegUpdate("{hub}VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32", 0),
    *(RegUpdate(f"{{hub}}VM_INVALIDATE_ENG{engine}_ADDR_RANGE_{half}", value)
      for engine in range(18) for half, value in (("LO32", U32_MASK), ("HI32", 0x1F))),  # 0x1F_FFFF_FFFF
)  # fmt: skip
