"""The GPU as a PCIe function behind the ASM2464 bridge: its type-0 config space, BAR routing, and the system bus.

The GPU core (:class:`~tinyhil.emulators.amdgpu.gpu.AmdGpu`) knows nothing of PCIe: it has BARs as numbers, a
:class:`~tinyhil.emulators.amdgpu.memory.SystemBus` for the system aperture and a wake-up for host writes. This
module is the card around it: the config space the bring-up sizes and programs, and the plumbing that makes the
bridge's :class:`~tinyhil.emulators.pcie.function.PcieHost` the GPU's system bus. The core stays reusable by the
KFD front door, which has no config space and no bridge.

Usage (one event kernel for the bridge and the GPU)::

    kernel = EventKernel(seed=0)
    function = AmdGpuFunction(kernel=kernel, vram_bytes=256 << 20, gfx_target_version=110000)
    bridge = Asm2464(kernel=kernel, function=function)    # calls function.attach_host(bridge)
    function.gpu                                           # the AmdGpu, for assertions
"""

from __future__ import annotations

from typing import Final

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.spec.amdgpu import DEFAULT_VRAM_BYTES, SYS_APERTURE, Bar
from tinyhil.spec.pci import CLASS_DISPLAY_VGA, VENDOR_ID_AMD

from ..kernel import EventKernel
from ..pcie.endpoint import gpu_bars
from ..pcie.function import PcieHost, PcieUnsupportedRequest
from ..pcie.type0 import BarSpec, Type0Config, Type0Function
from .executor import KernelExecutor
from .gpu import AmdGpu
from .timing import DEFAULT_TIMING, GpuTiming

__all__ = ["DEFAULT_GFX_TARGET_VERSION", "DEVICE_IDS", "AmdGpuFunction", "BridgedFunction", "registers_around"]

DEFAULT_GFX_TARGET_VERSION: Final = 110000
REGISTER_BYTES: Final = 4
_REGS_BAR: Final = int(Bar.REGS)
# gfx_target_version (KFD's encoding: major * 10000 + minor * 100 + stepping) -> the PCI device id of a board with
# that GPU (public PCI ID lists). Only the identity the bring-up reads; the model's behaviour does not depend on it.
DEVICE_IDS: Final[dict[int, int]] = {
    90008: 0x738C,  # gfx908, MI100
    90010: 0x740F,  # gfx90a, MI210
    90402: 0x74A1,  # gfx942, MI300X
    90500: 0x75A0,  # gfx950, MI350X
    100300: 0x73BF,  # gfx1030, Navi 21 (RX 6800/6900)
    110000: 0x744C,  # gfx1100, Navi 31 (RX 7900 XTX)
    110001: 0x747E,  # gfx1101, Navi 32 (RX 7800 XT)
    110002: 0x7480,  # gfx1102, Navi 33 (RX 7600)
    120001: 0x7550,  # gfx1201, Navi 48 (RX 9070 XT)
}


