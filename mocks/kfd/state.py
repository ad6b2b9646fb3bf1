"""MOCKKFD's kernel-side state: per-GPU device data and the KFD process (allocations, queues, events).

Names follow amdkfd (``kfd_process``, ``kfd_process_device`` as "pdd", idr handles, ``signal_page``), so a reader of
``kfd_chardev.c`` recognises each piece. All of it is plain bookkeeping; the GPU itself lives behind the port.
"""

from __future__ import annotations

import hashlib
import mmap
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

from tinyhil.allocator import RangeAllocator
from tinyhil.mocks.kfd.gpu_port import GpuPort, QueueKind
from tinyhil.mocks.kfd.topology import GpuIdentity, GpuModel
from tinyhil.spec.amdgpu import PAGE_BYTES
from tinyhil.spec.kfd_queues import KFD_DOORBELL_PROCESS_SLICE_BYTES

__all__ = [
    "DRM_OFFSET_BASE",
    "GPUVM_BASE",
    "GPUVM_LIMIT",
    "LDS_BASE",
    "SCRATCH_BASE",
    "Allocation",
    "Event",
    "GpuDevice",
    "HostMemory",
    "MemKind",
    "Process",
    "ProcessDevice",
    "Queue",
    "Waiter",
    "anonymous_memory",
    "aperture_limit",
    "lowest_free",
]

# Process apertures of gfx9+ GPUs (kfd_flat_memory.c): LDS and scratch apertures at fixed 48-bit bases, and the GPUVM
# range a process maps its allocations in.
LDS_BASE: Final = 0x1 << 48
SCRATCH_BASE: Final = 0x2 << 48
_APERTURE_LIMIT_LOW: Final = 0xFFFF_FFFF
GPUVM_BASE: Final = 1 << 16
GPUVM_LIMIT: Final = (1 << 47) - 1
# DRM mmap offsets of buffer objects start above 4 GiB (DRM_FILE_PAGE_OFFSET_START), one offset space per device.
DRM_OFFSET_BASE: Final = 1 << 32
_DRM_OFFSET_SPACE: Final = 1 << 44


# Where MOCKKFD gets the host memory it hands out (GTT buffers, doorbell frames, MMIO remap and signal pages, and the
# VRAM of the GPUs it builds): a function of the size in bytes returning a zeroed mapping. In-process it is anonymous
# memory; ``tinyhil serve kfd`` passes memfd-backed mappings that its client maps too.
HostMemory = Callable[[int], mmap.mmap]


def anonymous_memory(nbytes: int) -> mmap.mmap:
    """``nbytes`` of zeroed anonymous memory (MOCKKFD's default :data:`HostMemory`)."""
    return mmap.mmap(-1, nbytes)


def aperture_limit(base: int) -> int:
    """``MAKE_LDS_APP_LIMIT`` / ``MAKE_SCRATCH_APP_LIMIT``: the base's high dword with all low bits set."""
    return (base & ~_APERTURE_LIMIT_LOW) | _APERTURE_LIMIT_LOW


def lowest_free(taken: Any, start: int, stop: int) -> int | None:
    """The lowest id in ``[start, stop)`` not in ``taken`` (how the kernel's idr and bitmaps allocate)."""
    return next((candidate for candidate in range(start, stop) if candidate not in taken), None)


class MemKind(Enum):
    """The memory type of an allocation (bits 0-4 of the alloc flags, first match in the kernel's order)."""

    VRAM = "VRAM"
    GTT = "GTT"
    USERPTR = "USERPTR"
    DOORBELL = "DOORBELL"
    MMIO_REMAP = "MMIO_REMAP"


class GpuDevice:
    """One GPU as the driver holds it for the whole machine: port, identity, VRAM and DRM offset allocators, and
    the per-process pages behind /dev/kfd mmaps (doorbell frame, MMIO remap page)."""

    def __init__(
        self, port: GpuPort, identity: GpuIdentity, model: GpuModel, host_memory: HostMemory = anonymous_memory
    ) -> None:
        self.port = port
        self.identity = identity
        self.model = model
        self.host_memory = host_memory
        self.reset()

    def reset(self) -> None:
        self.vram = RangeAllocator(0, self.port.vram_bytes, PAGE_BYTES)
        self.drm_offsets = RangeAllocator(DRM_OFFSET_BASE, _DRM_OFFSET_SPACE, PAGE_BYTES)
        self.new_process_pages()

    def new_process_pages(self) -> None:
        """Fresh (zeroed) pages for the next KFD process: the doorbell frame and the MMIO remap page."""
        self.doorbell_page = self.host_memory(KFD_DOORBELL_PROCESS_SLICE_BYTES)
        self.mmio_page = self.host_memory(PAGE_BYTES)

    @property
    def gpu_id(self) -> int:
        return self.identity.gpu_id

    @property
    def sdma_queue_limit(self) -> int:
        return self.model.num_sdma_engines * self.model.num_sdma_queues_per_engine


