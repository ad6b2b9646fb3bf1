"""The PCIe seam inside the emulators: what an endpoint behind the bridge implements and what the bridge offers it.

The ASM2464 model talks to the function behind its bridges only through :class:`PcieFunction`; a bus-mastering
function (the GPU model) reaches the bridge's SRAM and windows only through :class:`PcieHost`. Addresses are PCIe bus
addresses in bytes; data is little-endian bytes as on the link.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from tinyhil.errors import DeviceError

if TYPE_CHECKING:
    from tinyhil.emulators.pcie.type0 import Type0Config

__all__ = ["PcieFunction", "PcieHost", "PcieUnsupportedRequest"]


class PcieUnsupportedRequest(DeviceError):
    """A memory request hit nothing (no BAR, no window, decoding disabled): the completer answers UR."""

    def __init__(self, message: str, *, addr: int, nbytes: int) -> None:
        super().__init__(message, op="pcie")
        self.addr = addr
        self.nbytes = nbytes


@runtime_checkable
class PcieHost(Protocol):
    """What the bridge offers a bus-mastering function: DMA to the bridge's own memory.

    Reachable PCIe ranges (docs/asm2464.md "XDATA map"): SRAM ``0x200000-0x27FFFF``, admin queues
    ``0x800000-0x8001FF``, sys_buf ``0x820000-0x820FFF``, completion queue ``0x822000-0x8227FF``. An access must lie
    inside one range.
    """

    def dma_read(self, pcie_addr: int, nbytes: int) -> bytes | memoryview:
        """Read ``nbytes`` at ``pcie_addr``; a returned view is valid until the bridge next changes (copy to keep).

        Raises:
            PcieUnsupportedRequest: nothing is behind the range, or bus mastering is not enabled on the path.
        """
        ...

    def dma_write(self, pcie_addr: int, data: bytes | memoryview) -> None:
        """Write ``data`` at ``pcie_addr``, with the bridge's side effects (quirks, copyout release).

        Raises:
            PcieUnsupportedRequest: nothing is behind the range, or bus mastering is not enabled on the path.
        """
        ...


@runtime_checkable
class PcieFunction(Protocol):
    """An endpoint function behind the bridge (the GPU at bus 4, device 0, function 0).

    ``config`` is the function's type-0 configuration space: the bridge decodes memory TLPs against the BARs as
    programmed there (base, size, COMMAND.MEMORY) and checks COMMAND.MASTER before the function may DMA.
    """

    @property
    def config(self) -> Type0Config:
        """The function's configuration space."""
        ...

    def config_read(self, reg: int) -> int:
        """Read the dword at config offset ``reg`` (a multiple of 4, below 0x1000)."""
        ...

    def config_write(self, reg: int, value: int, byte_enable: int) -> None:
        """Write the lanes of ``value`` selected by ``byte_enable`` (bit i: byte i) to the dword at ``reg``."""
        ...

    def mmio_read(self, bar: int, offset: int, nbytes: int) -> bytes:
        """Read ``nbytes`` at ``offset`` inside BAR ``bar`` (already decoded and bounds-checked by the bridge)."""
        ...

    def mmio_write(self, bar: int, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset`` inside BAR ``bar`` (already decoded and bounds-checked by the bridge)."""
        ...

    def attach_host(self, host: PcieHost) -> None:
        """Called once when the function is plugged in: the host to DMA through."""
        ...

    def host_memory_written(self, pcie_addr: int, nbytes: int) -> None:
        """Bytes at ``pcie_addr`` in the bridge's memory changed (a bulk landed, the host wrote XDATA): wake pollers."""
        ...
