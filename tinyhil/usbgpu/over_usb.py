"""The device runtime of an AMD GPU behind an ASM2464 bridge: ``MOCKUSB+AMD`` (emulated) and ``USB+AMD`` (a board).

It takes any :class:`~tinyhil.usb.bridge_io.AsyncBridgeIO` (``MockUSB3`` or the real ``Usb3Transport``), brings the
PCIe side up, boots the gfx1100 behind it through its real register interface
(:func:`~tinyhil.usbgpu.gfx1100_gpu.open_usb_gpu`, with firmware from ``firmware``, the seam of
:mod:`tinyhil.amdgpu.firmware`; a GPU that is not a gfx1100 is refused), and moves data with :class:`UsbCopy`. The
bridge, the copy protocol and the gfx1100 driver are the same code on both; the driver has not yet run on a board
(docs/fidelity.md).

VRAM layout (GPU address = BAR0 offset, docs/gfx1100.md "Bring-up sequence"):

| GPU address | what |
|---|---|
| ``0x0000-0x0fff`` | queue read/write pointers (two u64 per queue) |
| ``0x100000`` | runtime SDMA ring (256 KB) |
| ``0x140000`` | compute (PM4) ring (256 KB) |
| ``0x200000`` | copy-engine SDMA ring (1 MB, SDMA queue 1) |
| ``0x400000 ..`` | buffers, signals, code objects, kernel arguments (the allocator's range, up to ``gpu.heap_end``) |

``gpu.heap_end`` is the BAR0 size or the start of the driver's boot memory (the top 32 MB of VRAM), the lower. The
driver maps only VRAM below ``0x400000`` at boot; each allocation is mapped when it is made (``gpu.map``: 2 MB
pages for its whole 2 MB slots, 4 KB pages for the rest) and unmapped when it is freed (``gpu.unmap``, then the TLB
flush), so a GPU access to a freed buffer faults and the next wait raises, naming the page.

Signals live in VRAM, never in the bridge's sys_buf (whose low half the 0xF2 engine clobbers while a transfer is in
flight: docs/faults.md "Quirks"). The host has no interrupt on this path: it polls them through BAR0.

Copyin and copyout use their own SDMA queue (queue 1) and are synchronous: they first wait for every earlier
operation, so program order holds across the queues. A copy that fails on the device (a chunk that never drains,
the copy queue stopping) leaves that queue polling for a sentinel that will not come: the runtime destroys and
recreates the copy queue, with ``seq`` carried on, before it raises, so the next copy works.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from tinyhil.align import round_up
from tinyhil.allocator import RangeAllocator
from tinyhil.amdgpu.driver import AMD_CAPABILITIES, WAIT_TIMEOUT_MS, AmdDeviceBase
from tinyhil.amdgpu.firmware import DirectoryFirmware, FirmwareSource
from tinyhil.amdgpu.interfaces import AmdRing, GpuRegion, MemoryUse
from tinyhil.amdgpu.queue import AmdQueue
from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.compiler import Compiler
from tinyhil.device import Buffer
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import PAGE_BYTES, QueueKind
from tinyhil.spec.asm2464 import BULK_IN_EP, BULK_OUT_EP
from tinyhil.usb.bridge_io import AsyncBridgeIO
from tinyhil.usbgpu.copy import CopyRevision, UsbCopy
from tinyhil.usbgpu.gfx1100_gpu import Gfx1100UsbGpu, open_usb_gpu

__all__ = ["USB_AMD_CAPABILITIES", "USB_CAPABILITIES", "UsbAmdDevice"]

# faults: per-allocation maps; fault-recovery: _replace_queue
USB_CAPABILITIES: Final = frozenset({"usb3", "sram-windows", "pcie", "memory-faults", "fault-recovery"})
# What UsbAmdDevice does without a compiler (the USB path on every target: USB+AMD, MOCKUSB+AMD, REPLAY+AMD).
USB_AMD_CAPABILITIES: Final = AMD_CAPABILITIES | USB_CAPABILITIES
_POINTERS_VA: Final = 0x0
_RING_BYTES: Final = 256 << 10
_RINGS: Final = {QueueKind.SDMA: 0x100000, QueueKind.COMPUTE: 0x140000}
_COPY_RING_VA: Final = 0x200000
_COPY_RING_BYTES: Final = 1 << 20
_HEAP_VA: Final = 0x400000
_POINTER_SLOTS: Final = {(QueueKind.SDMA, 0): 0, (QueueKind.SDMA, 1): 1, (QueueKind.COMPUTE, 0): 2}


class UsbAmdDevice(AmdDeviceBase):
    """An AMD GPU behind a USB bridge as a device (see the module docstring); open it with :meth:`open`.

    Attributes:
        transport: the USB transport (``MockUSB3`` or ``Usb3Transport``).
        controller: the ASM2464 client over it.
        gpu: the USB-path GPU driver (:class:`~tinyhil.usbgpu.gfx1100_gpu.Gfx1100UsbGpu`).
        copier: the copyin/copyout protocol engine (``copier.revision`` selects the protocol revision).
    """

    def __init__(
        self,
        name: str,
        transport: AsyncBridgeIO,
        *,
        compiler: Compiler | None = None,
        revision: CopyRevision | str = CopyRevision.PIPELINED,
        capabilities: Iterable[str] = (),
        on_close: Callable[[], object] | None = None,
        wait_timeout_ms: int = WAIT_TIMEOUT_MS,
        firmware: FirmwareSource | None = None,
        **bringup_options: Any,
    ) -> None:
        if not isinstance(transport, AsyncBridgeIO):
            raise InvalidArgument(f"transport={transport!r}, expected an AsyncBridgeIO (MockUSB3, Usb3Transport)")
        self._closing = False  # close() frees every region: the next open builds the page tables afresh
        super().__init__(name, USB_CAPABILITIES | frozenset(capabilities), compiler=compiler,
                         wait_timeout_ms=wait_timeout_ms)  # fmt: skip
        self.transport = transport
        self._on_close = on_close
        try:
            self.controller = Asm2464Controller(transport)
            self.gpu: Gfx1100UsbGpu = open_usb_gpu(
                self.controller,
                firmware=DirectoryFirmware() if firmware is None else firmware,
                timeout_s=wait_timeout_ms / 1000,
                heap_va=_HEAP_VA,
                **bringup_options,
            )
            if self.gpu.heap_end <= _HEAP_VA:
                raise InvalidArgument(
                    f"GPU memory up to {self.gpu.heap_end:#x}, expected more than {_HEAP_VA:#x} (rings and pointers "
                    "live below it)"
                )
            self._heap = RangeAllocator(_HEAP_VA, self.gpu.heap_end - _HEAP_VA, PAGE_BYTES)
            self.copier = self._copy_engine(revision, seq=0)
            self._start()
        except BaseException:
            self._release()
            raise

    def __repr__(self) -> str:
        return f"<UsbAmdDevice {self.name} {self.copier.revision.value if hasattr(self, 'copier') else ''}>"

    def _copy_engine(self, revision: CopyRevision | str, *, seq: int) -> UsbCopy:
        queue = self._queue(QueueKind.SDMA, _COPY_RING_VA, _COPY_RING_BYTES, index=1)
        return UsbCopy(self.controller, self.gpu, queue, revision=revision, seq=seq)

    def _recover_copy_engine(self) -> None:
        """After a failed copy: stop the stuck copy queue and start a fresh one (``seq`` carries on)."""
        old = self.copier
        self.transport.clear_error()
        for endpoint in (BULK_OUT_EP, BULK_IN_EP):  # a stalled endpoint, and the engine's stale arms, start over
            self.transport.clear_halt(endpoint)
        self.gpu.destroy_queue(old.sdma)
        self.copier = self._copy_engine(old.revision, seq=old.seq)

    def _copying(self, name: str, nbytes: int, copy: Callable[[], None]) -> None:
        self._synchronize()  # earlier work on the other queues may still use the buffer
        start = self._now_ns()
        try:
            copy()
        except InvalidArgument:
            raise  # refused before anything was sent
        except Exception as error:
            try:
                self._recover_copy_engine()
            except Exception as recovery:  # the copy's error is the one to raise
                error.add_note(f"tinyhil: recreating the copy queue failed too: {recovery!r}")
            raise
        self._record_range(name, start, self._now_ns(), queue="copy", nbytes=nbytes)

    def _queue(self, kind: QueueKind, ring_va: int, ring_bytes: int, *, index: int = 0) -> AmdQueue:
        pointers = _POINTERS_VA + 16 * _POINTER_SLOTS[kind, index]  # fixed per queue: a recreated queue reuses its own
        return self.gpu.create_queue(kind, ring_va=ring_va, ring_bytes=ring_bytes, rptr_va=pointers,
                                     wptr_va=pointers + 8, index=index)  # fmt: skip

    # --- AmdDeviceBase hooks -------------------------------------------------------------------------------------
    def _gpu_alloc(self, nbytes: int, use: MemoryUse) -> GpuRegion:
        va = self._heap.alloc(nbytes)
        region = GpuRegion(va, round_up(nbytes, PAGE_BYTES), use)
        try:
            self.gpu.map(va, region.nbytes)
        except BaseException:
            self._heap.free(va)
            raise
        return region

    def _gpu_free(self, region: GpuRegion) -> None:
        if not self._closing:  # a GPU access there now faults; then the range may be reused
            self.gpu.unmap(region.va, region.nbytes)
        self._heap.free(region.va)

    def close(self) -> None:
        """Free every buffer and release the device. Its regions are not unmapped one by one (a TLB flush each):
        no queue runs after close, and the next open writes the page tables from their root."""
        self._closing = True
        super().close()

    def _host_write(self, region: GpuRegion, offset: int, data: bytes | memoryview) -> None:
        self.gpu.write_memory(region.va + offset, data)

    def _host_read(self, region: GpuRegion, offset: int, nbytes: int) -> bytes:
        return self.gpu.read_memory(region.va + offset, nbytes)

    def _create_queue(self, kind: QueueKind) -> AmdRing:
        return self._queue(kind, _RINGS[kind], _RING_BYTES)

    def _replace_queue(self, kind: QueueKind, ring: AmdRing) -> AmdRing | None:
        self.gpu.destroy_queue(ring)  # type: ignore[arg-type]  # this path's rings are its AmdQueues
        return self._create_queue(kind)

    def _wait(self, condition: Callable[[], bool], what: str) -> None:
        self.gpu.wait(condition, what, timeout_s=self.wait_timeout_ms / 1000)

    def _release(self) -> None:
        gpu = getattr(self, "gpu", None)
        try:
            if gpu is not None:
                for queue in reversed(gpu.queues):
                    gpu.destroy_queue(queue)
                gpu.close()
        finally:
            on_close, self._on_close = self._on_close, None
            if on_close is not None:
                on_close()

    def _copyin(self, buf: Buffer, data: memoryview, offset: int) -> None:
        self._copying("copyin", data.nbytes, lambda: self.copier.copyin(buf.addr + offset, data))

    def _copyout(self, buf: Buffer, out: memoryview, offset: int) -> None:
        self._copying("copyout", out.nbytes, lambda: self.copier.copyout(out, buf.addr + offset))
