"""The SMU block (MP1 13.0.0): the message mailbox and the debug mailbox, the driver table, the clocks (section 6).

``docs/gfx1100.md``, steps 11 and 18. On a cold boot :meth:`SmuBlock.init` hands the SMU its DRAM table and enables
every feature; :meth:`SmuBlock.clocks` sets every clock to its top DPM level after the blocks' init (or level 0 at
fini), reading each clock's levels once.
"""

from __future__ import annotations

from typing import Final

from tinyhil.errors import DeviceError
from tinyhil.spec.gfx1100_regs import Reg
from tinyhil.spec.gfx1100_smu import (
    SMU_DPM_LEVEL_COUNT_INDEX,
    SMU_RESPONSE_FLAG,
    SmuClock,
    SmuDebugMsg,
    SmuMsg,
    SmuResult,
)
from tinyhil.usbgpu.gfx1100.block import BootState

__all__ = ["SmuBlock"]

_U32: Final = 0xFFFF_FFFF
_MAILBOX: Final = (Reg.MP1_SMN_C2PMSG_66, Reg.MP1_SMN_C2PMSG_82, Reg.MP1_SMN_C2PMSG_90)  # message, arg, answer
_DEBUG_MAILBOX: Final = (Reg.MP1_SMN_C2PMSG_75, Reg.MP1_SMN_C2PMSG_53, Reg.MP1_SMN_C2PMSG_54)
_CLOCKS: Final = (SmuClock.UCLK, SmuClock.FCLK, SmuClock.SOCCLK, SmuClock.GFXCLK)  # section 11 step 18
_CLOCK_SHIFT: Final = 16  # the clock id in bits 31:16 of the argument


class SmuBlock:
    """The SMU's mailboxes and clocks: an :class:`~tinyhil.usbgpu.gfx1100.block.IpBlock`."""

    name = "smu"

    def __init__(self, state: BootState) -> None:
        self.state = state
        self.dpm_levels: dict[SmuClock, list[int]] = {}

    def init(self) -> None:
        """Step 11 (cold boot): the driver table's address, then EnableAllSmuFeatures."""
        if not self.state.partial:
            table = self.state.mc(self.state.layout.smu_table)
            self.send(SmuMsg.SetDriverDramAddrHigh, table >> 32)
            self.send(SmuMsg.SetDriverDramAddrLow, table & _U32)
            self.send(SmuMsg.EnableAllSmuFeatures)

    def gate_clocks(self) -> None:
        pass

    def fini(self) -> None:
        self.clocks(top=False)

    def send(self, message: SmuMsg | SmuDebugMsg, argument: int = 0, *, timeout_s: float | None = None) -> int:
        """Send one message (section 6; a SmuDebugMsg through the debug mailbox); returns the response argument."""
        regs = self.state.regs
        msg_reg, arg_reg, response_reg = _DEBUG_MAILBOX if isinstance(message, SmuDebugMsg) else _MAILBOX
        regs.write(response_reg, 0)
        regs.write(arg_reg, argument)
        regs.write(msg_reg, message)
        result = [0]

        def answered() -> bool:
            result[0] = regs.read(response_reg)
            return result[0] != 0

        regs.poll(answered, f"SMU {message.name}", timeout_s=timeout_s)
        if result[0] != SmuResult.OK:
            raise DeviceError(f"SMU {message.name}({argument:#x}): response {result[0]:#x}, expected 0x1", op="boot")
        return regs.read(arg_reg)

    def clocks(self, *, top: bool) -> None:
        """Step 18 (``top``: every clock to its top DPM level) or fini (level 0)."""
        for clock in _CLOCKS:
            levels = self.dpm_levels.get(clock)
            if levels is None:
                count = self.send(SmuMsg.GetDpmFreqByIndex, clock << _CLOCK_SHIFT | SMU_DPM_LEVEL_COUNT_INDEX)
                freqs = (self.send(SmuMsg.GetDpmFreqByIndex, clock << _CLOCK_SHIFT | i) for i in range(count))
                levels = self.dpm_levels[clock] = [f & ~SMU_RESPONSE_FLAG for f in freqs]
            if not levels:
                raise DeviceError(f"SMU: {clock.name} has no DPM levels", op="boot")
            mhz = levels[-1] if top else levels[0]
            self.send(SmuMsg.SetSoftMinByFreq, clock << _CLOCK_SHIFT | mhz)
            self.send(SmuMsg.SetSoftMaxByFreq, clock << _CLOCK_SHIFT | mhz)
