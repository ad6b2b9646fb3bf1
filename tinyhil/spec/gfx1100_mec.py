"""The gfx1100 GFX side of the bring-up (GC 11.0.0: GRBM, RLC, CP/MEC; sections 10, 12): the misc registers, GRBM,
the CP soft-reset pulse and GFX clock gating (AM's values, tinygrad ``ip.py``; docs/gfx1100.md).
"""

from __future__ import annotations

from typing import Final

from .gfx1100_reg_updates import RegUpdate

__all__ = [
    "CLOCK_GATING_GFX",
    "CP_SOFT_RESET_S",
    "GFX_MISC",
    "GRBM_CNTL_READ_TIMEOUT",
]

CP_SOFT_RESET_S: Final = 0.05  # section 12: the GRBM_SOFT_RESET cp + cpc pulse of the partial path

# Step 15 (section 10): TCP / RLC misc (before the S2A ports), then GRBM_CNTL.
GFX_MISC: Final[tuple[RegUpdate, ...]] = (
    RegUpdate("TCP_CNTL", 1 << 29, 1 << 29),  # the golden bit Linux ORs in
    RegUpdate("RLC_CNTL", 0x1),  # rlc_enable_f32
    RegUpdate("RLC_SRM_CNTL", 0x3, 0x3),  # srm_enable, auto_incr_addr
    RegUpdate("RLC_SPM_MC_CNTL", 0xF),
)
GRBM_CNTL_READ_TIMEOUT: Final = RegUpdate("GRBM_CNTL", 0xFF, 0xFF)

# Step 19 (section 10), inside RLC safe mode: GFX clock gating.
CLOCK_GATING_GFX: Final[tuple[RegUpdate, ...]] = (
    # cgcg_en, cgls_en, cgls_rep_compansat_delay 0xF [7:2], cgcg_gfx_idle_threshold 0x36 [26:8]
    RegUpdate("RLC_CGCG_CGLS_CTRL", 0x36 << 8 | 0xF << 2 | 0x3, 0x7FF_FFFF),
    RegUpdate("CP_RB_WPTR_POLL_CNTL", 0x90 << 16 | 0x100),  # idle_poll_count 0x90, poll_frequency 0x100
    RegUpdate("CP_INT_CNTL", 0x7 << 18, 0x7 << 18),  # cmp_busy, cntx_busy, cntx_empty interrupts
    RegUpdate("SDMA0_RLC_CGCG_CTRL", 1 << 1, 1 << 1),  # cgcg_int_enable
    RegUpdate("SDMA1_RLC_CGCG_CTRL", 1 << 1, 1 << 1),
    # perfmon_clock_state 1 [10]; the fgcg / repeater / sclk / mgcg / cgls / cgcg overrides 0
    RegUpdate("RLC_CGTT_MGCG_OVERRIDE", 1 << 10, 0x73E),
)
