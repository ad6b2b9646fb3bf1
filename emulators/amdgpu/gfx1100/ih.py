"""The IH block (OSSSYS 6.0.0): ring 0 carries interrupt vectors (IVs) from the engines and the GMC to the driver.

``docs/gfx1100.md`` section 10 programs the rings; what a ring does with an IV is Linux's ``ih_v6_0.c``
and ``amdgpu_ih.c`` (``docs/gfx1100.md``). The IH's state is its registers; the block answers:

| register | model |
|---|---|
| ``IH_RB_CNTL`` | rb_enable and enable_intr (both set) let :meth:`IhRing.post` write; rb_size = log2(ring dwords); |
| | wptr_writeback_enable; wptr_overflow_enable; writing wptr_overflow_clear = 1 clears ``RB_OVERFLOW`` |
| ``IH_RB_BASE`` / ``_HI`` | the ring's MC address >> 8 (bits 47:40 in ``_HI``), written through the MM hub |
| ``IH_RB_WPTR`` | offset[17:2] = the byte offset the next IV goes to; rb_overflow[0]; stores what the host writes |
| ``IH_RB_RPTR`` | offset[17:2] = the driver's read offset; the ring is full when the next IV would reach it |
| ``IH_RB_WPTR_ADDR_LO`` / ``_HI`` | where ``IH_RB_WPTR`` is written back after each IV (wptr_writeback_enable) |

Ring 1 (``_RING1``) stores its registers only: nothing is redirected to it. A full ring drops the IV and, with
wptr_overflow_enable and wptr_overflow_clear = 0, sets ``IH_RB_WPTR.rb_overflow`` (model choice: the IVs already
in the ring are kept; Linux's recovery, reading on from wptr + 32, suggests the hardware overwrites the oldest).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import Final

from tinyhil.spec.gfx1100_ih import (
    IH_RB_BASE_HI_ADDR,
    IH_RB_BASE_SHIFT,
    IH_RB_CNTL_ENABLE_INTR,
    IH_RB_CNTL_RB_ENABLE,
    IH_RB_CNTL_RB_SIZE,
    IH_RB_CNTL_WPTR_OVERFLOW_CLEAR,
    IH_RB_CNTL_WPTR_OVERFLOW_ENABLE,
    IH_RB_CNTL_WPTR_WRITEBACK_ENABLE,
    IH_RB_WPTR_ADDR_HI_ADDR,
    IH_RB_WPTR_ADDR_LO_ADDR,
    IH_RB_WPTR_RB_OVERFLOW,
    IV_BYTES,
    InterruptVector,
)
from tinyhil.spec.gfx1100_regs import IH_RB_WPTR_OFFSET, Reg

from ..errors import GpuMemoryFault
from .gmc import Gmc
from .regfile import RegisterFile

__all__ = ["IhRing"]

_log = logging.getLogger("tinyhil.emulators.amdgpu.gfx1100")
_U32: Final = struct.Struct("<I")
_TIMESTAMP_MASK: Final = (1 << 48) - 1  # the IV carries 48 bits of the counter


class IhRing:
    """IH ring 0 (the module table). ``timestamp`` is the GPU's 100 MHz counter (``AmdGpu.timestamp``).

    ``posted`` counts the IVs written; ``dropped`` lists (IV, reason) of those that were not (ring disabled, full,
    or its memory unreachable).
    """

    def __init__(self, regs: RegisterFile, memory: Gmc, timestamp: Callable[[], int]) -> None:
        self.regs = regs
        self.memory = memory
        self._timestamp = timestamp
        regs.on_write(Reg.IH_RB_CNTL, self._cntl)
        self.reset()

    def reset(self) -> None:
        self.posted = 0
        self.dropped: list[tuple[InterruptVector, str]] = []

    @property
    def enabled(self) -> bool:
        cntl = self.regs.stored(Reg.IH_RB_CNTL)
        return bool(IH_RB_CNTL_RB_ENABLE.get(cntl) and IH_RB_CNTL_ENABLE_INTR.get(cntl))

    @property
    def ring_bytes(self) -> int:
        return 4 << IH_RB_CNTL_RB_SIZE.get(self.regs.stored(Reg.IH_RB_CNTL))

    @property
    def base(self) -> int:
        """The ring's MC address."""
        regs = self.regs
        high = IH_RB_BASE_HI_ADDR.get(regs.stored(Reg.IH_RB_BASE_HI))
        return (high << 32 | regs.stored(Reg.IH_RB_BASE)) << IH_RB_BASE_SHIFT

    def _cntl(self, value: int) -> None:
        if IH_RB_CNTL_WPTR_OVERFLOW_CLEAR.get(value):
            wptr = self.regs.stored(Reg.IH_RB_WPTR)
            self.regs.store(Reg.IH_RB_WPTR, wptr & ~IH_RB_WPTR_RB_OVERFLOW.mask)

    def post(
        self,
        client_id: int,
        source_id: int,
        *,
        ring_id: int = 0,
        vmid_type: int = 0,
        src_data: tuple[int, int, int, int] = (0, 0, 0, 0),
    ) -> bool:
        """Write one IV (stamped with the counter now) at the write offset and advance it; whether it was written.

        Raises:
            InvalidArgument: a field does not fit the IV.
        """
        iv = InterruptVector(client_id, source_id, ring_id, vmid_type=vmid_type,
                             timestamp=self._timestamp() & _TIMESTAMP_MASK, src_data=src_data)  # fmt: skip
        regs = self.regs
        if not self.enabled:
            return self._drop(iv, "IH ring 0 is not enabled (IH_RB_CNTL rb_enable and enable_intr)")
        cntl, size = regs.stored(Reg.IH_RB_CNTL), self.ring_bytes
        wptr = regs.stored(Reg.IH_RB_WPTR)
        offset = (wptr & IH_RB_WPTR_OFFSET.mask) % size
        following = (offset + IV_BYTES) % size
        rptr = (regs.stored(Reg.IH_RB_RPTR) & IH_RB_WPTR_OFFSET.mask) % size
        if following == rptr:
            if IH_RB_CNTL_WPTR_OVERFLOW_ENABLE.get(cntl) and not IH_RB_CNTL_WPTR_OVERFLOW_CLEAR.get(cntl):
                self._write_pointer(wptr | IH_RB_WPTR_RB_OVERFLOW.mask, cntl)
            return self._drop(iv, f"IH ring 0 is full (write offset {offset:#x}, read offset {rptr:#x})")
        try:
            self.memory.mm.write(self.base + offset, iv.pack())
        except GpuMemoryFault as fault:
            return self._drop(iv, f"IH ring 0 at MC {self.base + offset:#x} is unreachable: {fault}")
        self._write_pointer(wptr & ~IH_RB_WPTR_OFFSET.mask | following, cntl)
        self.posted += 1
        return True

    def _write_pointer(self, wptr: int, cntl: int) -> None:
        regs = self.regs
        regs.store(Reg.IH_RB_WPTR, wptr)
        if not IH_RB_CNTL_WPTR_WRITEBACK_ENABLE.get(cntl):
            return
        low = regs.stored(Reg.IH_RB_WPTR_ADDR_LO) & IH_RB_WPTR_ADDR_LO_ADDR.mask
        address = IH_RB_WPTR_ADDR_HI_ADDR.get(regs.stored(Reg.IH_RB_WPTR_ADDR_HI)) << 32 | low
        try:
            self.memory.mm.write(address, _U32.pack(wptr))
        except GpuMemoryFault as fault:
            _log.warning("IH: write-back of IH_RB_WPTR %#x to MC %#x failed: %s", wptr, address, fault)

    def _drop(self, iv: InterruptVector, reason: str) -> bool:
        self.dropped.append((iv, reason))
        _log.info("IH: IV client %#x src %#x dropped: %s", iv.client_id, iv.source_id, reason)
        return False
