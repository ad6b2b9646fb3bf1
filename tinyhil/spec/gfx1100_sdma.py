"""The gfx1100 SDMA engines' bring-up registers (step 17, section 10: AM's values, tinygrad ``ip.py``)."""

from __future__ import annotations

from typing import Final

from .gfx1100_reg_updates import FieldUpdate, RegUpdate

__all__ = [
    "SDMA_ENGINE",
]

# Step 17, each SDMA engine: watchdog, UTCL1, unhalt (halt 0, th1_reset 0), trap_enable.
SDMA_ENGINE: Final[tuple[RegUpdate | FieldUpdate, ...]] = (
    RegUpdate("SDMA{sdma}_WATCHDOG_CNTL", 100, 0xFF),  # queue_hang_count 100 (100 ms units: 10 s)
    RegUpdate("SDMA{sdma}_UTCL1_CNTL", 3 << 9 | 9, 0x3 << 9 | 0x1F),  # resp_mode 3, redo_delay 9
    RegUpdate("SDMA{sdma}_UTCL1_PAGE", 2 << 12 | 3 << 14 | 1 << 24, 0xF << 12 | 1 << 24),  # rd noa, wr bypass
    FieldUpdate.of("SDMA{sdma}_F32_CNTL", halt=0, th1_reset=0),
    FieldUpdate.of("SDMA{sdma}_CNTL", trap_enable=1),
)
