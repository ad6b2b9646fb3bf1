"""The gfx1100 GPU as a PCIe function behind the ASM2464 bridge: Navi 31's config space and BARs over the front end.

``docs/gfx1100.md`` section 1. A :class:`~tinyhil.emulators.amdgpu.pcie.BridgedFunction` whose BARs go
to :class:`Gfx1100Front` (BAR0 VRAM, BAR2 doorbells, BAR5 the 1 MB register BAR), and the GPU's system pages
(PTEs with the system bit) reach the bridge's SRAM and windows over PCIe::

    kernel = EventKernel(seed=0)
    function = Gfx1100Function(kernel=kernel, vram_bytes=256 << 20)
    bridge = Asm2464(kernel=kernel, function=function)    # calls function.attach_host(bridge)
    function.front                                         # the register interface, for assertions

| BAR | what | size |
|---|---|---|
| BAR0 | VRAM (large BAR: resizable up to all of VRAM) | min(VRAM, 256 MB) .. VRAM, 64-bit prefetchable |
| BAR2 | doorbells | 8 KB, 64-bit prefetchable |
| BAR5 | registers (:class:`~tinyhil.emulators.amdgpu.gfx1100.bar5.Bar5`) | 1 MB, 32-bit |

The bridge's power cycle (a fundamental reset of this config space) is a cold power-on of the GPU
(:meth:`Gfx1100Front.reset`). Bytes the bridge lands wake queues polling them through their page tables.
"""

from __future__ import annotations

from typing import Final

from tinyhil.spec.amd_pci_ids import DEVICE_IDS
from tinyhil.spec.amdgpu import DOORBELL_BAR_BYTES, Bar
from tinyhil.spec.gfx1100_regs import BAR5_BYTES
from tinyhil.spec.pci import CLASS_DISPLAY_VGA, VENDOR_ID_AMD

from ...kernel import EventKernel
from ...pcie import DEFAULT_VRAM_BYTES
from ...pcie.type0 import BarSpec, Type0Config
from ..executor import KernelExecutor
from ..pcie import BridgedFunction, HostPort
from ..timing import DEFAULT_TIMING, GpuTiming
from .bar5 import Bar5
from .front import Gfx1100Front

__all__ = ["NAVI31_DEVICE_ID", "Gfx1100Function"]

NAVI31_DEVICE_ID: Final = DEVICE_IDS[110000]  # 0x744C, RX 7900 XT/XTX (section 1)
_BAR0_POWER_ON_MAX_BYTES: Final = 256 << 20


def _bars(vram_bytes: int) -> dict[int, BarSpec]:
    bar0 = min(vram_bytes, _BAR0_POWER_ON_MAX_BYTES)
    sizes = tuple(bar0 << shift for shift in range((vram_bytes // bar0).bit_length()))
    return {
        int(Bar.VRAM): BarSpec(bar0, is_64bit=True, prefetchable=True, resizable_sizes=sizes),
        int(Bar.DOORBELL): BarSpec(DOORBELL_BAR_BYTES, is_64bit=True, prefetchable=True),
        int(Bar.REGS): BarSpec(BAR5_BYTES),
    }


class _Config(Type0Config):
    """Navi 31's config space; its fundamental reset (the bridge's power cycle) is the GPU's cold power-on."""

    def __init__(self, front: Gfx1100Front, *, bars: dict[int, BarSpec]) -> None:
        self._front: Gfx1100Front | None = None  # the power-on reset inside __init__ leaves the fresh GPU alone
        super().__init__(vendor_id=VENDOR_ID_AMD, device_id=NAVI31_DEVICE_ID, class_code=CLASS_DISPLAY_VGA, bars=bars)
        self._front = front

    def reset(self) -> None:
        super().reset()
        if self._front is not None:
            self._front.reset()


class Gfx1100Function(BridgedFunction):
    """Navi 31 (gfx1100) as PCIe function 4:00.0 behind the bridge (see the module docstring).

    Raises:
        InvalidArgument: ``kernel`` is not an EventKernel, or ``vram_bytes`` is not a power of two of at least 64 MB
            (the discovery binary and the driver's boot memory sit in the top of VRAM).
    """

    def __init__(
        self,
        *,
        kernel: EventKernel,
        vram_bytes: int = DEFAULT_VRAM_BYTES,
        timing: GpuTiming = DEFAULT_TIMING,
        executor: KernelExecutor | None = None,
        name: str = "gpu0",
    ) -> None:
        self._check_board(kernel, vram_bytes, min_vram=64 << 20, shown_min="64 MB")
        self._port = HostPort()
        self.front = Gfx1100Front.build(
            kernel, vram_bytes=vram_bytes, pcie=self._port, name=name, timing=timing, executor=executor
        )
        self.gpu = self.front.gpu
        self._config = _Config(self.front, bars=_bars(vram_bytes))

    def __repr__(self) -> str:
        host = "attached" if self.host is not None else "not attached"
        return f"<Gfx1100Function {VENDOR_ID_AMD:04x}:{NAVI31_DEVICE_ID:04x} {self.gpu!r} host {host}>"

    # --- PcieFunction: BARs (decoded and bounds-checked by the bridge) ---
    def mmio_read(self, bar: int, offset: int, nbytes: int) -> bytes:
        """Read ``nbytes`` at ``offset`` of BAR ``bar``; a narrow BAR5 read reads its bytes of the registers."""
        if bar == Bar.VRAM:
            return self.front.vram_read(offset, nbytes)
        if bar == Bar.REGS:
            return Bar5.ACCESS.read(self.front.bar5.read, offset, nbytes)
        return bytes(nbytes)  # BAR2 doorbells are write-only to the GPU; reads return 0

    def mmio_write(self, bar: int, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset`` of BAR ``bar``; a narrow BAR5 write merges into the registers' values."""
        if bar == Bar.VRAM:
            self.front.vram_write(offset, data)
        elif bar == Bar.DOORBELL:
            self.front.doorbell_write(offset, data)
        else:
            Bar5.ACCESS.write(self.front.bar5.read, self.front.bar5.write, offset, data)

    def host_memory_written(self, pcie_addr: int, nbytes: int) -> None:
        """The bridge changed its memory at ``pcie_addr``: wake queues polling it through a system page."""
        self.front.bus_written(pcie_addr, nbytes, system=True)
