"""MEC compute queues from their HQD registers (``docs/gfx1100.md`` section 9); the PM4 engine runs them.

The HQD registers are banked by ``GRBM_GFX_CNTL`` (me, pipe, queue): the register file keeps one copy per bank.

| register | model |
|---|---|
| ``CP_HQD_ACTIVE`` | 1 maps the selected bank's queue (PQ_BASE, PQ_CONTROL, RPTR_REPORT_ADDR, WPTR_POLL_ADDR, |
| | PQ_DOORBELL_CONTROL); reads 1 while it is mapped |
| ``CP_HQD_DEQUEUE_REQUEST`` | a non-zero dequeue_req unmaps the selected bank's queue: ACTIVE reads 0 |
| ``CP_HQD_PQ_RPTR`` / ``CP_HQD_PQ_WPTR_LO`` / ``_HI`` | the engine's pointers (dwords) while mapped |
| ``CP_MEC_RS64_CNTL`` | mec_halt[30], 1 at power-on: doorbells are held until the driver clears it |
| ``CP_MEC_DOORBELL_RANGE_LOWER`` / ``UPPER`` | the BAR2 byte range routed to the MEC (inclusive) |

A doorbell stores its value (the write pointer, dwords) at WPTR_POLL_ADDR and kicks the queue whose
PQ_DOORBELL_CONTROL has doorbell_en and that byte offset.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import DOORBELL_SLOT_BYTES, RING_BASE_SHIFT, QueueKind
from tinyhil.spec.gfx1100_regs import (
    CP_HQD_DEQUEUE_REQUEST_DEQUEUE_REQ,
    CP_HQD_PQ_CONTROL_QUEUE_SIZE,
    CP_HQD_PQ_DOORBELL_CONTROL_DOORBELL_EN,
    CP_HQD_PQ_DOORBELL_CONTROL_DOORBELL_OFFSET,
    CP_MEC_DOORBELL_RANGE,
    CP_MEC_RS64_CNTL_MEC_HALT,
    Reg,
)

from ..errors import GpuMemoryFault
from .regfile import HqdBank, RegisterFile

if TYPE_CHECKING:
    from ..gpu import AmdGpu
    from ..queues import Queue

__all__ = ["MecQueues"]

_log = logging.getLogger("tinyhil.emulators.amdgpu.gfx1100")
_U32: Final = 0xFFFF_FFFF


class MecQueues:
    """The MEC's hardware queue descriptors: which bank maps which queue (the module table)."""

    def __init__(self, regs: RegisterFile, gpu: AmdGpu) -> None:
        self.regs = regs
        self.gpu = gpu
        regs.on_write(Reg.CP_HQD_ACTIVE, self._active)
        regs.on_read(Reg.CP_HQD_ACTIVE, lambda: int(self._live(self.regs.hqd_bank()) is not None))
        regs.on_write(Reg.CP_HQD_DEQUEUE_REQUEST, self._dequeue)
        regs.on_write(Reg.CP_MEC_RS64_CNTL, self._rs64_cntl)
        regs.on_read(Reg.CP_HQD_PQ_RPTR, lambda: self._pointer(Reg.CP_HQD_PQ_RPTR) & _U32)
        regs.on_read(Reg.CP_HQD_PQ_WPTR_LO, lambda: self._pointer(Reg.CP_HQD_PQ_WPTR_LO) & _U32)
        regs.on_read(Reg.CP_HQD_PQ_WPTR_HI, lambda: self._pointer(Reg.CP_HQD_PQ_WPTR_LO) >> 32)
        regs.set_reset_value(Reg.CP_MEC_RS64_CNTL, CP_MEC_RS64_CNTL_MEC_HALT.put(1))
        self.queues: dict[HqdBank, Queue] = {}
        self.reset()

    def reset(self) -> None:
        for queue in self.queues.values():
            if not queue.destroyed:
                self.gpu.destroy_queue(queue)
        self.queues = {}
        self.pending: set[HqdBank] = set()  # doorbells that arrived while the MEC was halted
        self.config_error = ""

    @property
    def halted(self) -> bool:
        return bool(CP_MEC_RS64_CNTL_MEC_HALT.get(self.regs.stored(Reg.CP_MEC_RS64_CNTL)))

    def _live(self, bank: HqdBank) -> Queue | None:
        queue = self.queues.get(bank)
        return None if queue is None or queue.destroyed else queue

    def _pointer(self, reg: Reg) -> int:
        queue = self._live(self.regs.hqd_bank())
        if queue is None:
            if reg is Reg.CP_HQD_PQ_RPTR:
                return self.regs.stored(reg)
            return self.regs.pair(Reg.CP_HQD_PQ_WPTR_LO, Reg.CP_HQD_PQ_WPTR_HI)
        return queue.rptr if reg is Reg.CP_HQD_PQ_RPTR else queue.wptr

    def _doorbell_offset(self, bank: HqdBank) -> int | None:
        control = self.regs.stored(Reg.CP_HQD_PQ_DOORBELL_CONTROL, bank)
        if not CP_HQD_PQ_DOORBELL_CONTROL_DOORBELL_EN.get(control):
            return None
        return control & CP_HQD_PQ_DOORBELL_CONTROL_DOORBELL_OFFSET.mask

    def _active(self, value: int) -> None:
        regs = self.regs
        bank = regs.hqd_bank()
        if not value & 1:
            self._unmap(bank)
            return
        if self._live(bank) is not None:
            return
        self.config_error = ""
        offset = self._doorbell_offset(bank)
        try:
            queue = self.gpu.create_queue(
                QueueKind.COMPUTE,
                ring_va=regs.pair(Reg.CP_HQD_PQ_BASE, Reg.CP_HQD_PQ_BASE_HI) << RING_BASE_SHIFT,
                ring_bytes=4 << (CP_HQD_PQ_CONTROL_QUEUE_SIZE.get(regs.stored(Reg.CP_HQD_PQ_CONTROL)) + 1),
                rptr_va=regs.pair(Reg.CP_HQD_PQ_RPTR_REPORT_ADDR, Reg.CP_HQD_PQ_RPTR_REPORT_ADDR_HI),
                wptr_va=regs.pair(Reg.CP_HQD_PQ_WPTR_POLL_ADDR, Reg.CP_HQD_PQ_WPTR_POLL_ADDR_HI),
                doorbell_index=(0 if offset is None else offset) // DOORBELL_SLOT_BYTES,
            )
        except InvalidArgument as error:
            self.config_error = str(error)
            regs.store(Reg.CP_HQD_ACTIVE, 0)
            _log.warning("MEC queue %s: CP_HQD_ACTIVE refused: %s", bank, error)
            return
        queue.engine.rptr = regs.stored(Reg.CP_HQD_PQ_RPTR)
        self.queues[bank] = queue

    def _unmap(self, bank: HqdBank) -> None:
        queue = self._live(bank)
        if queue is not None:
            self.gpu.destroy_queue(queue)
        self.queues.pop(bank, None)
        self.pending.discard(bank)
        self.regs.store(Reg.CP_HQD_ACTIVE, 0)

    def _dequeue(self, value: int) -> None:
        if CP_HQD_DEQUEUE_REQUEST_DEQUEUE_REQ.get(value):
            self._unmap(self.regs.hqd_bank())

    def _rs64_cntl(self, value: int) -> None:
        if CP_MEC_RS64_CNTL_MEC_HALT.get(value):
            return
        for bank in sorted(self.pending):
            queue = self._live(bank)
            if queue is not None:
                queue.kick()
        self.pending.clear()

    def in_range(self, offset: int) -> bool:
        """Whether BAR2 byte ``offset`` lies in the programmed MEC doorbell range."""
        lower = self.regs.stored(Reg.CP_MEC_DOORBELL_RANGE_LOWER) & CP_MEC_DOORBELL_RANGE.mask
        upper = self.regs.stored(Reg.CP_MEC_DOORBELL_RANGE_UPPER) & CP_MEC_DOORBELL_RANGE.mask
        return lower <= offset <= upper and bool(upper)

    def doorbell(self, offset: int, value: int) -> bool:
        """A u64 doorbell write at BAR2 byte ``offset`` (inside the MEC range); whether a queue took it."""
        for bank in sorted(self.queues):
            queue = self._live(bank)
            if queue is None or self._doorbell_offset(bank) != offset:
                continue
            try:
                self.gpu.memory.write_u64(queue.config.wptr_va, value)
            except GpuMemoryFault as fault:
                _log.warning("MEC queue %s: doorbell %#x: WPTR_POLL_ADDR unreachable: %s", bank, value, fault)
                return True
            if self.halted:
                self.pending.add(bank)
            else:
                queue.kick()
            return True
        return False
