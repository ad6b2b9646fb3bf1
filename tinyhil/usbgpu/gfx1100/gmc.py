"""The GMC block: both hubs' system aperture, L2 and VMID 0 context (section 4), the TLB flush, fault clearing.

``docs/gfx1100.md``, steps 6 and 13: a cold boot sets up the MM hub in :meth:`GmcBlock.init`; the GC hub is set up
by the MEC block (:meth:`GmcBlock.hub`), after the RLC autoload, on both paths. The page tables themselves are
:mod:`tinyhil.usbgpu.gfx1100.page_tables`.
"""

from __future__ import annotations

from typing import Final

from tinyhil.spec import gfx1100_gmc as values
from tinyhil.spec.amdgpu import PAGE_SHIFT
from tinyhil.spec.gfx1100_gmc import FB_BLOCK_BYTES, VM_CONTEXT0_CNTL_FAULT_ENABLES
from tinyhil.spec.gfx1100_ih import FAULT_STATUS_CID, Utcl2ClientId
from tinyhil.spec.gfx1100_regs import Reg
from tinyhil.usbgpu.gfx1100.block import BootState
from tinyhil.usbgpu.gfx1100.ih import COMPUTE_KEY

__all__ = ["GmcBlock"]

_VA_BITS: Final = 45  # the page table spans GPU addresses 0 .. 2**45 (tinyhil's layout)
_PAGE_TABLE_DEPTH: Final = 3  # four levels: PDB2, PDB1, PDB0, PTB
_PDE_VALID: Final = 1
_SEM_ACQUIRED: Final = 1
_ACK_ENG17: Final = 1
# GCVM_L2_PROTECTION_FAULT_STATUS.CID -> the driver queue whose engine is that UTCL2 client
_CID2KEY: Final[dict[int, int]] = {Utcl2ClientId.SDMA0: 0, Utcl2ClientId.SDMA1: 1, Utcl2ClientId.CPC: COMPUTE_KEY,
                                   Utcl2ClientId.CPF: COMPUTE_KEY, Utcl2ClientId.TCP: COMPUTE_KEY}  # fmt: skip


class GmcBlock:
    """The GC and MM hubs: an :class:`~tinyhil.usbgpu.gfx1100.block.IpBlock`."""

    name = "gmc"

    def __init__(self, state: BootState) -> None:
        self.state = state

    def init(self) -> None:
        if not self.state.partial:
            self.hub("MM")

    def gate_clocks(self) -> None:
        pass

    def fini(self) -> None:
        pass

    def hub(self, hub: str) -> None:
        """Hub ``GC`` or ``MM``: the system aperture over all of VRAM (LOW = FB_BASE >> 18, HIGH = the 256 KB unit
        of FB_TOP's block's last byte), the two default pages, the settings of section 4, then the VMID 0 context."""
        state, shift = self.state, values.SYSTEM_APERTURE_SHIFT
        regs, layout = state.regs, state.layout
        regs.write_fields(Reg[f"{hub}MC_VM_SYSTEM_APERTURE_LOW_ADDR"], logical_addr=state.fb_base >> shift)
        high = (state.fb_top + FB_BLOCK_BYTES - 1) >> shift
        regs.write_fields(Reg[f"{hub}MC_VM_SYSTEM_APERTURE_HIGH_ADDR"], logical_addr=high)
        regs.write_pair(f"{hub}MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR", layout.scratch(0) >> PAGE_SHIFT, "_LSB", "_MSB")
        regs.write_pair(f"{hub}VM_L2_PROTECTION_FAULT_DEFAULT_ADDR", layout.scratch(1) >> PAGE_SHIFT)
        regs.apply(values.HUB_SETUP, hub=hub)
        end_page = (1 << _VA_BITS >> PAGE_SHIFT) - 1
        for name, value in (("START", 0), ("END", end_page), ("BASE", layout.page_tables | _PDE_VALID)):
            regs.write_pair(f"{hub}VM_CONTEXT0_PAGE_TABLE_{name}_ADDR", value)
        regs.write_fields(Reg[f"{hub}VM_CONTEXT0_CNTL"], enable_context=1, page_table_depth=_PAGE_TABLE_DEPTH,
                          page_table_block_size=0, protection_fault_enables=VM_CONTEXT0_CNTL_FAULT_ENABLES)  # fmt: skip

    def flush_tlb(self) -> None:
        """Section 4's handshake: HDP flush, MM hub (semaphore, request, ack, release), then the GC hub; each request
        invalidates VMID 0's L2 PTEs, PDE0-2 and L1 PTEs."""
        regs = self.state.regs
        regs.hdp_flush()
        regs.poll_reg(Reg.MMVM_INVALIDATE_ENG17_SEM, _SEM_ACQUIRED, _SEM_ACQUIRED, "MM hub invalidate semaphore")
        self._invalidate(Reg.MMVM_INVALIDATE_ENG17_REQ)
        regs.poll_reg(Reg.MMVM_INVALIDATE_ENG17_ACK, _ACK_ENG17, _ACK_ENG17, "MM hub invalidate ack")
        regs.write(Reg.MMVM_INVALIDATE_ENG17_SEM, 0)
        self._invalidate(Reg.GCVM_INVALIDATE_ENG17_REQ)
        regs.poll_reg(Reg.GCVM_INVALIDATE_ENG17_ACK, _ACK_ENG17, _ACK_ENG17, "GC hub invalidate ack")

    def _invalidate(self, req: Reg) -> None:
        self.state.regs.write_fields(req, per_vmid_invalidate_req=1 << 0, flush_type=0, invalidate_l2_ptes=1,
                                     invalidate_l2_pde0=1, invalidate_l2_pde1=1, invalidate_l2_pde2=1,
                                     invalidate_l1_ptes=1)  # fmt: skip

    def clear_fault(self, *, mm_hub: bool) -> tuple[int, int | None]:
        """Read the hub's ``*VM_L2_PROTECTION_FAULT_STATUS``, then clear it and the fault address (``_CNTL``
        clear_protection_fault_status_addr, as ``gmc_v11_0_process_interrupt`` does); returns the status and the
        driver queue key its CID names (or None)."""
        regs, prefix = self.state.regs, "MMVM" if mm_hub else "GCVM"
        status = regs.read(Reg[f"{prefix}_L2_PROTECTION_FAULT_STATUS"])
        regs.update_fields(Reg[f"{prefix}_L2_PROTECTION_FAULT_CNTL"], clear_protection_fault_status_addr=1)
        key = None if mm_hub else _CID2KEY.get(FAULT_STATUS_CID.get(status))
        return status, key
