"""User-mode queues: the ring, the read/write pointers, the doorbell, and the context-save sizes compute needs.

Ring protocol (``docs/amdgpu.md``): pointers are monotonically increasing u64 values, counted in **bytes** on SDMA
queues and in **dwords** on compute (PM4) queues; the ring is indexed modulo its size. The host copies packets into
the ring, stores the new write pointer into the write-pointer memory, then stores the same value into the
queue's doorbell.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Final, Protocol

from tinyhil._check import as_readonly_bytes
from tinyhil.align import round_down, round_up
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.fileio import MappedBuffer
from tinyhil.kfd.topology import KfdNode
from tinyhil.spec.amdgpu import PAGE_BYTES
from tinyhil.spec.kfd_queues import QueueType

__all__ = ["CwsrSizes", "KfdQueue", "QueueEngine", "QueueMemory", "cwsr_sizes"]

_POINTER_BYTES: Final = 8
_DWORD: Final = 4


class QueueMemory(Protocol):
    """A GPU-mapped buffer a queue uses (its ring, pointers, EOP and save areas): GPU VA and CPU access."""

    @property
    def va(self) -> int:
        """The buffer's GPU virtual address."""
        ...

    def read(self, offset: int, nbytes: int) -> bytes:
        """``nbytes`` bytes at byte ``offset``."""
        ...

    def write(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` into the buffer at byte ``offset``."""
        ...


class QueueEngine(Enum):
    """Which engine a queue feeds; the value is the uapi queue type."""

    SDMA = QueueType.KFD_IOC_QUEUE_TYPE_SDMA
    COMPUTE = QueueType.KFD_IOC_QUEUE_TYPE_COMPUTE

    @property
    def pointer_unit_bytes(self) -> int:
        """Bytes per read/write pointer unit: SDMA counts bytes, PM4 counts dwords."""
        return 1 if self is QueueEngine.SDMA else _DWORD


@dataclass(frozen=True, slots=True)
class CwsrSizes:
    """Compute-queue buffers the kernel expects (``kfd_queue_ctx_save_restore_size``), in bytes, per XCC."""

    ctl_stack_size: int
    cwsr_size: int
    debug_memory_size: int
    eop_buffer_size: int


# kfd_queue.c: context save area per CU, control stack per wave, EOP buffer, by gfx_target_version.
_GFX_NAVI10: Final = 100100
_GFX_950: Final = 90500
_GFX_94X_FAMILY: Final = 90400
_VERSION_FAMILY: Final = 100
_CDNA_LARGE_VGPRS: Final = frozenset({90008, 90010, 90402, 90500})  # gfx908, gfx90a, gfx942, gfx950 (with AGPRs)
_RDNA_LARGE_VGPRS: Final = frozenset({110000, 110001, 120000, 120001})  # gfx1100, gfx1101, gfx1200, gfx1201
_VGPR_BYTES_PER_CU: Final = 0x40000
_VGPR_BYTES_PER_CU_RDNA_LARGE: Final = 0x60000
_VGPR_BYTES_PER_CU_CDNA_LARGE: Final = 0x80000
_SGPR_BYTES_PER_CU: Final = 0x4000
_LDS_BYTES_PER_CU: Final = 0x10000
_LDS_BYTES_PER_CU_GFX950: Final = 0x28000
_HWREG_BYTES_PER_CU: Final = 0x1000
_WAVES_PER_CU_GFX9: Final = 40
_WAVES_PER_CU: Final = 32
_WAVES_PER_ARRAY_GFX9: Final = 512
_CTL_STACK_BYTES_PER_WAVE_GFX9: Final = 8
_CTL_STACK_BYTES_PER_WAVE: Final = 12
_CTL_STACK_HEADER_BYTES: Final = 40
_CTL_STACK_TAIL_BYTES: Final = 8
_CTL_STACK_LIMIT_GFX10: Final = 0x7000
_DEBUGGER_BYTES_PER_WAVE: Final = 32
_DEBUGGER_BYTES_ALIGN: Final = 64
_EOP_BYTES: Final = 2048
_EOP_BYTES_GFX94X: Final = 4096
_VERSION_MAJOR: Final = 10000


def cwsr_sizes(node: KfdNode) -> CwsrSizes:
    """Context save/restore sizes for a GPU node, from its topology properties.

    Per CU the save area holds VGPRs (512 KiB on gfx908/90a/942/950, 384 KiB on gfx1100/1101/1200/1201, else
    256 KiB), 16 KiB of SGPRs,
    the LDS (64 KiB; 160 KiB on gfx950) and 4 KiB of hardware registers; the control stack takes 8 bytes per wave
    before gfx10.1 and 12 after, plus a 40-byte header and 8 bytes, page aligned (at most 0x7000 on gfx10). Not
    exercised on hardware by this repository's tests: check it against the kernel of the machine you run on.
    """
    version = node.gfx_target_version
    props = node.properties
    num_xcc = max(props.get("num_xcc", 1), 1)
    cu_count = props.get("simd_count", 0) // max(props.get("simd_per_cu", 1), 1) // num_xcc
    if version < _GFX_NAVI10:
        arrays = props.get("array_count", 0) // max(props.get("simd_arrays_per_engine", 1), 1)
        waves = min(cu_count * _WAVES_PER_CU_GFX9, arrays * _WAVES_PER_ARRAY_GFX9)
        stack_per_wave = _CTL_STACK_BYTES_PER_WAVE_GFX9
    else:
        waves = cu_count * _WAVES_PER_CU
        stack_per_wave = _CTL_STACK_BYTES_PER_WAVE
    vgpr = _VGPR_BYTES_PER_CU
    if version in _CDNA_LARGE_VGPRS:
        vgpr = _VGPR_BYTES_PER_CU_CDNA_LARGE
    elif version in _RDNA_LARGE_VGPRS:
        vgpr = _VGPR_BYTES_PER_CU_RDNA_LARGE
    lds = _LDS_BYTES_PER_CU_GFX950 if version == _GFX_950 else _LDS_BYTES_PER_CU
    wg_data = round_up(cu_count * (vgpr + _SGPR_BYTES_PER_CU + lds + _HWREG_BYTES_PER_CU), PAGE_BYTES)
    ctl_stack = round_up(_CTL_STACK_HEADER_BYTES + waves * stack_per_wave + _CTL_STACK_TAIL_BYTES, PAGE_BYTES)
    if version // _VERSION_MAJOR == _GFX_NAVI10 // _VERSION_MAJOR:
        ctl_stack = min(ctl_stack, _CTL_STACK_LIMIT_GFX10)
    eop = _EOP_BYTES_GFX94X if round_down(version, _VERSION_FAMILY) == _GFX_94X_FAMILY else _EOP_BYTES
    debug = round_up(waves * _DEBUGGER_BYTES_PER_WAVE, _DEBUGGER_BYTES_ALIGN)
    return CwsrSizes(ctl_stack, ctl_stack + wg_data, debug, eop)


class KfdQueue:
    """A queue created by :meth:`KfdGpu.create_queue`; :meth:`submit` writes packets and rings the doorbell.

    ``destroy`` is called with the queue by :meth:`destroy`: it destroys the queue in the kernel and frees its
    buffers (the GPU's :meth:`~tinyhil.kfd.gpu.KfdGpu.destroy_queue`).
    """

    def __init__(
        self,
        engine: QueueEngine,
        queue_id: int,
        gpu_id: int,
        ring: tuple[QueueMemory, int],
        pointers: tuple[QueueMemory, QueueMemory],
        doorbell: tuple[MappedBuffer, int],
        extra: tuple[QueueMemory, ...] = (),
        *,
        destroy: Callable[[KfdQueue], None],
    ) -> None:
        self.engine = engine
        self.queue_id = queue_id
        self.gpu_id = gpu_id
        self._destroy = destroy
        self.ring, self.ring_bytes = ring
        self.rptr, self.wptr = pointers
        self.doorbell, self.doorbell_byte = doorbell
        self.extra = extra
        self.write_pointer = 0
        self.destroyed = False

    @property
    def read_pointer(self) -> int:
        """The engine's read pointer, as it last wrote it back (units of :attr:`QueueEngine.pointer_unit_bytes`)."""
        return int.from_bytes(self.rptr.read(0, _POINTER_BYTES), "little")

    def submit(self, packets: bytes) -> int:
        """Copy ``packets`` into the ring, publish the new write pointer and ring the doorbell; return it.

        Raises:
            InvalidArgument: not whole dwords, or larger than the ring.
            StateError: the ring has too little free space (wait for the engine to catch up), or the queue is gone.
        """
        data = as_readonly_bytes("packets", packets)
        if self.destroyed:
            raise StateError(f"queue {self.queue_id} was destroyed; submit needs a live queue")
        if len(data) % _DWORD or len(data) > self.ring_bytes:
            raise InvalidArgument(
                f"packets of {len(data)} bytes, expected whole dwords, at most the ring's {self.ring_bytes}"
            )
        unit = self.engine.pointer_unit_bytes
        in_flight = (self.write_pointer - self.read_pointer) * unit
        if in_flight + len(data) > self.ring_bytes:
            raise StateError(f"ring of queue {self.queue_id} full: {in_flight} of {self.ring_bytes} bytes in flight, "
                             f"{len(data)} more submitted; wait for the engine to drain it")  # fmt: skip
        position = self.write_pointer * unit % self.ring_bytes
        first = min(len(data), self.ring_bytes - position)
        self.ring.write(position, data[:first])
        if first < len(data):
            self.ring.write(0, data[first:])
        self.write_pointer += len(data) // unit
        value = self.write_pointer.to_bytes(_POINTER_BYTES, "little")
        self.wptr.write(0, value)
        self.doorbell[self.doorbell_byte : self.doorbell_byte + _POINTER_BYTES] = value
        return self.write_pointer

    @property
    def idle(self) -> bool:
        """Whether the engine has consumed everything submitted."""
        return self.read_pointer == self.write_pointer

    def destroy(self) -> None:
        """Destroy the queue and free its ring, pointers and buffers (idempotent)."""
        self._destroy(self)

    def __repr__(self) -> str:
        return f"KfdQueue({self.engine.name} {self.queue_id} on gpu_id={self.gpu_id:#x}, wptr={self.write_pointer})"
