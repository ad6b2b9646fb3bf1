"""The SOC block (NBIO 4.3.0, HDP 6.0.0): the doorbell aperture, and the HDP / MM ATC power of clock gating.

``docs/gfx1100.md``, steps 5 and 19. A cold boot clears ``RCC_DEV0_EPF2_STRAP2.strap_no_soft_reset_dev0_f2`` (as
Linux's ``nbio_v4_3_init_registers``) and opens the BAR2 doorbell aperture.
"""

from __future__ import annotations

from tinyhil.spec import gfx1100_soc as values
from tinyhil.spec.gfx1100_regs import Reg
from tinyhil.usbgpu.gfx1100.block import BootState

__all__ = ["SocBlock"]


class SocBlock:
    """NBIO and HDP: an :class:`~tinyhil.usbgpu.gfx1100.block.IpBlock`."""

    name = "soc"

    def __init__(self, state: BootState) -> None:
        self.state = state

    def init(self) -> None:
        if not self.state.partial:
            regs = self.state.regs
            regs.update_fields(Reg.RCC_DEV0_EPF2_STRAP2, strap_no_soft_reset_dev0_f2=0)
            regs.write_fields(Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, bif_doorbell_aper_en=1)

    def gate_clocks(self) -> None:
        self.state.regs.apply(values.CLOCK_GATING_SOC)

    def fini(self) -> None:
        pass
