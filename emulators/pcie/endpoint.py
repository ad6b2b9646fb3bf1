"""A plain endpoint behind the bridge until the GPU model plugs in: VRAM, doorbells and registers as memory."""

from __future__ import annotations

import mmap
from collections import deque
from typing import Final

import numpy as np

from tinyhil._check import check_int, check_range
from tinyhil.emulators.pcie.function import PcieHost
from tinyhil.emulators.pcie.type0 import BarSpec, Type0Config, Type0Function
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.spec.amdgpu import DOORBELL_BAR_BYTES, REGS_BAR_BYTES, Bar
from tinyhil.spec.pci import CLASS_DISPLAY_VGA, VENDOR_ID_AMD

__all__ = ["DEFAULT_VRAM_BYTES", "PlainEndpoint", "gpu_bars"]

PLAIN_DEVICE_ID: Final = 0x744C  # model choice: a Navi 31 device ID; the plain endpoint runs nothing
VRAM_BAR: Final = int(Bar.VRAM)
DOORBELL_BAR: Final = int(Bar.DOORBELL)
REGISTER_BAR: Final = int(Bar.REGS)
DEFAULT_VRAM_BYTES: Final = 256 << 20  # model choice: the VRAM of an emulated GPU behind the bridge unless told
DOORBELL_BYTES: Final = DOORBELL_BAR_BYTES  # docs/asm2464.md "PCIe behind the bridge"
REGISTER_BYTES: Final = REGS_BAR_BYTES
BAR0_POWER_ON_MAX_BYTES: Final = 256 << 20  # BAR0 powers on at min(VRAM, 256 MB), as discrete AMD GPUs do
MIN_VRAM_BYTES: Final = 1 << 20
WRITES_SEEN_KEPT: Final = 4096


def gpu_bars(vram_bytes: int) -> dict[int, BarSpec]:
    """The BARs of a GPU behind the bridge (docs/asm2464.md, PCIe): BAR0 VRAM, 64-bit prefetchable, powering on
    at ``min(vram_bytes, 256 MB)`` and resizable by powers of two up to ``vram_bytes``; BAR2 doorbells (8 KB, 64-bit
    prefetchable); BAR5 registers (2 MB, 32-bit). ``vram_bytes`` is a power of two."""
    bar0 = min(vram_bytes, BAR0_POWER_ON_MAX_BYTES)
    sizes = tuple(bar0 << shift for shift in range((vram_bytes // bar0).bit_length()))
    return {
        VRAM_BAR: BarSpec(bar0, is_64bit=True, prefetchable=True, resizable_sizes=sizes),
        DOORBELL_BAR: BarSpec(DOORBELL_BYTES, is_64bit=True, prefetchable=True),
        REGISTER_BAR: BarSpec(REGISTER_BYTES),
    }


class PlainEndpoint(Type0Function):
    """Vendor 0x1002 with BAR0 VRAM (64-bit prefetchable, resizable), BAR2 doorbells (8 KB), BAR5 registers (2 MB).

    ======  ============================================  ========================================
    BAR     what                                          documented in
    ======  ============================================  ========================================
    BAR0    VRAM aperture: the first bar_size bytes       docs/asm2464.md "PCIe behind the bridge"
    BAR2    doorbells, 8 KB of plain memory (64-bit)      docs/asm2464.md "PCIe behind the bridge"
    BAR5    registers, 2 MB of plain memory (32-bit)      docs/asm2464.md "PCIe behind the bridge"
    ======  ============================================  ========================================

    VRAM is an anonymous ``mmap`` (the kernel commits pages only when touched), ``vram_bytes`` long (a power of two
    of at least 1 MB). BAR0 powers on at ``min(vram_bytes, 256 MB)`` and resizes through the resizable-BAR
    capability to any power of two from there up to ``vram_bytes``.
    """

    def __init__(self, *, vram_bytes: int = DEFAULT_VRAM_BYTES) -> None:
        check_int("vram_bytes", vram_bytes, min_value=MIN_VRAM_BYTES)
        if vram_bytes & (vram_bytes - 1):
            raise InvalidArgument(f"vram_bytes={vram_bytes:#x}, expected a power of two >= 1 MB")
        self.vram_bytes = vram_bytes
        self._config = Type0Config(
            vendor_id=VENDOR_ID_AMD, device_id=PLAIN_DEVICE_ID, class_code=CLASS_DISPLAY_VGA, bars=gpu_bars(vram_bytes)
        )
        self._vram_map = mmap.mmap(-1, vram_bytes)
        self.vram = np.frombuffer(self._vram_map, dtype=np.uint8)
        self.host: PcieHost | None = None
        self.writes_seen: deque[tuple[int, int]] = deque(maxlen=WRITES_SEEN_KEPT)
        self.reset()

    def reset(self) -> None:
        """Power-on state: config space reset, doorbells and registers zero (VRAM keeps its contents, like DRAM)."""
        self._config.reset()
        self.doorbells = np.zeros(DOORBELL_BYTES, dtype=np.uint8)
        self.registers = np.zeros(REGISTER_BYTES, dtype=np.uint8)
        self.writes_seen.clear()

    def _memory(self, bar: int) -> np.ndarray:
        if bar == VRAM_BAR:
            return self.vram[: self._config.bar_size(VRAM_BAR)]
        if bar == DOORBELL_BAR:
            return self.doorbells
        if bar == REGISTER_BAR:
            return self.registers
        raise InvalidArgument(f"bar={bar}, expected one of {VRAM_BAR}, {DOORBELL_BAR}, {REGISTER_BAR}")

    def mmio_read(self, bar: int, offset: int, nbytes: int) -> bytes:
        memory = self._memory(bar)
        check_range(f"BAR{bar}", offset, nbytes, memory.size)
        return memory[offset : offset + nbytes].tobytes()

    def mmio_write(self, bar: int, offset: int, data: bytes) -> None:
        memory = self._memory(bar)
        check_range(f"BAR{bar}", offset, len(data), memory.size)
        memory[offset : offset + len(data)] = np.frombuffer(data, dtype=np.uint8)

    def attach_host(self, host: PcieHost) -> None:
        self.host = host

    def host_memory_written(self, pcie_addr: int, nbytes: int) -> None:
        """Record the notification in ``writes_seen`` (the last 4096; the plain endpoint polls nothing)."""
        self.writes_seen.append((pcie_addr, nbytes))

    def dma_to_vram(self, pcie_addr: int, nbytes: int, vram_offset: int) -> None:
        """Copy ``nbytes`` from the bridge's memory at ``pcie_addr`` into VRAM (a test stand-in for an SDMA copy).

        Raises:
            StateError: no host attached.
        """
        if self.host is None:
            raise StateError("PlainEndpoint.dma_to_vram: no host attached, expected attach_host() first")
        check_range("VRAM", vram_offset, nbytes, self.vram_bytes)
        data = self.host.dma_read(pcie_addr, nbytes)
        self.vram[vram_offset : vram_offset + nbytes] = np.frombuffer(data, dtype=np.uint8)
