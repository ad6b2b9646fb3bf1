"""The system-bus seam: how the emulated GPU reaches memory outside its VRAM (the bridge's SRAM and windows).

The address space's I/O region (:class:`~tinyhil.emulators.amdgpu.memory.IoRegion`) reaches it: the flat
translation's system aperture and the gfx1100 model's system-bit pages translate to PCIe bus addresses on it. The
ASM2464 model implements it, and a test may give the GPU any object with these two methods.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["SystemBus"]


@runtime_checkable
class SystemBus(Protocol):
    """What the USB bridge offers the GPU: its SRAM and windows at their PCIe addresses.

    ``dma_read`` returns exactly ``nbytes``; both raise ``ValueError``/``LookupError`` (or any ``TinyHilError``,
    such as ``InvalidArgument``) for an address with nothing behind it, which the GPU reports as a memory fault.
    """

    def dma_read(self, pcie_addr: int, nbytes: int) -> bytes | memoryview: ...

    def dma_write(self, pcie_addr: int, data: bytes | memoryview) -> None: ...
