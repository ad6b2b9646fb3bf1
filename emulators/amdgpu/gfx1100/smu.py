"""The SMU (MP1 13.0.0) message mailbox, answering as firmware does (``docs/gfx1100.md`` section 6).

Send: the driver writes C2PMSG_90 = 0, C2PMSG_82 = argument, C2PMSG_66 = message; the firmware sets C2PMSG_90 to the
result and, for messages that return one, C2PMSG_82 to the answer. The debug mailbox (C2PMSG_75 / 53 / 54) works the
same way. Until the PSP has loaded the SMU firmware (LOAD_IP_FW type 18) nothing answers: C2PMSG_90 stays 0.

GetDpmFreqByIndex answers a level count of :data:`DPM_LEVELS` per clock and the level's MHz; an unknown message
gets UnknownCmd (0xFE) and C2PMSG_82 keeps what the driver wrote; nothing echoes the argument. Not modelled (they
answer UnknownCmd): TransferTableSmu2Dram (no SMU table is written), the regular Mode1Reset message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from tinyhil.spec.gfx1100_regs import Reg
from tinyhil.spec.gfx1100_smu import SMU_DPM_LEVEL_COUNT_INDEX, SmuClock, SmuDebugMsg, SmuMsg, SmuResult

from .regfile import RegisterFile

__all__ = ["DPM_LEVELS", "SMU_VERSION", "Smu"]

SMU_VERSION: Final = 0x004E_8500  # 78.133.0, what a 7900 XTX's SMU reported (section 6)
# model: two DPM levels per clock, in MHz (plausible Navi 31 figures, not read from a board)
DPM_LEVELS: Final[dict[SmuClock, tuple[int, int]]] = {
    SmuClock.GFXCLK: (500, 2500),
    SmuClock.SOCCLK: (500, 1200),
    SmuClock.UCLK: (96, 1249),
    SmuClock.FCLK: (400, 1900),
}
_CLOCK_SHIFT: Final = 16
_INDEX_MASK: Final = 0xFFFF


class Smu:
    """The SMU mailbox; ``messages`` lists every (message, argument) it received, answered or not."""

    def __init__(self, regs: RegisterFile, on_mode1_reset: Callable[[], None]) -> None:
        self.regs = regs
        self.on_mode1_reset = on_mode1_reset
        regs.on_write(Reg.MP1_SMN_C2PMSG_66, self._message)
        regs.on_write(Reg.MP1_SMN_C2PMSG_75, self._debug_message)
        self.reset()

    def reset(self) -> None:
        """Cold state: no firmware, nothing received."""
        self.alive = False
        self.messages: list[tuple[int, int]] = []
        self.dram_address = 0
        self.features_enabled = False
        self.soft_limits: dict[tuple[SmuClock, str], int] = {}

    def firmware_loaded(self) -> None:
        """The PSP loaded the SMU firmware: the mailbox answers from now on."""
        self.alive = True

    def _message(self, message: int) -> None:
        regs = self.regs
        argument = regs.stored(Reg.MP1_SMN_C2PMSG_82)
        self.messages.append((message, argument))
        if not self.alive:
            return
        result, answer = self._answer(message, argument)
        if answer is not None:
            regs.store(Reg.MP1_SMN_C2PMSG_82, answer)
        regs.store(Reg.MP1_SMN_C2PMSG_90, result)

    def _debug_message(self, message: int) -> None:
        regs = self.regs
        self.messages.append((message, regs.stored(Reg.MP1_SMN_C2PMSG_53)))
        if not self.alive:
            return
        if message == SmuDebugMsg.Mode1Reset:
            self.on_mode1_reset()
            regs.store(Reg.MP1_SMN_C2PMSG_54, SmuResult.OK)
        else:
            regs.store(Reg.MP1_SMN_C2PMSG_54, SmuResult.UnknownCmd)

    def _answer(self, message: int, argument: int) -> tuple[SmuResult, int | None]:
        if message == SmuMsg.GetSmuVersion:
            return SmuResult.OK, SMU_VERSION
        if message == SmuMsg.EnableAllSmuFeatures:
            self.features_enabled = True
            return SmuResult.OK, None
        if message == SmuMsg.SetDriverDramAddrHigh:
            self.dram_address = self.dram_address & 0xFFFF_FFFF | argument << 32
            return SmuResult.OK, None
        if message == SmuMsg.SetDriverDramAddrLow:
            self.dram_address = self.dram_address & ~0xFFFF_FFFF | argument
            return SmuResult.OK, None
        if message == SmuMsg.SetPptLimit:
            return SmuResult.OK, None
        clock_id, low = argument >> _CLOCK_SHIFT, argument & _INDEX_MASK
        if message in (SmuMsg.GetDpmFreqByIndex, SmuMsg.SetSoftMinByFreq, SmuMsg.SetSoftMaxByFreq):
            if clock_id not in DPM_LEVELS:
                return SmuResult.Failed, None
            clock = SmuClock(clock_id)
            levels = DPM_LEVELS[clock]
            if message == SmuMsg.GetDpmFreqByIndex:
                if low == SMU_DPM_LEVEL_COUNT_INDEX:
                    return SmuResult.OK, len(levels)
                if low >= len(levels):
                    return SmuResult.Failed, None
                return SmuResult.OK, levels[low]
            self.soft_limits[(clock, "min" if message == SmuMsg.SetSoftMinByFreq else "max")] = low
            return SmuResult.OK, None
        return SmuResult.UnknownCmd, None
