"""IH ring 0 as the gfx1100 USB-path driver reads it, and what its interrupt vectors say about the driver's queues.

The boot (section 11 step 7) puts ring 0 in boot memory; the GPU writes IVs there and advances ``IH_RB_WPTR``
(``tinyhil.spec.gfx1100_ih``). :meth:`IhReader.poll` is the one register read a wait pays per poll: it reads
``IH_RB_WPTR`` and, only when it moved past the driver's read offset, the new IVs through BAR0, then sets
``IH_RB_RPTR`` (as Linux's ``amdgpu_ih_process`` does). On an overflow it reads on from ``wptr + 32`` and pulses
``IH_RB_CNTL.wptr_overflow_clear`` (Linux's ``ih_v6_0_get_wptr``).

:func:`queue_of` says which of the driver's queues an IV names (the queue keys of
:class:`~tinyhil.usbgpu.gfx1100_gpu.Gfx1100UsbGpu`) and what it reports, with no register access.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

from tinyhil.spec.gfx1100_ih import (
    FAULT_CNTL_CLEAR_STATUS_ADDR,
    FAULT_STATUS_CID,
    IH_RB_CNTL_WPTR_OVERFLOW_CLEAR,
    IH_RB_WPTR_RB_OVERFLOW,
    IV_BYTES,
    RING_ID_CP_ME,
    RING_ID_CP_PIPE,
    RING_ID_CP_QUEUE,
    RING_ID_SDMA_INSTANCE,
    RING_ID_SDMA_QUEUE,
    VMC_SRCID_VM_FAULT,
    IhClientId,
    IhSourceId,
    InterruptVector,
    Utcl2ClientId,
    fault_page,
)
from tinyhil.spec.gfx1100_regs import IH_RB_WPTR_OFFSET, Reg
from tinyhil.usbgpu.gfx1100_bars import Gfx1100Registers

__all__ = ["COMPUTE_KEY", "IhReader", "IvMeaning", "Report", "clear_fault", "queue_of"]

COMPUTE_KEY: Final = 2  # the driver's key of the compute queue (HQD me 1 pipe 0 queue 0); SDMA engine n is key n
_COMPUTE_HQD: Final = (1, 0, 0)  # (me, pipe, queue)
# GCVM_L2_PROTECTION_FAULT_STATUS.CID -> the driver queue whose engine is that UTCL2 client
_CID2KEY: Final[dict[int, int]] = {Utcl2ClientId.SDMA0: 0, Utcl2ClientId.SDMA1: 1, Utcl2ClientId.CPC: COMPUTE_KEY,
                   Utcl2ClientId.CPF: COMPUTE_KEY, Utcl2ClientId.TCP: COMPUTE_KEY}  # fmt: skip


class Report(Enum):
    """What an IV reports about a queue."""

    VM_FAULT = "protection fault"  # GC hub (client GFX, UTCL2_FAULT) or MM hub (VMC) fault
    SDMA_STOPPED = "SDMA queue hang"  # SDMA_QUEUE_HANG: the engine stopped on a packet
    CP_STOPPED = "CP bad opcode"  # CP_BAD_OPCODE_ERROR / PRIV_REG / PRIV_INSTR fault


@dataclass(frozen=True, slots=True)
class IvMeaning:
    """An IV about a queue: ``key`` is the driver's queue key (None: the SDMA instance or HQD of ``ring_id`` is not
    one the driver runs, or a fault's client is known only from the fault status), ``fault_addr`` a fault's page."""

    report: Report
    key: int | None
    mm_hub: bool = False
    fault_addr: int | None = None


def queue_of(iv: InterruptVector) -> IvMeaning | None:
    """What ``iv`` reports (None: an IV the driver does not act on, such as a trap or end-of-pipe)."""
    client, source = iv.client_id, iv.source_id
    if (client, source) in ((IhClientId.GFX, IhSourceId.UTCL2_FAULT), (IhClientId.VMC, VMC_SRCID_VM_FAULT)):
        return IvMeaning(Report.VM_FAULT, None, client == IhClientId.VMC, fault_page(iv.src_data))
    if client != IhClientId.GFX:
        return None
    if source == IhSourceId.SDMA_QUEUE_HANG:
        instance, queue = RING_ID_SDMA_INSTANCE.get(iv.ring_id), RING_ID_SDMA_QUEUE.get(iv.ring_id)
        return IvMeaning(Report.SDMA_STOPPED, instance if instance <= 1 and queue == 0 else None)
    if source in (IhSourceId.CP_BAD_OPCODE_ERROR, IhSourceId.CP_PRIV_REG_FAULT, IhSourceId.CP_PRIV_INSTR_FAULT):
        hqd = (RING_ID_CP_ME.get(iv.ring_id), RING_ID_CP_PIPE.get(iv.ring_id), RING_ID_CP_QUEUE.get(iv.ring_id))
        return IvMeaning(Report.CP_STOPPED, COMPUTE_KEY if hqd == _COMPUTE_HQD else None)
    return None


def clear_fault(regs: Gfx1100Registers, *, mm_hub: bool) -> tuple[int, int | None]:
    """Read the hub's ``*VM_L2_PROTECTION_FAULT_STATUS``, then clear it and the fault address (``_CNTL`` bit 0, as
    ``gmc_v11_0_process_interrupt`` does); returns the status and the driver queue key its CID names (or None)."""
    prefix = "MMVM" if mm_hub else "GCVM"
    status = regs.read(Reg[f"{prefix}_L2_PROTECTION_FAULT_STATUS"])
    cntl = Reg[f"{prefix}_L2_PROTECTION_FAULT_CNTL"]
    regs.write(cntl, regs.read(cntl) | FAULT_CNTL_CLEAR_STATUS_ADDR.mask)
    key = None if mm_hub else _CID2KEY.get(FAULT_STATUS_CID.get(status))
    return status, key


class IhReader:
    """IH ring 0 at VRAM offset ``ring`` (``ring_bytes``), read from the driver's read offset (``IH_RB_RPTR`` at
    construction: 0 after a cold boot, what the last close drained to after a partial one)."""

    def __init__(self, regs: Gfx1100Registers, ring: int, ring_bytes: int) -> None:
        self.regs = regs
        self.ring = ring
        self.ring_bytes = ring_bytes
        self.read_offset = regs.read(Reg.IH_RB_RPTR) & IH_RB_WPTR_OFFSET.mask

    def poll(self) -> list[InterruptVector]:
        """The IVs the GPU wrote since the last poll, oldest first (one register read when there are none)."""
        regs, size = self.regs, self.ring_bytes
        wptr = regs.read(Reg.IH_RB_WPTR)
        end = (wptr & IH_RB_WPTR_OFFSET.mask) % size
        start = self.read_offset
        overflow = IH_RB_WPTR_RB_OVERFLOW.get(wptr)
        if end == start and not overflow:
            return []
        if overflow:  # the oldest IV not overwritten follows the write offset
            start = (end + IV_BYTES) % size
        nbytes = (end - start) % size or (size if overflow else 0)
        first = min(nbytes, size - start)
        data = regs.vram_read(self.ring + start, first)
        if first < nbytes:
            data += regs.vram_read(self.ring, nbytes - first)
        regs.write(Reg.IH_RB_RPTR, end)
        self.read_offset = end
        if overflow:
            cntl = regs.read(Reg.IH_RB_CNTL)
            regs.write(Reg.IH_RB_CNTL, cntl | IH_RB_CNTL_WPTR_OVERFLOW_CLEAR.mask)
            regs.write(Reg.IH_RB_CNTL, cntl & ~IH_RB_CNTL_WPTR_OVERFLOW_CLEAR.mask)
        return [InterruptVector.unpack(data[at : at + IV_BYTES]) for at in range(0, len(data), IV_BYTES)]
