"""Driver side of the ASM2464 custom firmware: the controller client and the PCIe bring-up (spec/asm24.md).

- :mod:`tinyhil.asm24.controller`: ``Asm24Controller`` (XDATA, 0xF2 SRAM DMA, 0xF0 TLPs, power, link).
- :mod:`tinyhil.asm24.bringup`: ``pcie_bringup`` (bridges, BAR sizing, resizable BAR, GPU enable).
- :mod:`tinyhil.asm24.topology`: ``PcieTopology``, ``PcieBar``, ``PcieBridge``, ``PcieWindow`` (frozen results).
- :mod:`tinyhil.asm24.tlp`, :mod:`tinyhil.asm24.sram`, :mod:`tinyhil.asm24.stream`: wire encodings.
- :mod:`tinyhil.asm24.errors`: ``PcieError``.
"""

from __future__ import annotations

from tinyhil.asm24.bringup import DEFAULT_MEM_BASE, DEFAULT_PREF_BASE, pcie_bringup
from tinyhil.asm24.controller import Asm24Controller
from tinyhil.asm24.errors import PcieError
from tinyhil.asm24.sram import SramArm, pad_to_sectors, sectors_for
from tinyhil.asm24.stream import MAX_MEM_ACCESS_BYTES, MAX_PLAN_PIECES, MemPiece, plan_mem_access
from tinyhil.asm24.tlp import TlpCompletion, byte_enables, encode_tlp, is_posted
from tinyhil.asm24.topology import PcieBar, PcieBridge, PcieTopology, PcieWindow

__all__ = [
    "DEFAULT_MEM_BASE",
    "DEFAULT_PREF_BASE",
    "MAX_MEM_ACCESS_BYTES",
    "MAX_PLAN_PIECES",
    "Asm24Controller",
    "MemPiece",
    "PcieBar",
    "PcieBridge",
    "PcieError",
    "PcieTopology",
    "PcieWindow",
    "SramArm",
    "TlpCompletion",
    "byte_enables",
    "encode_tlp",
    "is_posted",
    "pad_to_sectors",
    "pcie_bringup",
    "plan_mem_access",
    "sectors_for",
]
