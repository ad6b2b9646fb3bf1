"""BAR5 of gfx1100: 1 MB of registers, with index/data pairs for VRAM and for registers beyond it.

``docs/gfx1100.md`` sections 1, 2.3 and 4 (HDP flush). Byte offsets, whole aligned dwords:

| BAR5 dword | what |
|---|---|
| ``MM_INDEX`` 0x0 / ``MM_INDEX_HI`` 0x6 / ``MM_DATA`` 0x1 | VRAM window at offset INDEX[30:0] + INDEX_HI << 31 |
| ``BIF_BX_PF0_RSMU_INDEX`` 0x14 / ``_DATA`` 0x15 | any register: INDEX = its dword address x 4 (a byte address) |
| ``BIF_BX0_PCIE_INDEX2`` 0xE / ``_DATA2`` 0xF / ``_INDEX2_HI`` 0x11 | the same, Linux's pair (HI: bits 39:32) |
| the byte offset ``BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL`` reads (0x7F000) | HDP flush: a write is counted, reads 0 |
| everything else below 0x40000 | the register at that dword (:class:`RegisterFile`) |
"""

from __future__ import annotations

import struct
from typing import Final

from tinyhil._check import check_range
from tinyhil.errors import InvalidArgument
from tinyhil.spec.gfx1100_regs import BAR5_BYTES, Reg
from tinyhil.spec.gfx1100_soc import HDP_FLUSH_BYTE_OFFSET, MM_INDEX_HI_SHIFT, MM_INDEX_VRAM_FLAG

from ..pcie import RegisterAccess
from .regfile import RegisterFile

__all__ = ["Bar5"]

_DWORD: Final = struct.Struct("<I")
_HDP_FLUSH_DWORD: Final = HDP_FLUSH_BYTE_OFFSET // 4
_INDEX_TO_DWORD: Final = 2  # the index registers hold byte addresses


class Bar5:
    """The register BAR (see the module docstring); ``hdp_flushes`` counts HDP flush writes. ``ACCESS``: it
    implements whole aligned 32-bit registers; the PCIe function widens narrower accesses to them."""

    ACCESS: Final = RegisterAccess(unit_bytes=4)

    def __init__(self, regs: RegisterFile, vram: memoryview) -> None:
        self.regs = regs
        self.vram = vram
        regs.set_reset_value(Reg.BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL, HDP_FLUSH_BYTE_OFFSET)
        self.reset()

    def reset(self) -> None:
        self.hdp_flushes = 0

    def _check(self, offset: int, nbytes: int) -> None:
        check_range("BAR5", offset, nbytes, BAR5_BYTES)
        if self.ACCESS.around(offset, nbytes) != (offset, offset + nbytes):
            raise InvalidArgument(f"BAR5 access {offset:#x}+{nbytes:#x}, expected whole aligned 32-bit registers")

    def _vram_offset(self) -> int:
        index = self.regs.stored(Reg.MM_INDEX) & ~MM_INDEX_VRAM_FLAG
        offset = index | self.regs.stored(Reg.MM_INDEX_HI) << MM_INDEX_HI_SHIFT
        if offset + 4 > self.vram.nbytes:
            raise InvalidArgument(f"MM_INDEX VRAM offset {offset:#x}, expected below {self.vram.nbytes:#x}")
        return offset

    def _indirect(self, data: Reg) -> int:
        regs = self.regs
        if data is Reg.BIF_BX_PF0_RSMU_DATA:
            return regs.stored(Reg.BIF_BX_PF0_RSMU_INDEX) >> _INDEX_TO_DWORD
        byte = regs.stored(Reg.BIF_BX0_PCIE_INDEX2) | regs.stored(Reg.BIF_BX0_PCIE_INDEX2_HI) << 32
        return byte >> _INDEX_TO_DWORD

    def read(self, offset: int, nbytes: int) -> bytes:
        """Read whole registers.

        Raises:
            InvalidArgument: the access leaves the 1 MB BAR or is not dword aligned, or MM_DATA points past VRAM.
        """
        self._check(offset, nbytes)
        return b"".join(_DWORD.pack(self._read(dword)) for dword in range(offset // 4, (offset + nbytes) // 4))

    def write(self, offset: int, data: bytes) -> None:
        """Write whole registers, in address order.

        Raises:
            InvalidArgument: the access leaves the 1 MB BAR or is not dword aligned, or MM_DATA points past VRAM.
        """
        self._check(offset, len(data))
        for index, (value,) in enumerate(_DWORD.iter_unpack(data)):
            self._write(offset // 4 + index, value)

    def _read(self, dword: int) -> int:
        if dword == Reg.MM_DATA:
            at = self._vram_offset()
            return int(_DWORD.unpack_from(self.vram, at)[0])
        if dword in (Reg.BIF_BX_PF0_RSMU_DATA, Reg.BIF_BX0_PCIE_DATA2):
            return self.regs.read(self._indirect(Reg(dword)))
        if dword == _HDP_FLUSH_DWORD:
            return 0
        return self.regs.read(dword)

    def _write(self, dword: int, value: int) -> None:
        if dword == Reg.MM_DATA:
            _DWORD.pack_into(self.vram, self._vram_offset(), value)
        elif dword in (Reg.BIF_BX_PF0_RSMU_DATA, Reg.BIF_BX0_PCIE_DATA2):
            self.regs.write(self._indirect(Reg(dword)), value)
        elif dword == _HDP_FLUSH_DWORD:
            self.hdp_flushes += 1
        else:
            self.regs.write(dword, value)
