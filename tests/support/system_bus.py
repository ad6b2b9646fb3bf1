"""Memory on the PCIe side of an emulated GPU, as its system bus (``from support.system_bus import FakePcie``).

By default the bridge's SRAM: 512 KB at PCIe ``0x200000`` (docs/asm2464.md).
"""

from __future__ import annotations

from tinyhil.spec.asm2464 import PCIE_SRAM_BASE, SRAM_BYTES


class FakePcie:
    """``nbytes`` of memory at bus address ``base`` (default: the bridge's SRAM); any other address raises
    ``ValueError``, as a DMA to nothing does."""

    def __init__(self, base: int = PCIE_SRAM_BASE, nbytes: int = SRAM_BYTES) -> None:
        self.base = base
        self.memory = bytearray(nbytes)

    def _at(self, pcie_addr: int, nbytes: int) -> int:
        offset = pcie_addr - self.base
        if offset < 0 or offset + nbytes > len(self.memory):
            where = f"{self.base:#x}+{len(self.memory):#x}"
            raise ValueError(f"PCIe {pcie_addr:#x}+{nbytes:#x} hits nothing (the memory is at {where})")
        return offset

    def dma_read(self, pcie_addr: int, nbytes: int) -> bytes:
        offset = self._at(pcie_addr, nbytes)
        return bytes(self.memory[offset : offset + nbytes])

    def dma_write(self, pcie_addr: int, data: bytes | memoryview) -> None:
        view = memoryview(data).cast("B")
        offset = self._at(pcie_addr, view.nbytes)
        self.memory[offset : offset + view.nbytes] = view
