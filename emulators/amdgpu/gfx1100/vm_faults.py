"""VM protection faults of both hubs: the L2's fault status / address registers and the fault IV (GMC, section 4).

What Linux's ``gmc_v11_0_process_interrupt`` reads back (``docs/gfx1100.md``):

| register (GCVM_* / MMVM_*) | model |
|---|---|
| ``L2_PROTECTION_FAULT_STATUS`` | latched by the first fault: permission_faults = valid (not present), cid = |
| | the client, rw = 0 (the model does not tell reads from writes), vmid 0; a later fault sets more_faults |
| | only, unless ``_CNTL``'s allow_subsequent bit lets it replace the latch |
| ``L2_PROTECTION_FAULT_ADDR_LO32`` / ``_HI32`` | the faulting page (address >> 12), bits 31:0 and 35:32 |
| ``L2_PROTECTION_FAULT_CNTL`` | a write with clear_protection_fault_status_addr = 1 clears STATUS and ADDR |
| | (model choice: the bit reads 0 again) |

Each fault also posts an IV on IH ring 0: client GFX, src UTCL2_FAULT for the GC hub; client VMC, src VM_FAULT,
vmid_type 1 for the MM hub; ring_id's prot_valid bit; src_data the page (``fault_src_data``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final

from tinyhil.spec.amdgpu import PAGE_SHIFT
from tinyhil.spec.gfx1100_ih import (
    FAULT_CNTL_ALLOW_SUBSEQUENT_UPDATES,
    FAULT_CNTL_CLEAR_STATUS_ADDR,
    FAULT_STATUS_CID,
    FAULT_STATUS_MORE_FAULTS,
    FAULT_STATUS_PERMISSION_FAULTS,
    PERMISSION_FAULT_VALID,
    RING_ID_FAULT_VALID,
    VMC_SRCID_VM_FAULT,
    IhClientId,
    IhSourceId,
    fault_src_data,
)
from tinyhil.spec.gfx1100_regs import Reg

from .ih import IhRing
from .regfile import RegisterFile

__all__ = ["FaultRegs", "VmFaults"]

_PAGE_LO_MASK: Final = 0xFFFF_FFFF
_PAGE_HI_MASK: Final = 0xF  # ADDR_HI32.logical_page_addr_hi4


@dataclass(frozen=True, slots=True)
class FaultRegs:
    """One hub's protection-fault registers and how its faults reach the IH."""

    name: str
    status: int
    addr_lo: int
    addr_hi: int
    cntl: int
    client_id: int
    source_id: int
    vmid_type: int


GC_FAULTS: Final = FaultRegs("GC hub", Reg.GCVM_L2_PROTECTION_FAULT_STATUS, Reg.GCVM_L2_PROTECTION_FAULT_ADDR_LO32,
                             Reg.GCVM_L2_PROTECTION_FAULT_ADDR_HI32, Reg.GCVM_L2_PROTECTION_FAULT_CNTL,
                             IhClientId.GFX, IhSourceId.UTCL2_FAULT, 0)  # fmt: skip
MM_FAULTS: Final = FaultRegs("MM hub", Reg.MMVM_L2_PROTECTION_FAULT_STATUS, Reg.MMVM_L2_PROTECTION_FAULT_ADDR_LO32,
                             Reg.MMVM_L2_PROTECTION_FAULT_ADDR_HI32, Reg.MMVM_L2_PROTECTION_FAULT_CNTL,
                             IhClientId.VMC, VMC_SRCID_VM_FAULT, 1)  # fmt: skip


class VmFaults:
    """The fault registers of both hubs (the module table); :meth:`fault` is a client's access that faulted."""

    def __init__(self, regs: RegisterFile, ih: IhRing) -> None:
        self.regs = regs
        self.ih = ih
        for hub in (GC_FAULTS, MM_FAULTS):
            regs.on_write(hub.cntl, functools.partial(self._cntl, hub))

    def reset(self) -> None:
        """Nothing but the registers (reset with the register file)."""

    def fault(self, va: int, *, cid: int, mm_hub: bool = False) -> None:
        """A client (UTCL2 client id ``cid``) of the GC hub (or the MM hub) found no valid translation for ``va``:
        latch the hub's status and address, and post the fault IV."""
        regs, hub = self.regs, MM_FAULTS if mm_hub else GC_FAULTS
        held = regs.stored(hub.status)
        if held and not FAULT_CNTL_ALLOW_SUBSEQUENT_UPDATES.get(regs.stored(hub.cntl)):
            regs.store(hub.status, held | FAULT_STATUS_MORE_FAULTS.mask)
        else:
            status = FAULT_STATUS_PERMISSION_FAULTS.put(PERMISSION_FAULT_VALID) | FAULT_STATUS_CID.put(cid)
            regs.store(hub.status, status | (FAULT_STATUS_MORE_FAULTS.mask if held else 0))
            page = va >> PAGE_SHIFT
            regs.store(hub.addr_lo, page & _PAGE_LO_MASK)
            regs.store(hub.addr_hi, page >> 32 & _PAGE_HI_MASK)
        self.ih.post(hub.client_id, hub.source_id, ring_id=RING_ID_FAULT_VALID.put(1), vmid_type=hub.vmid_type,
                     src_data=fault_src_data(va))  # fmt: skip

    def _cntl(self, hub: FaultRegs, value: int) -> None:
        if FAULT_CNTL_CLEAR_STATUS_ADDR.get(value):
            regs = self.regs
            for address in (hub.status, hub.addr_lo, hub.addr_hi):
                regs.store(address, 0)
            regs.store(hub.cntl, value & ~FAULT_CNTL_CLEAR_STATUS_ADDR.mask)