class _HostPort:
    """The GPU's system bus: forwards the system aperture to the bridge once it is attached.

    Before :meth:`AmdGpuFunction.attach_host` every access is an unsupported request, which the GPU reports as a
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
    _port: _HostPort

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


class _GpuConfig(Type0Config):
    """The GPU's config space; a fundamental reset of it (the bridge's power cycle) resets the whole GPU."""

    def __init__(self, gpu: AmdGpu, *, device_id: int, bars: dict[int, BarSpec]) -> None:
        self._gpu: AmdGpu | None = None  # the power-on reset inside __init__ leaves the fresh GPU alone
        super().__init__(vendor_id=VENDOR_ID_AMD, device_id=device_id, class_code=CLASS_DISPLAY_VGA, bars=bars)
        self._gpu = gpu

    def reset(self) -> None:
        super().reset()
        if self._gpu is not None:
            self._gpu.reset()


class AmdGpuFunction(BridgedFunction):
    """The emulated AMD GPU as PCIe function 4:00.0 behind the bridge (spec/asm24.md "GPU BARs").

    ======  ==========================================================  =========================================
    BAR     what                                                        routed to
    ======  ==========================================================  =========================================
    BAR0    VRAM, 64-bit prefetchable, resizable min(VRAM, 256 MB)..VRAM  ``gpu.mmio_read/write(0, ...)``: GPU VA 0..
    BAR2    doorbells, 8 KB, 64-bit prefetchable                        ``gpu.mmio_write(2, ...)`` rings slot n
    BAR5    registers, 2 MB, 32-bit (spec/amdgpu.md BAR5 table)         ``gpu.mmio_read/write(5, ...)``
    ======  ==========================================================  =========================================

    Config space: vendor ``0x1002``, the device id of a board with ``gfx_target_version`` (:data:`DEVICE_IDS`, or
    ``device_id=``), class VGA, the resizable-BAR capability at ``0x100``. The GPU's VRAM sits at GPU address 0
    and its system aperture (``SYS_APERTURE + pcie_addr``) reaches the bridge's SRAM and windows through
    :meth:`attach_host`; bytes the bridge lands (bulk OUT, XDATA writes into windows) wake GPU queues polling them
    through :meth:`host_memory_written`. The bridge's power cycle (a fundamental reset of this config space) resets
    the GPU too: no queues, zeroed VRAM and registers.

    Model choices: ``vram_bytes`` is a power of two (a BAR is, and VRAM fills BAR0 at its largest size); a BAR5
    access narrower than a register reads its bytes of the register and writes merge into the register's value.
    """

    def __init__(
        self,
        *,
        kernel: EventKernel,
        vram_bytes: int = DEFAULT_VRAM_BYTES,
        gfx_target_version: int = DEFAULT_GFX_TARGET_VERSION,
        device_id: int | None = None,
        timing: GpuTiming = DEFAULT_TIMING,
        executor: KernelExecutor | None = None,
        name: str = "gpu0",
    ) -> None:
        self._check_board(kernel, vram_bytes, min_vram=1 << 20, shown_min="1 MB")
        check_int("gfx_target_version", gfx_target_version, min_value=1)
        if device_id is None:
            device_id = DEVICE_IDS.get(gfx_target_version)
            if device_id is None:
                known = ", ".join(str(v) for v in DEVICE_IDS)
                raise InvalidArgument(
                    f"gfx_target_version={gfx_target_version}, expected one of {known}, or pass device_id= too"
                )
        self._port = _HostPort()
        self.gpu = AmdGpu(
            kernel,
            vram_bytes=vram_bytes,
            gfx_target_version=gfx_target_version,
            system_bus=self._port,
            name=name,
            vram_at_zero=True,
            timing=timing,
            executor=executor,
        )
        self._config = _GpuConfig(
            self.gpu,
            device_id=check_int("device_id", device_id, min_value=0, max_value=0xFFFE),
            bars=gpu_bars(vram_bytes),
        )

    def __repr__(self) -> str:
        host = "attached" if self.host is not None else "not attached"
        return f"<AmdGpuFunction {VENDOR_ID_AMD:04x}:{self._config.device_id:04x} {self.gpu!r} host {host}>"

    # --- PcieFunction (config space: Type0Function) ---
    def mmio_read(self, bar: int, offset: int, nbytes: int) -> bytes:
        """Read ``nbytes`` at ``offset`` of BAR ``bar`` (decoded and bounds-checked by the bridge)."""
        if bar != _REGS_BAR or (offset % REGISTER_BYTES == 0 and nbytes % REGISTER_BYTES == 0):
            return self.gpu.mmio_read(bar, offset, nbytes)
        start, end = registers_around(offset, nbytes)
        return self.gpu.mmio_read(bar, start, end - start)[offset - start : offset - start + nbytes]

    def mmio_write(self, bar: int, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset`` of BAR ``bar`` (decoded and bounds-checked by the bridge)."""
        if bar != _REGS_BAR or (offset % REGISTER_BYTES == 0 and len(data) % REGISTER_BYTES == 0):
            self.gpu.mmio_write(bar, offset, data)
            return
        start, end = registers_around(offset, len(data))
        merged = bytearray(self.gpu.mmio_read(bar, start, end - start))
        merged[offset - start : offset - start + len(data)] = data
        self.gpu.mmio_write(bar, start, bytes(merged))

    def host_memory_written(self, pcie_addr: int, nbytes: int) -> None:
        """The bridge changed its memory at ``pcie_addr``: wake queues polling it through the system aperture."""
        self.gpu.memory_written(SYS_APERTURE + pcie_addr, nbytes)


def registers_around(offset: int, nbytes: int) -> tuple[int, int]:
    """The whole registers covering ``[offset, offset + nbytes)``."""
    start = offset - offset % REGISTER_BYTES
    end = -(-(offset + nbytes) // REGISTER_BYTES) * REGISTER_BYTES
    return start, end
