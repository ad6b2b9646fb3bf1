"""BAR5 and BAR0 of a gfx1100 over the bridge, by dword register address (``spec/amdgpu-registers.md`` 2.3, 4).

Registers below the 1 MB BAR5 are one 32-bit TLP each; registers beyond it go through ``BIF_BX_PF0_RSMU_INDEX``
(a byte address) and ``BIF_BX_PF0_RSMU_DATA``. The HDP flush writes 0 at the BAR5 byte offset
``BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL`` holds. Polls pause ``poll_s`` through the transport between reads (wall time
on a board, virtual time on an emulated one).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.errors import DeviceTimeout
from tinyhil.spec.gfx1100_regs import BAR5_DWORDS, Reg

__all__ = ["Gfx1100Registers"]

_DWORD: Final = struct.Struct("<I")
_U32: Final = 0xFFFF_FFFF
_FLUSH_BYTES: Final = b"\0\0\0\0"


class Gfx1100Registers:
    """BAR5 and BAR0 of a gfx1100 over the bridge: ``read(reg)`` / ``write(reg, value)`` by dword address."""

    def __init__(self, controller: Asm2464Controller, bar5: int, bar0: int, *, poll_s: float, timeout_s: float):
        self.controller = controller
        self.bar5 = bar5
        self.bar0 = bar0
        self.poll_s = poll_s
        self.timeout_s = timeout_s
        self._hdp_flush: int | None = None

    def read(self, reg: int) -> int:
        """A register read (through RSMU_INDEX / RSMU_DATA beyond the 1 MB BAR, section 2.3)."""
        if reg >= BAR5_DWORDS:
            self.write(Reg.BIF_BX_PF0_RSMU_INDEX, reg * 4)
            reg = Reg.BIF_BX_PF0_RSMU_DATA
        return int(_DWORD.unpack(self.controller.pcie_mem_read(self.bar5 + reg * 4, 4))[0])

    def write(self, reg: int, value: int) -> None:
        """A register write (through RSMU_INDEX / RSMU_DATA beyond the 1 MB BAR)."""
        if reg >= BAR5_DWORDS:
            self.write(Reg.BIF_BX_PF0_RSMU_INDEX, reg * 4)
            reg = Reg.BIF_BX_PF0_RSMU_DATA
        self.controller.pcie_mem_write(self.bar5 + reg * 4, _DWORD.pack(value & _U32))

    def vram_write(self, offset: int, data: bytes | memoryview) -> None:
        self.controller.pcie_mem_write(self.bar0 + offset, data)

    def vram_read(self, offset: int, nbytes: int) -> bytes:
        return bytes(self.controller.pcie_mem_read(self.bar0 + offset, nbytes))

    def hdp_flush(self) -> None:
        """Section 4: write 0 at the BAR5 byte offset ``BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL`` holds (read once)."""
        if self._hdp_flush is None:
            self._hdp_flush = self.read(Reg.BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL)
        self.controller.pcie_mem_write(self.bar5 + self._hdp_flush, _FLUSH_BYTES)

    def poll(self, condition: Callable[[], bool], what: str) -> None:
        """Poll ``condition`` (pausing ``poll_s`` between reads) for up to ``timeout_s``.

        Raises:
            DeviceTimeout: naming ``what``.
        """
        polls = int(self.timeout_s / self.poll_s) + 1
        for poll in range(polls):
            if condition():
                return
            if poll + 1 < polls:
                self.controller.transport.pause(self.poll_s)
        raise DeviceTimeout(f"gfx1100 boot: {what}: not reached after {polls} polls over {self.timeout_s}s", op="boot")

    def poll_reg(self, reg: int, mask: int, value: int, what: str) -> int:
        """Poll until ``read(reg) & mask == value``; the last value read."""
        seen = [0]

        def holds() -> bool:
            seen[0] = self.read(reg)
            return seen[0] & mask == value

        self.poll(holds, f"{what} ({Reg(reg).name} & {mask:#x} == {value:#x}, last read {seen[0]:#x})")
        return seen[0]
