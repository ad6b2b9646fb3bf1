"""The gfx1100 bring-up over the bridge: discovery, then the IP blocks in order (section 11), and their fini.

``docs/gfx1100.md``, "The USB-path driver". :class:`Gfx1100Boot` reads the VRAM size and the discovery binary
(steps 2-3), decides between the cold boot and section 12's partial path (step 4: ``SCRATCH_REG7`` reads the booted
mark, ``SCRATCH_REG6`` 0, no protection fault), runs step 4a's mode-1 reset for a board whose sOS is alive but that
no driver closed cleanly, then runs its block list:

| block | module | init (cold; partial) |
|---|---|---|
| SOC | :mod:`~tinyhil.usbgpu.gfx1100.soc` | STRAP2, doorbell aperture; nothing |
| GMC | :mod:`~tinyhil.usbgpu.gfx1100.gmc` | the MM hub; nothing |
| IH | :mod:`~tinyhil.usbgpu.gfx1100.ih` | both rings; nothing |
| PSP | :mod:`~tinyhil.usbgpu.gfx1100.psp` | bootloader, ring, firmware; nothing |
| SMU | :mod:`~tinyhil.usbgpu.gfx1100.smu` | driver table, features; nothing |
| MEC | :mod:`~tinyhil.usbgpu.gfx1100.mec` | RLC autoload wait; dequeue + CP reset; then the GC hub, MEC, GFX misc |
| SDMA | :mod:`~tinyhil.usbgpu.gfx1100.sdma` | both engines, S2A port 2 |

then every clock to its top level (the SMU), every block's clock gating in list order (SOC, then MEC), and the
booted mark. :meth:`Gfx1100Boot.shutdown` runs every block's fini in reverse order and marks the board cleanly
closed. The register values of sections 4 and 10 are tables of the spec module of each block
(:mod:`tinyhil.spec.gfx1100_gmc`, ``_ih``, ``_mec``, ``_sdma``, ``_soc``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from tinyhil.amdgpu.firmware import FirmwareSource
from tinyhil.errors import DeviceError, DeviceTimeout
from tinyhil.spec import gfx1100_smu as values
from tinyhil.spec.gfx1100_discovery import BINARY_SIGNATURE, DISCOVERY_TMR_OFFSET, IP_DISCOVERY_SIGNATURE
from tinyhil.spec.gfx1100_gmc import FB_BLOCK_BYTES
from tinyhil.spec.gfx1100_regs import Reg
from tinyhil.spec.gfx1100_smu import SmuDebugMsg, SmuMsg
from tinyhil.spec.gfx1100_soc import BOOTED_SCRATCH_REG7
from tinyhil.usbgpu.gfx1100.block import BootState, IpBlock
from tinyhil.usbgpu.gfx1100.gmc import GmcBlock
from tinyhil.usbgpu.gfx1100.ih import IhBlock
from tinyhil.usbgpu.gfx1100.layout import BOOT_BYTES, BootLayout
from tinyhil.usbgpu.gfx1100.mec import MecBlock
from tinyhil.usbgpu.gfx1100.psp import PspBlock
from tinyhil.usbgpu.gfx1100.registers import Gfx1100Registers
from tinyhil.usbgpu.gfx1100.sdma import SdmaBlock
from tinyhil.usbgpu.gfx1100.smu import SmuBlock
from tinyhil.usbgpu.gfx1100.soc import SocBlock

__all__ = ["Gfx1100Boot"]

_DWORD: Final = struct.Struct("<I")
_MB: Final = 1 << 20
_TABLE_INFO_OFFSET: Final = 12  # section 3: binary_header.table_info[0] (IP_DISCOVERY): u16 offset first
_FB_LOCATION: Final = 0xFF_FFFF  # *MC_VM_FB_LOCATION_BASE / _TOP: the 16 MB block number, bits 23:0
_BOOTED_DIRTY: Final = 1  # SCRATCH_REG6 while a driver runs the board; 0 once it closed cleanly


class Gfx1100Boot(BootState):
    """The bring-up of section 11 (and the partial boot and shutdown of section 12) over :class:`Gfx1100Registers`,
    as the IP blocks of :attr:`blocks`, in that order.

    Raises (every step): DeviceError naming the step and what the GPU answered; DeviceTimeout for a wait.
    """

    def __init__(self, regs: Gfx1100Registers, firmware: FirmwareSource) -> None:
        super().__init__(regs, firmware)
        self.soc = SocBlock(self)
        self.gmc = GmcBlock(self)
        self.ih = IhBlock(self)
        self.psp = PspBlock(self)
        self.smu = SmuBlock(self)
        self.mec = MecBlock(self, self.gmc)
        self.sdma = SdmaBlock(self)
        self.blocks: tuple[IpBlock, ...] = (self.soc, self.gmc, self.ih, self.psp, self.smu, self.mec, self.sdma)

    # --- steps 2-4 ---
    def discover(self) -> int:
        """Steps 2-3: VRAM size from 0xDE3, the discovery signatures, FB_BASE; returns the VRAM bytes."""
        regs = self.regs
        vram_bytes = regs.read(Reg.RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE) * _MB
        if vram_bytes < 2 * BOOT_BYTES:  # 0: no gfx1100 (Navi 31) answers, the only GPU the USB path drives
            gpu = ": not a gfx1100" if not vram_bytes else ""
            raise DeviceError(f"RCC_CONFIG_MEMSIZE (BAR5 {Reg.RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE * 4:#x}) reads "
                              f"{vram_bytes >> 20} MB, expected >= 64 MB{gpu}", op="boot")  # fmt: skip
        at = vram_bytes - DISCOVERY_TMR_OFFSET
        binary, offset = struct.unpack("<I8xH", regs.vram_read(at, _TABLE_INFO_OFFSET + 2))
        if binary != BINARY_SIGNATURE:
            raise DeviceError(f"discovery binary signature {binary:#x}, expected {BINARY_SIGNATURE:#x}", op="boot")
        ipds = _DWORD.unpack(regs.vram_read(at + offset, 4))[0]
        if ipds != IP_DISCOVERY_SIGNATURE:
            raise DeviceError(f"IP discovery signature {ipds:#x}, expected {IP_DISCOVERY_SIGNATURE:#x}", op="boot")
        self.fb_base = (regs.read(Reg.MMMC_VM_FB_LOCATION_BASE) & _FB_LOCATION) * FB_BLOCK_BYTES
        self.fb_top = (regs.read(Reg.MMMC_VM_FB_LOCATION_TOP) & _FB_LOCATION) * FB_BLOCK_BYTES
        self.layout = BootLayout(vram_bytes)
        return vram_bytes

    def booted(self) -> bool:
        """Step 4 / section 12: whether a driver booted this GPU and closed it cleanly (the partial path)."""
        regs = self.regs
        return (
            regs.read(Reg.SCRATCH_REG7) == BOOTED_SCRATCH_REG7
            and regs.read(Reg.SCRATCH_REG6) == 0
            and regs.read(Reg.GCVM_L2_PROTECTION_FAULT_STATUS) == 0
        )

    def mode1_reset(self) -> None:
        """Step 4a (sOS alive, not closed cleanly): if the SMU answers GetSmuVersion, bus mastering off, the debug
        mailbox's Mode1Reset (C2PMSG_54 = 1), 0.5 s, bus mastering on: every block cold again, VRAM kept."""
        try:
            self.smu.send(SmuMsg.GetSmuVersion, timeout_s=values.SMU_ALIVE_TIMEOUT_S)
        except DeviceTimeout:
            raise DeviceError(
                "the PSP's sOS is alive but the board is not marked cleanly closed (SCRATCH_REG7/6) and the SMU does "
                "not answer GetSmuVersion: the mode-1 reset of section 11 step 4a needs it; power-cycle the board",
                op="boot",
            ) from None
        self.regs.set_bus_master(False)
        self.smu.send(SmuDebugMsg.Mode1Reset)
        self.regs.pause(values.MODE1_RESET_SETTLE_S)
        self.regs.set_bus_master(True)

    # --- the whole sequence ---
    def boot(self, map_memory: Callable[[], None]) -> None:
        """Steps 2-20, cold or partial; ``map_memory`` writes the VMID 0 page tables (before the hubs' context)."""
        self.discover()
        self.partial = self.booted()
        if self.regs.read(Reg.MP0_SMN_C2PMSG_81) != 0 and not self.partial:
            self.mode1_reset()
        map_memory()
        for block in self.blocks:
            block.init()
        self.smu.clocks(top=True)  # step 18
        for block in self.blocks:
            block.gate_clocks()  # step 19
        self.regs.write(Reg.SCRATCH_REG7, BOOTED_SCRATCH_REG7)  # step 20
        self.regs.write(Reg.SCRATCH_REG6, _BOOTED_DIRTY)

    def shutdown(self) -> None:
        """Section 12 fini (queues off: the caller's): each block's fini in reverse order (the HQD dequeued, clocks to
        level 0, IH ring 0 drained), then SCRATCH_REG6 = 0 (closed cleanly)."""
        for block in reversed(self.blocks):
            block.fini()
        self.regs.write(Reg.SCRATCH_REG6, 0)
