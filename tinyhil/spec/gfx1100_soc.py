"""The gfx1100 SOC facts (NBIO 4.3.0, HDP 6.0.0): indirect register access, the HDP flush, the booted mark, and the
HDP / MM ATC clock gating of step 19 (section 10).

Numbers cite ``docs/gfx1100.md`` "The register interface" (section in the comment); values the spec leaves open and this
project chose are marked "model".
"""

from __future__ import annotations

from typing import Final

from .gfx1100_reg_updates import RegUpdate

__all__ = [
    "BOOTED_SCRATCH_REG7",
    "CLOCK_GATING_SOC",
    "HDP_FLUSH_BYTE_OFFSET",
    "MM_INDEX_HI_SHIFT",
    "MM_INDEX_VRAM_FLAG",
]

HDP_FLUSH_BYTE_OFFSET: Final = 0x7F000  # model: BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL reads this (Linux's value)
MM_INDEX_VRAM_FLAG: Final = 0x8000_0000  # MM_INDEX = (addr & 0x7FFFFFFF) | 0x8000_0000 (section 2.3)
MM_INDEX_HI_SHIFT: Final = 31  # MM_INDEX_HI = addr >> 31
BOOTED_SCRATCH_REG7: Final = 0xA000_0008  # section 11 step 20 / section 12: AM's "booted" mark

# Step 19 (section 10): before RLC safe mode (HDP, MM ATC).
CLOCK_GATING_SOC: Final[tuple[RegUpdate, ...]] = (
    RegUpdate("HDP_MEM_POWER_CTRL", 0x5, 0x5),  # atomic_mem_power_ctrl_en, atomic_mem_power_ds_en
    RegUpdate("MM_ATC_L2_MISC_CG", 1 << 18 | 1 << 19),  # enable, mem_ls_enable
)
