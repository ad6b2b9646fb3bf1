"""The gfx1100 SMU (MP1 13.0.0, section 6): the message mailbox, its messages, answers and clock ids.

Numbers cite ``docs/gfx1100.md`` "The register interface" (section in the comment); values the spec leaves open and this
project chose are marked "model".
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = [
    "MODE1_RESET_SETTLE_S",
    "SMU_ALIVE_TIMEOUT_S",
    "SMU_DPM_LEVEL_COUNT_INDEX",
    "SMU_RESPONSE_FLAG",
    "SmuClock",
    "SmuDebugMsg",
    "SmuMsg",
    "SmuResult",
]

# --- section 6: SMU (MP1 13.0.0) mailbox
SMU_DPM_LEVEL_COUNT_INDEX: Final = 0xFF  # GetDpmFreqByIndex index that asks for the number of levels
SMU_RESPONSE_FLAG: Final = 1 << 31  # a flag bit of GetDpmFreqByIndex's answer that AM masks off
SMU_ALIVE_TIMEOUT_S: Final = 0.1  # section 6: GetSmuVersion, the alive probe of step 4a
MODE1_RESET_SETTLE_S: Final = 0.5  # section 6: the sleep after the debug-mailbox Mode1Reset


class SmuMsg(IntEnum):
    """PPSMC messages AM uses on SMU 13.0.0 (section 6)."""

    GetSmuVersion = 0x2
    EnableAllSmuFeatures = 0x6
    SetDriverDramAddrHigh = 0xE
    SetDriverDramAddrLow = 0xF
    TransferTableSmu2Dram = 0x12
    SetSoftMinByFreq = 0x19
    SetSoftMaxByFreq = 0x1A
    GetDpmFreqByIndex = 0x1F
    Mode1Reset = 0x2F
    SetPptLimit = 0x32


class SmuDebugMsg(IntEnum):
    """Debug-mailbox (C2PMSG_75) messages (section 6)."""

    Mode1Reset = 0x2


class SmuResult(IntEnum):
    """C2PMSG_90 responses (section 6)."""

    OK = 0x1
    CmdRejectedBusy = 0xFC
    CmdRejectedPrereq = 0xFD
    UnknownCmd = 0xFE
    Failed = 0xFF


class SmuClock(IntEnum):
    """Clock ids of GetDpmFreqByIndex / SetSoftMin / SetSoftMax (arg bits 31:16, section 6)."""

    GFXCLK = 0
    SOCCLK = 1
    UCLK = 2
    FCLK = 3
