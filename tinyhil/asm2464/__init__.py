"""Driver side of the ASM2464 custom firmware: the controller client and the PCIe bring-up (docs/asm2464.md).

- :mod:`tinyhil.asm2464.controller`: ``Asm2464Controller`` (XDATA, 0xF2 SRAM DMA, 0xF0 TLPs, power, link).
- :mod:`tinyhil.asm2464.bringup`: ``pcie_bringup`` (bridges, BAR sizing, resizable BAR, GPU enable).
- :mod:`tinyhil.asm2464.topology`: ``PcieTopology``, ``PcieBar``, ``PcieBridge``, ``PcieWindow`` (frozen results).
- :mod:`tinyhil.asm2464.tlp`, :mod:`tinyhil.asm2464.sram`, :mod:`tinyhil.asm2464.stream`: wire encodings.
- :mod:`tinyhil.asm2464.errors`: ``PcieError``.
"""

from __future__ import annotations

from tinyhil.asm2464.bringup import DEFAULT_MEM_BASE, DEFAULT_PREF_BASE, pcie_bringup
from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.asm2464.errors import PcieError
from tinyhil.asm2464.sram import SramArm, pad_to_sectors, sectors_for
from tinyhil.asm2464.stream import MAX_MEM_ACCESS_BYTES, MAX_PLAN_PIECES, MemPiece, plan_mem_access
from tinyhil.asm2464.tlp import TlpCompletion, byte_enables, encode_tlp, is_posted
from tinyhil.asm2464.topology import PcieBar, PcieBridge, PcieTopology, PcieWindow

__all__ = [
    "DEFAULT_MEM_BASE",
    "DEFAULT_PREF_BASE",
    "MAX_MEM_ACCESS_BYTES",
    "MAX_PLAN_PIECES",
    "Asm2464Controller",
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
