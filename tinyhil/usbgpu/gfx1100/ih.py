"""The IH block: ring 0 and ring 1 set up (step 7), drained at fini, and ring 0 read for what it says about queues.

``docs/gfx1100.md``, step 7 and "Stopped queues". :class:`IhBlock` puts both rings in boot memory and enables them
(cold boot only); its fini drains ring 0 (``IH_RB_RPTR`` = ``IH_RB_WPTR``'s offset). The GPU writes IVs to ring 0
and advances ``IH_RB_WPTR`` (``tinyhil.spec.gfx1100_ih``). :meth:`IhReader.poll` is the one register read a wait
pays per poll: it reads ``IH_RB_WPTR`` and, only when it moved past the driver's read offset, the new IVs through
BAR0, then sets ``IH_RB_RPTR`` (as Linux's ``amdgpu_ih_process`` does). On an overflow it reads on from
``wptr + 32`` and pulses ``IH_RB_CNTL.wptr_overflow_clear`` (Linux's ``ih_v6_0_get_wptr``).

:func:`queue_of` says which of the driver's queues an IV names (the queue keys of
:class:`~tinyhil.usbgpu.gfx1100_gpu.Gfx1100UsbGpu`) and what it reports, with no register access.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

from tinyhil.spec import gfx1100_ih as values
from tinyhil.spec.gfx1100_ih import (
    IH_RB_BASE_SHIFT,
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
    fault_page,
)
from tinyhil.spec.gfx1100_regs import IH_RB_WPTR_OFFSET, Reg
from tinyhil.usbgpu.gfx1100.block import BootState
from tinyhil.usbgpu.gfx1100.registers import Gfx1100Registers

__all__ = ["COMPUTE_KEY", "IhBlock", "IhReader", "IvMeaning", "Report", "queue_of"]

COMPUTE_KEY: Final = 2  # the driver's key of the compute queue (HQD me 1 pipe 0 queue 0); SDMA engine n is key n
_COMPUTE_HQD: Final = (1, 0, 0)  # (me, pipe, queue)
_U32: Final = 0xFFFF_FFFF
_RINGS: Final = ("", "_RING1")  # the register-name suffixes of ring 0 and ring 1


class IhBlock:
    """Both IH rings: an :class:`~tinyhil.usbgpu.gfx1100.block.IpBlock`."""

    name = "ih"

    def __init__(self, state: BootState) -> None:
        self.state = state

    def init(self) -> None:
        """Step 7 (cold boot): both rings in boot memory (pointers 0, no doorbell), ring 0's write-pointer page,
        storm / flood controls, then rb_enable (and enable_intr on ring 0)."""
        if self.state.partial:
            return
        state = self.state
        regs, layout = state.regs, state.layout
        for ring, (suffix, cntl) in enumerate(zip(_RINGS, values.IH_RB_SETUP, strict=True)):
            base = state.mc(layout.ih_ring(ring)) >> IH_RB_BASE_SHIFT
            regs.write(Reg[f"IH_RB_BASE{suffix}"], base & _U32)
            regs.write_fields(Reg[f"IH_RB_BASE_HI{suffix}"], addr=base >> 32)
            regs.apply((cntl,))
            if not ring:
                wptr = state.mc(layout.ih_wptr)
                regs.write_fields(Reg.IH_RB_WPTR_ADDR_LO, addr=(wptr & _U32) >> 2)
                regs.write_fields(Reg.IH_RB_WPTR_ADDR_HI, addr=wptr >> 32)
            for pointer in ("IH_RB_WPTR", "IH_RB_RPTR", "IH_DOORBELL_RPTR"):
                regs.write(Reg[pointer + suffix], 0)
        regs.apply(values.IH_INTERRUPT_CONTROLS)
        regs.apply(values.IH_ENABLE)

    def gate_clocks(self) -> None:
        pass

    def fini(self) -> None:
        """Drain ring 0: the read pointer to the write pointer's offset."""
        regs = self.state.regs
        regs.write_fields(Reg.IH_RB_RPTR, offset=IH_RB_WPTR_OFFSET.get(regs.read(Reg.IH_RB_WPTR)))


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
        regs.write_fields(Reg.IH_RB_RPTR, offset=IH_RB_WPTR_OFFSET.get(end))
        self.read_offset = end
        if overflow:
            cntl = regs.read(Reg.IH_RB_CNTL)
            regs.write(Reg.IH_RB_CNTL, regs.merge_fields(Reg.IH_RB_CNTL, cntl, wptr_overflow_clear=1))
            regs.write(Reg.IH_RB_CNTL, regs.merge_fields(Reg.IH_RB_CNTL, cntl, wptr_overflow_clear=0))
        return [InterruptVector.unpack(data[at : at + IV_BYTES]) for at in range(0, len(data), IV_BYTES)]
