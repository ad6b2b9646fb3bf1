"""The bridge's memories: 64 KB of XDATA and 512 KB of SRAM, and the windows that make them one set of bytes."""

from __future__ import annotations

from typing import Final

import numpy as np

from tinyhil._check import check_int, check_range
from tinyhil.spec.asm2464 import (
    ADMIN_WINDOW_BYTES,
    CQ_WINDOW_BYTES,
    PCIE_ADMIN_WINDOW,
    PCIE_CQ_WINDOW,
    PCIE_SRAM_BASE,
    PCIE_SYS_BUF,
    SRAM_BYTES,
    SRAM_WINDOW_BYTES,
    SYS_BUF_BYTES,
    XDATA_BYTES,
    Xdata,
)

__all__ = ["BridgeMemory"]

_SRAM: Final = "sram"
_XDATA: Final = "xdata"
# XDATA ranges that alias SRAM: (xdata start, length, SRAM offset).
_XDATA_SRAM_ALIASES: Final = (
    (int(Xdata.SRAM_WINDOW), SRAM_WINDOW_BYTES, 0),
    (int(Xdata.SRAM_ENGINE_BASE), SRAM_WINDOW_BYTES, 0),
)
# PCIe ranges the GPU reaches: (pcie start, length, backing store, offset in it).
_PCIE_REGIONS: Final = (
    (PCIE_SRAM_BASE, SRAM_BYTES, _SRAM, 0),
    (PCIE_ADMIN_WINDOW, ADMIN_WINDOW_BYTES, _XDATA, int(Xdata.ADMIN_QUEUES)),
    (PCIE_SYS_BUF, SYS_BUF_BYTES, _XDATA, int(Xdata.SYS_BUF)),
    (PCIE_CQ_WINDOW, CQ_WINDOW_BYTES, _XDATA, int(Xdata.COMPLETION_QUEUE)),
)


class BridgeMemory:
    """XDATA and SRAM, with every window a view of the same bytes (docs/asm2464.md "XDATA map").

    =================  ===================================  ==========================
    XDATA              what                                 PCIe address (GPU side)
    =================  ===================================  ==========================
    0x7000             bulk OUT landing buffer (streams)    -
    0x8000-0x8FFF      window onto SRAM bytes 0-0xFFF       0x200000-0x200FFF
    0xA000-0xAFFF      sys_buf                              0x820000-0x820FFF
    0xB000-0xB1FF      admin queues                         0x800000-0x8001FF
    0xB210-0xB29F      TLP engine registers (plain bytes)   -
    0xB450             LTSSM link state (read-only)         -
    0xB800-0xBFFF      completion queue                     0x822000-0x8227FF
    0xF000-0xFFFF      SRAM slot 0 as the 0xF2 engine sees  0x200000-0x200FFF
    (SRAM, 512 KB)     32 slots of 16 KB                    0x200000-0x27FFFF
    =================  ===================================  ==========================

    sys_buf, admin queues and completion queue are stored in XDATA at their XDATA addresses; the GPU reaches them
    at their PCIe addresses. The rest of XDATA is plain bytes.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Power-on contents: all zero."""
        self.xdata = np.zeros(XDATA_BYTES, dtype=np.uint8)
        self.sram = np.zeros(SRAM_BYTES, dtype=np.uint8)
        self._stores = {_SRAM: self.sram, _XDATA: self.xdata}
        self._xdata_bytes = self.xdata.data
        self.dma_views: dict[tuple[int, int], memoryview] = {}  # the bridge's DMA view cache, dropped with the arrays
        # (start, end, store bytes, store offset - start) per PCIe region: every GPU DMA looks one up
        self._regions = [
            (start, start + length, self._stores[store].data, offset - start)
            for start, length, store, offset in _PCIE_REGIONS
        ]

    def _xdata_pieces(self, addr: int, nbytes: int) -> list[tuple[np.ndarray, int, int, int]]:
        """Split an XDATA range into ``(store, store offset, offset in the request, length)`` pieces."""
        pieces: list[tuple[np.ndarray, int, int, int]] = []
        pos, end = addr, addr + nbytes
        while pos < end:
            store, offset, stop = self.xdata, pos, end
            for start, length, sram_offset in _XDATA_SRAM_ALIASES:
                if start <= pos < start + length:
                    store, offset, stop = self.sram, sram_offset + pos - start, min(end, start + length)
                    break
                if pos < start < stop:
                    stop = start
            pieces.append((store, offset, pos - addr, stop - pos))
            pos = stop
        return pieces

    def xdata_read(self, addr: int, nbytes: int) -> bytes:
        """Read ``nbytes`` of XDATA at ``addr`` (windows read through to SRAM)."""
        if type(addr) is not int or type(nbytes) is not int or addr < 0 or nbytes < 0 or addr + nbytes > XDATA_BYTES:
            check_range("XDATA", addr, nbytes, XDATA_BYTES)  # int subclasses pass here
        end = addr + nbytes
        for start, length, _ in _XDATA_SRAM_ALIASES:
            if addr < start + length and end > start:
                break
        else:  # no SRAM window (the drain fence read)
            return self._xdata_bytes[addr:end].tobytes()
        pieces = self._xdata_pieces(addr, nbytes)
        out = bytearray(nbytes)
        for store, offset, at, length in pieces:
            out[at : at + length] = store[offset : offset + length].tobytes()
        return bytes(out)

    def xdata_write(self, addr: int, data: bytes) -> None:
        """Write ``data`` to XDATA at ``addr`` (windows write through to SRAM); LTSSM is left to the link block."""
        check_range("XDATA", addr, len(data), XDATA_BYTES)
        source = np.frombuffer(data, dtype=np.uint8)
        for store, offset, at, length in self._xdata_pieces(addr, len(data)):
            store[offset : offset + length] = source[at : at + length]

    @staticmethod
    def xdata_to_pcie(addr: int) -> int | None:
        """The PCIe address the GPU sees for XDATA byte ``addr``, or ``None`` outside the windows."""
        for start, length, sram_offset in _XDATA_SRAM_ALIASES:
            if start <= addr < start + length:
                return PCIE_SRAM_BASE + sram_offset + addr - start
        for pcie, length, store, offset in _PCIE_REGIONS:
            if store == _XDATA and offset <= addr < offset + length:
                return pcie + addr - offset
        return None

    def pcie_view(self, pcie_addr: int, nbytes: int) -> memoryview | None:
        """The bytes behind ``[pcie_addr, pcie_addr + nbytes)`` as a writable byte view, or ``None`` if not one
        region."""
        if type(pcie_addr) is not int or type(nbytes) is not int or pcie_addr < 0 or nbytes < 0:
            check_int("pcie_addr", pcie_addr, min_value=0)
            check_int("nbytes", nbytes, min_value=0)
        end = pcie_addr + nbytes
        for start, stop, store, shift in self._regions:
            if start <= pcie_addr and end <= stop:
                return store[pcie_addr + shift : end + shift]
        return None
