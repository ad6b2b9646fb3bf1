"""What every GPU PCIe function behind the ASM2464 bridge shares: the host port its DMA goes through, and plugging in.

The GPU core (:class:`~tinyhil.emulators.amdgpu.gpu.AmdGpu`) knows nothing of PCIe. The card around it is a
:class:`BridgedFunction` subclass: :class:`~tinyhil.emulators.amdgpu.gfx1100.Gfx1100Function` (Navi 31's config
space and its real register interface, docs/gfx1100.md) is the one the USB path builds. This module holds what such
a card needs beyond its own registers: the port that makes the bridge's
:class:`~tinyhil.emulators.pcie.function.PcieHost` the GPU's PCIe master, and :class:`RegisterAccess`, the access
size a register BAR declares (narrower accesses are widened to it). The core stays reusable by the KFD front door,
which has no config space and no bridge. Each board's PCI device id is :data:`tinyhil.spec.amd_pci_ids.DEVICE_IDS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tinyhil._check import check_int
from tinyhil.align import round_down, round_up
from tinyhil.errors import InvalidArgument, StateError

from ..kernel import EventKernel
from ..pcie.function import PcieHost, PcieUnsupportedRequest
from ..pcie.type0 import Type0Function
from .gpu import AmdGpu

__all__ = ["DEFAULT_GFX_TARGET_VERSION", "BridgedFunction", "HostPort", "RegisterAccess"]

DEFAULT_GFX_TARGET_VERSION: Final = 110000  # gfx1100: the only register interface the USB path models


class HostPort:
    """The GPU's PCIe master port: forwards its system-page accesses to the bridge once it is attached.

    Before :meth:`BridgedFunction.attach_host` every access is an unsupported request, which the GPU reports as a
    memory fault of the queue that made it (never a crash).
    """

    def __init__(self) -> None:
        self.host: PcieHost | None = None

    def dma_read(self, pcie_addr: int, nbytes: int) -> bytes | memoryview:
        host = self.host
        if host is None:
            raise self._unplugged(pcie_addr, nbytes)
        return host.dma_read(pcie_addr, nbytes)

    def dma_write(self, pcie_addr: int, data: bytes | memoryview) -> None:
        host = self.host
        if host is None:
            raise self._unplugged(pcie_addr, memoryview(data).nbytes)
        host.dma_write(pcie_addr, data)

    @staticmethod
    def _unplugged(pcie_addr: int, nbytes: int) -> PcieUnsupportedRequest:
        return PcieUnsupportedRequest(
            f"DMA {pcie_addr:#x}+{nbytes:#x}: the GPU is not plugged into a bridge (no attach_host yet)",
            addr=pcie_addr,
            nbytes=nbytes,
        )


class BridgedFunction(Type0Function):
    """What every GPU function behind the bridge shares: the host port its DMA goes through, the event kernel of
    its GPU (``gpu``), plugging in (:meth:`attach_host`). Subclasses set ``gpu``, ``_port`` and ``_config``."""

    gpu: AmdGpu
    _port: HostPort

    @staticmethod
    def _check_board(kernel: object, vram_bytes: int, *, min_vram: int, shown_min: str) -> None:
        """The one check of a bridged GPU's kernel and VRAM size: a power of two (BAR0 is one) of ``min_vram``
        bytes or more.

        Raises:
            InvalidArgument: not the bridge's EventKernel, or a VRAM size that is not such a power of two.
        """
        if not isinstance(kernel, EventKernel):
            raise InvalidArgument(f"kernel={kernel!r}, expected the EventKernel the bridge runs on")
        check_int("vram_bytes", vram_bytes, min_value=min_vram)
        if vram_bytes & (vram_bytes - 1):
            raise InvalidArgument(f"vram_bytes={vram_bytes:#x}, expected a power of two >= {shown_min} (BAR0 is one)")

    @property
    def kernel(self) -> EventKernel:
        return self.gpu.kernel

    @property
    def host(self) -> PcieHost | None:
        """The bridge the GPU DMAs through (``None`` until plugged in)."""
        return self._port.host

    def attach_host(self, host: PcieHost) -> None:
        """Plug into ``host``: the GPU's system memory accesses now reach its memory.

        Raises:
            StateError: already plugged into another bridge.
        """
        if self._port.host is not None and self._port.host is not host:
            raise StateError(f"{self!r} is already plugged into {self._port.host!r}, expected one bridge per GPU")
        self._port.host = host


@dataclass(frozen=True, slots=True)
class RegisterAccess:
    """The access size a register region implements (as QEMU's ``MemoryRegionOps.impl`` declares it): an access
    of any size or alignment the bus delivers is widened to the whole registers around it, and a narrow write
    merges its bytes into what those registers read (the byte enables of a PCIe write)."""

    unit_bytes: int

    def around(self, offset: int, nbytes: int) -> tuple[int, int]:
        """``[start, end)`` of the whole registers covering ``[offset, offset + nbytes)``."""
        unit = self.unit_bytes
        return round_down(offset, unit), round_up(offset + nbytes, unit)

    def read(self, read: Callable[[int, int], bytes], offset: int, nbytes: int) -> bytes:
        """``nbytes`` at ``offset``, through ``read(start, nbytes)`` of whole registers."""
        start, end = self.around(offset, nbytes)
        if start == offset and end == offset + nbytes:
            return read(offset, nbytes)
        return read(start, end - start)[offset - start : offset - start + nbytes]

    def write(
        self, read: Callable[[int, int], bytes], write: Callable[[int, bytes], None], offset: int, data: bytes
    ) -> None:
        """Write ``data`` at ``offset`` through ``write(start, data)`` of whole registers, a narrow write merged
        into what ``read`` gives for them."""
        start, end = self.around(offset, len(data))
        if start == offset and end == offset + len(data):
            write(offset, data)
            return
        merged = bytearray(read(start, end - start))
        merged[offset - start : offset - start + len(data)] = data
        write(start, bytes(merged))
