"""The gfx1100 (Navi 31) driver's parts, one module per IP block as the model has them (docs/gfx1100.md).

- :mod:`~tinyhil.usbgpu.gfx1100.boot`: ``Gfx1100Boot``, discovery and the block list run in order.
- :mod:`~tinyhil.usbgpu.gfx1100.block`: ``IpBlock`` (the block protocol: init, gate_clocks, fini) and ``BootState``.
- the blocks: :mod:`~tinyhil.usbgpu.gfx1100.soc`, :mod:`~tinyhil.usbgpu.gfx1100.gmc`,
  :mod:`~tinyhil.usbgpu.gfx1100.ih`, :mod:`~tinyhil.usbgpu.gfx1100.psp`, :mod:`~tinyhil.usbgpu.gfx1100.smu`,
  :mod:`~tinyhil.usbgpu.gfx1100.mec`, :mod:`~tinyhil.usbgpu.gfx1100.sdma`.
- :mod:`~tinyhil.usbgpu.gfx1100.registers`: ``Gfx1100Registers``, BAR5 / BAR0 by register address and by field name.
- :mod:`~tinyhil.usbgpu.gfx1100.layout`: ``BootLayout``, the boot memory; :mod:`~tinyhil.usbgpu.gfx1100.page_tables`:
  the VMID 0 page tables.
"""

from __future__ import annotations

from tinyhil.usbgpu.gfx1100.block import BootState, IpBlock
from tinyhil.usbgpu.gfx1100.boot import Gfx1100Boot
from tinyhil.usbgpu.gfx1100.gmc import GmcBlock
from tinyhil.usbgpu.gfx1100.ih import IhBlock
from tinyhil.usbgpu.gfx1100.layout import BOOT_BYTES, BootLayout
from tinyhil.usbgpu.gfx1100.mec import MecBlock
from tinyhil.usbgpu.gfx1100.psp import PspBlock
from tinyhil.usbgpu.gfx1100.registers import Gfx1100Registers
from tinyhil.usbgpu.gfx1100.sdma import SdmaBlock
from tinyhil.usbgpu.gfx1100.smu import SmuBlock
from tinyhil.usbgpu.gfx1100.soc import SocBlock

__all__ = [
    "BOOT_BYTES",
    "BootLayout",
    "BootState",
    "Gfx1100Boot",
    "Gfx1100Registers",
    "GmcBlock",
    "IhBlock",
    "IpBlock",
    "MecBlock",
    "PspBlock",
    "SdmaBlock",
    "SmuBlock",
    "SocBlock",
]