@dataclass(eq=False, slots=True)
class Allocation:
    """A buffer object from ALLOC_MEMORY_OF_GPU; ``mapped_on`` lists the gpu_ids it is mapped to, in order."""

    handle: int
    owner: int
    idr: int
    kind: MemKind
    flags: int
    va: int
    size: int
    backing: memoryview
    mmap_offset: int
    drm_offset: int | None = None
    vram_offset: int | None = None
    keepalive: mmap.mmap | None = None
    mapped_on: list[int] = field(default_factory=list)

    def overlaps(self, va: int, size: int) -> bool:
        return self.va < va + size and va < self.va + self.size

    def contains(self, va: int, nbytes: int) -> bool:
        return self.va <= va and va + nbytes <= self.va + self.size

    def summary(self) -> tuple[Any, ...]:
        return (self.handle, self.kind.name, self.flags, self.va, self.size, self.mmap_offset, tuple(self.mapped_on))


class ProcessDevice:
    """``kfd_process_device``: the process's view of one GPU (VM, buffer handles, doorbells, policies)."""

    def __init__(self, gpu: GpuDevice) -> None:
        self.gpu = gpu
        self.drm_file: object | None = None
        self.allocations: dict[int, Allocation] = {}
        self.doorbells: dict[int, Queue] = {}
        self.default_policy = 0
        self.alternate_policy = 0
        self.alternate_aperture = (0, 0)
        self.scratch_backing_va = 0
        self.trap_handler = (0, 0)

    def summary(self) -> tuple[Any, ...]:
        allocations = tuple(a.summary() for _, a in sorted(self.allocations.items()))
        policies = (self.default_policy, self.alternate_policy, self.alternate_aperture)
        return (self.gpu.gpu_id, self.drm_file is not None, allocations, tuple(sorted(self.doorbells)), policies,
                self.scratch_backing_va, self.trap_handler)  # fmt: skip


@dataclass(eq=False, slots=True)
class Queue:
    """A user-mode queue: KFD's ids and the GPU's queue object."""

    queue_id: int
    gpu_id: int
    kind: QueueKind
    doorbell_id: int
    ring_va: int
    ring_bytes: int
    rptr_va: int
    wptr_va: int
    gpu_queue: Any
    hung_by: Any = None  # the fault rule (a QueueHang) that keeps the queue from ever running

    def summary(self) -> tuple[Any, ...]:
        return (self.queue_id, self.gpu_id, self.kind.name, self.doorbell_id, self.ring_va, self.ring_bytes,
                self.rptr_va, self.wptr_va)  # fmt: skip


@dataclass(eq=False, slots=True)
class Waiter:
    """``kfd_event_waiter``: one event of a WAIT_EVENTS in progress."""

    event: Event | None
    activated: bool


@dataclass(eq=False, slots=True)
class Event:
    """``kfd_event``: type, auto-reset, signalled state, exception data (``kfd_hsa_memory_exception_data`` of a
    memory event, ``kfd_hsa_hw_exception_data`` of a hardware-exception event: the kernel's union), and the waiters
    of a wait."""

    event_id: int
    type: int
    auto_reset: bool
    signaled: bool = False
    exception_data: bytes = b""
    waiters: list[Waiter] = field(default_factory=list)

    def summary(self) -> tuple[Any, ...]:
        return (self.event_id, self.type, self.auto_reset, self.signaled, self.exception_data)


class Process:
    """``kfd_process``: everything one process holds in amdkfd; created at the first open of /dev/kfd and kept
    until the process exits (``MockKFD.close``), like the kernel's, whose state outlives closing the file."""

    def __init__(self, gpus: tuple[GpuDevice, ...]) -> None:
        self.gpus = gpus
        self.reset()

    def reset(self) -> None:
        self.pdds: dict[int, ProcessDevice] = {gpu.gpu_id: ProcessDevice(gpu) for gpu in self.gpus}
        self.queues: dict[int, Queue] = {}
        self.events: dict[int, Event] = {}
        self.signal_page: memoryview | None = None
        self.signal_mapped_size = 0
        self.signal_handle = 0
        self.signal_event_count = 1  # event id 0 is reserved at process creation
        self.gtt_bytes = 0
        self.xnack_enabled = 0

    def summary(self) -> tuple[Any, ...]:
        return (
            tuple(pdd.summary() for pdd in self.pdds.values()),
            tuple(queue.summary() for _, queue in sorted(self.queues.items())),
            tuple(event.summary() for _, event in sorted(self.events.items())),
            None if self.signal_page is None else hashlib.sha256(self.signal_page).hexdigest(),
            self.signal_mapped_size,
            self.signal_handle,
            self.signal_event_count,
            self.gtt_bytes,
            self.xnack_enabled,
        )
