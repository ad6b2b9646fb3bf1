"""The gfx1100 driver's IP blocks: the :class:`IpBlock` protocol, and :class:`BootState`, what the blocks share.

As Linux's ``amdgpu_ip_block`` and tinygrad's AM blocks, each block of the chip (SOC, GMC, IH, PSP, SMU, MEC,
SDMA) is one object with an :meth:`~IpBlock.init`, a :meth:`~IpBlock.gate_clocks` and a :meth:`~IpBlock.fini`;
:class:`~tinyhil.usbgpu.gfx1100.boot.Gfx1100Boot` runs them in the order of its block list (docs/gfx1100.md).
"""

from __future__ import annotations

from typing import Protocol

from tinyhil.amdgpu.firmware import FirmwareSource
from tinyhil.usbgpu.gfx1100.layout import BootLayout
from tinyhil.usbgpu.gfx1100.registers import Gfx1100Registers

__all__ = ["BootState", "IpBlock"]


class IpBlock(Protocol):
    """One IP block of the chip, as the boot runs it.

    Raises (every method): DeviceError naming the step and what the GPU answered; DeviceTimeout for a wait.
    """

    @property
    def name(self) -> str:
        """The block's name (the model's module of the same block: ``gmc``, ``ih``, ...)."""
        ...

    def init(self) -> None:
        """Bring the block up (section 11), cold or, with ``BootState.partial``, on the partial path (section 12)."""
        ...

    def gate_clocks(self) -> None:
        """Step 19: the block's clock gating, after every block's init and the clocks' top level."""
        ...

    def fini(self) -> None:
        """Section 12's fini for the block (blocks are finished in reverse order), leaving it for a partial boot."""
        ...


class BootState:
    """What the blocks share: the registers, the firmware, and what discovery and the boot found out."""

    def __init__(self, regs: Gfx1100Registers, firmware: FirmwareSource) -> None:
        self.regs = regs
        self.firmware = firmware
        self.layout = BootLayout(0)  # set by discovery
        self.fb_base = 0
        self.fb_top = 0  # MC address of the last 16 MB block of VRAM
        self.partial = False  # the board was booted and closed cleanly: section 12's partial path
        self.mec_start: int | None = None  # the MEC firmware's start address >> 2 (cold boot only)

    def mc(self, vram_offset: int) -> int:
        """The MC address of VRAM offset ``vram_offset``."""
        return self.fb_base + vram_offset
