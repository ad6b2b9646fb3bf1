"""The gfx1100 (Navi 31) register interface (``docs/gfx1100.md``), a front end of the AMD GPU model.

Modules by block: ``regfile`` (the banked register file), ``bar5`` (the 1 MB register BAR and its index/data
pairs), ``discovery`` (the IP discovery binary), ``gmc`` (MC addresses, the VMID 0 page tables, TLBs), ``psp``,
``smu``, ``sdma_queue`` (SDMA0 queue 0), ``mec_queue`` (HQD-programmed compute queues), ``ih`` (IH ring 0: the
interrupt vectors), ``vm_faults`` (both hubs' protection-fault registers), ``front`` (all of them on an
:class:`~tinyhil.emulators.amdgpu.AmdGpu`), ``function`` (the GPU as a PCIe function behind the bridge). The
register map itself is :mod:`tinyhil.spec.gfx1100_regs`.
"""

from __future__ import annotations

from .bar5 import Bar5
from .discovery import GC_INFO, build_discovery, checksum16
from .front import Gfx1100Front
from .function import NAVI31_DEVICE_ID, Gfx1100Function
from .gmc import Gmc, HubRegs, Leaf, PageTableHub
from .ih import IhRing
from .mec_queue import MecQueues
from .psp import Psp
from .regfile import HqdBank, RegisterFile
from .sdma_queue import SdmaQueue0
from .smu import DPM_LEVELS, SMU_VERSION, Smu
from .vm_faults import VmFaults

__all__ = [
    "DPM_LEVELS",
    "GC_INFO",
    "NAVI31_DEVICE_ID",
    "SMU_VERSION",
    "Bar5",
    "Gfx1100Front",
    "Gfx1100Function",
    "Gmc",
    "HqdBank",
    "HubRegs",
    "IhRing",
    "Leaf",
    "MecQueues",
    "PageTableHub",
    "Psp",
    "RegisterFile",
    "SdmaQueue0",
    "Smu",
    "VmFaults",
    "build_discovery",
    "checksum16",
]
