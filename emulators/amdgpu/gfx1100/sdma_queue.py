"""SDMA0 and SDMA1 queue 0 from their RB registers (``docs/gfx1100.md`` section 8); the SDMA engine runs them.

| register | model |
|---|---|
| ``SDMA0_QUEUE0_RB_CNTL`` | rb_enable 0 -> 1 creates the queue (RB_BASE, rb_size, RPTR_ADDR, WPTR_POLL_ADDR, |
| | DOORBELL_OFFSET); 1 -> 0 destroys it |
| ``..._RB_RPTR`` / ``_HI`` | the engine's read pointer (bytes) while live; the value stored at enable is its start |
| ``..._RB_WPTR`` / ``_HI`` | reads the write pointer the engine last took |
| ``..._MINOR_PTR_UPDATE`` | while 0, writes to RB_RPTR / RB_WPTR of a live queue are dropped |
| ``..._DOORBELL`` / ``_OFFSET`` | enable[28] and the BAR2 byte offset whose u64 write sets the write pointer |
| ``SDMA0_F32_CNTL`` | halt[0], 1 at power-on: doorbells are held until the driver unhalts the engine |
| ``GRBM_SOFT_RESET`` | soft_reset_sdma0[23] destroys the queue |

SDMA1's copies of these registers sit ``SDMA1_REGISTER_STRIDE`` (0x600) dwords above SDMA0's (section 8);
``GRBM_SOFT_RESET.soft_reset_sdma0`` resets SDMA0 only (the SDMA1 bit is not in the spec, so SDMA1 ignores it).

A doorbell stores its value (the write pointer, bytes) at WPTR_POLL_ADDR, where the engine reads it, and kicks the
queue; the engine writes its read pointer back to RPTR_ADDR after every packet.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Final

from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import DOORBELL_SLOT_BYTES, RING_BASE_SHIFT, QueueKind
from tinyhil.spec.gfx1100_regs import (
    GRBM_SOFT_RESET_SOFT_RESET_SDMA0,
    SDMA0_F32_CNTL_HALT,
    SDMA0_QUEUE0_DOORBELL_ENABLE,
    SDMA0_QUEUE0_DOORBELL_OFFSET_OFFSET,
    SDMA0_QUEUE0_RB_CNTL_RB_ENABLE,
    SDMA0_QUEUE0_RB_CNTL_RB_SIZE,
    SDMA1_REGISTER_STRIDE,
    Reg,
)

from ..errors import GpuMemoryFault
from .regfile import RegisterFile

if TYPE_CHECKING:
    from ..gpu import AmdGpu
    from ..queues import Queue

__all__ = ["SDMA1_REGISTER_STRIDE", "SdmaQueue0"]

_F32_CNTL_STRIDE: Final = 0x20  # section 8: SDMA0_F32_CNTL 0x589A, SDMA1_F32_CNTL 0x58BA (seg 1)

_log = logging.getLogger("tinyhil.emulators.amdgpu.gfx1100")
_U32: Final = 0xFFFF_FFFF


class SdmaQueue0:
    """Queue 0 of SDMA ``engine`` (0 or 1): its registers' behaviour (the module table) and its doorbell."""

    def __init__(self, regs: RegisterFile, gpu: AmdGpu, engine: int = 0) -> None:
        if engine not in (0, 1):
            raise InvalidArgument(f"engine={engine!r}, expected SDMA engine 0 or 1")
        self.regs = regs
        self.gpu = gpu
        self.engine = engine
        self.name = f"SDMA{engine} queue 0"
        shift = SDMA1_REGISTER_STRIDE * engine
        self.rb_cntl = Reg.SDMA0_QUEUE0_RB_CNTL + shift
        self.rb_base, self.rb_base_hi = Reg.SDMA0_QUEUE0_RB_BASE + shift, Reg.SDMA0_QUEUE0_RB_BASE_HI + shift
        self.rptr, self.rptr_hi = Reg.SDMA0_QUEUE0_RB_RPTR + shift, Reg.SDMA0_QUEUE0_RB_RPTR_HI + shift
        self.wptr, self.wptr_hi = Reg.SDMA0_QUEUE0_RB_WPTR + shift, Reg.SDMA0_QUEUE0_RB_WPTR_HI + shift
        self.rptr_addr_lo = Reg.SDMA0_QUEUE0_RB_RPTR_ADDR_LO + shift
        self.rptr_addr_hi = Reg.SDMA0_QUEUE0_RB_RPTR_ADDR_HI + shift
        self.wptr_poll_lo = Reg.SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO + shift
        self.wptr_poll_hi = Reg.SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI + shift
        self.doorbell_reg = Reg.SDMA0_QUEUE0_DOORBELL + shift
        self.doorbell_offset = Reg.SDMA0_QUEUE0_DOORBELL_OFFSET + shift
        self.minor_ptr_update = Reg.SDMA0_QUEUE0_MINOR_PTR_UPDATE + shift
        self.f32_cntl = Reg.SDMA0_F32_CNTL + _F32_CNTL_STRIDE * engine
        self._pointers = (self.rptr, self.rptr_hi, self.wptr, self.wptr_hi)
        regs.on_write(self.rb_cntl, self._rb_cntl)
        regs.on_write(self.f32_cntl, self._f32_cntl)
        if engine == 0:
            regs.on_write(Reg.GRBM_SOFT_RESET, self._soft_reset)
        regs.on_read(self.rptr, lambda: self._pointer(rptr=True) & _U32)
        regs.on_read(self.rptr_hi, lambda: self._pointer(rptr=True) >> 32)
        regs.on_read(self.wptr, lambda: self._pointer(rptr=False) & _U32)
        regs.on_read(self.wptr_hi, lambda: self._pointer(rptr=False) >> 32)
        for pointer in self._pointers:
            regs.on_write(pointer, functools.partial(self._pointer_written, pointer))
        regs.set_reset_value(self.f32_cntl, SDMA0_F32_CNTL_HALT.put(1))
        self.queue: Queue | None = None
        self.reset()

    def reset(self) -> None:
        if self.queue is not None and not self.queue.destroyed:
            self.gpu.destroy_queue(self.queue)
        self.queue = None
        self.pending = False  # a doorbell arrived while the engine was halted
        self.config_error = ""
        self._latched: dict[int, int] = {}  # pointer registers as stored when the queue went live

    @property
    def halted(self) -> bool:
        return bool(SDMA0_F32_CNTL_HALT.get(self.regs.stored(self.f32_cntl)))

    def _live(self) -> Queue | None:
        queue = self.queue
        return None if queue is None or queue.destroyed else queue

    def _pointer(self, *, rptr: bool) -> int:
        queue = self._live()
        regs = self.regs
        if queue is None:
            if rptr:
                return regs.pair(self.rptr, self.rptr_hi)
            return regs.pair(self.wptr, self.wptr_hi)
        return queue.rptr if rptr else queue.wptr

    def _pointer_written(self, reg: int, value: int) -> None:
        if self._live() is not None and not self.regs.stored(self.minor_ptr_update):
            _log.info("%s: register %#x = %#x while live without MINOR_PTR_UPDATE: dropped", self.name, reg, value)
            self.regs.store(reg, self._latched.get(reg, 0))

    def _rb_cntl(self, value: int) -> None:
        regs = self.regs
        enable = SDMA0_QUEUE0_RB_CNTL_RB_ENABLE.get(value)
        queue = self._live()
        if not enable:
            if queue is not None:
                self.gpu.destroy_queue(queue)
            self.queue = None
            return
        if queue is not None:
            return
        self.config_error = ""
        doorbell_offset = regs.stored(self.doorbell_offset) & SDMA0_QUEUE0_DOORBELL_OFFSET_OFFSET.mask
        try:
            self.queue = self.gpu.create_queue(
                QueueKind.SDMA,
                ring_va=regs.pair(self.rb_base, self.rb_base_hi) << RING_BASE_SHIFT,
                ring_bytes=4 << SDMA0_QUEUE0_RB_CNTL_RB_SIZE.get(value),
                rptr_va=regs.pair(self.rptr_addr_lo, self.rptr_addr_hi),
                wptr_va=regs.pair(self.wptr_poll_lo, self.wptr_poll_hi),
                doorbell_index=doorbell_offset // DOORBELL_SLOT_BYTES,
            )
        except InvalidArgument as error:
            self.config_error = str(error)
            regs.store(self.rb_cntl, value & ~SDMA0_QUEUE0_RB_CNTL_RB_ENABLE.mask)
            _log.warning("%s: rb_enable refused: %s", self.name, error)
            return
        self._latched = {reg: regs.stored(reg) for reg in self._pointers}
        self.queue.engine.rptr = regs.pair(self.rptr, self.rptr_hi)

    def _f32_cntl(self, value: int) -> None:
        queue = self._live()
        if not SDMA0_F32_CNTL_HALT.get(value) and self.pending and queue is not None:
            self.pending = False
            queue.kick()

    def _soft_reset(self, value: int) -> None:
        if GRBM_SOFT_RESET_SOFT_RESET_SDMA0.get(value):
            queue = self._live()
            if queue is not None:
                self.gpu.destroy_queue(queue)
            self.queue = None
            self.pending = False

    def owns(self, offset: int) -> bool:
        """Whether BAR2 byte ``offset`` is this queue's doorbell as its registers say (``DOORBELL.enable`` and
        ``DOORBELL_OFFSET``); the front end caches the answer until the host next writes a register."""
        regs = self.regs
        mine = regs.stored(self.doorbell_offset) & SDMA0_QUEUE0_DOORBELL_OFFSET_OFFSET.mask
        return offset == mine and bool(SDMA0_QUEUE0_DOORBELL_ENABLE.get(regs.stored(self.doorbell_reg)))

    def ring(self, value: int, *, halted: bool) -> bool:
        """A u64 doorbell write of ``value`` at this queue's doorbell (:meth:`owns`); whether a live queue took it.
        ``halted`` is :attr:`halted` as the front end last read it (it changes only with a host register write)."""
        queue = self._live()
        if queue is None:
            return False
        try:
            self.gpu.memory.write_u64(queue.config.wptr_va, value)
        except GpuMemoryFault as fault:
            _log.warning("%s: doorbell %#x: WPTR_POLL_ADDR unreachable: %s", self.name, value, fault)
            return True
        if halted:
            self.pending = True
        else:
            queue.kick()
        return True
