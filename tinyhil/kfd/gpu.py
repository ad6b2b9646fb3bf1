"""One GPU of a KFD process: its render node and VM, memory (VRAM, GTT, userptr) mapped to GPUs, and queues.

Virtual addresses: VRAM and GTT buffers get GPU VAs from the process's window (:data:`VA_WINDOW_BASE`, shared by all
GPUs so a buffer mapped on several GPUs has one address); userptr buffers are host memory mapped at their CPU
address (GPU VA == CPU VA), which is what lets a queue's read and write pointers live in host memory.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from tinyhil._check import as_readonly_bytes, check_int, check_range, check_ring_bytes
from tinyhil.align import round_down, round_up
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.fileio import MappedBuffer
from tinyhil.kfd.process import KfdProcess
from tinyhil.kfd.queue import KfdQueue, QueueEngine, cwsr_sizes
from tinyhil.kfd.topology import KfdNode
from tinyhil.spec.amdgpu import PAGE_BYTES
from tinyhil.spec.kfd_ioctls import KfdIoctl
from tinyhil.spec.kfd_memory import (
    AllocMemFlags,
    kfd_ioctl_acquire_vm_args,
    kfd_ioctl_alloc_memory_of_gpu_args,
    kfd_ioctl_free_memory_of_gpu_args,
    kfd_ioctl_map_memory_to_gpu_args,
    kfd_ioctl_unmap_memory_from_gpu_args,
)
from tinyhil.spec.kfd_queues import (
    KFD_DOORBELL_PROCESS_SLICE_BYTES,
    KFD_MIN_QUEUE_RING_SIZE,
    kfd_ioctl_create_queue_args,
    kfd_ioctl_destroy_queue_args,
)
from tinyhil.spec.kfd_topology import render_node_path

__all__ = ["VA_WINDOW_BASE", "VA_WINDOW_BYTES", "Allocation", "KfdGpu", "MemoryDomain"]

# 16 TiB of GPU VA at 16 TiB: inside every gfx9+ GPUVM aperture, and far from where Linux places CPU mappings
# (userptr buffers use their CPU addresses as GPU VAs, so the two must not collide).
VA_WINDOW_BASE: Final = 0x1000_0000_0000
VA_WINDOW_BYTES: Final = 0x1000_0000_0000
_F = AllocMemFlags
_DEFAULT_RING_BYTES: Final = 1 << 16
_QUEUE_PERCENTAGE: Final = 100
_QUEUE_PRIORITY: Final = 7


class MemoryDomain(Enum):
    """Where an allocation lives; the value is its ALLOC_MEMORY_OF_GPU memory-type flag."""

    VRAM = _F.KFD_IOC_ALLOC_MEM_FLAGS_VRAM
    GTT = _F.KFD_IOC_ALLOC_MEM_FLAGS_GTT
    USERPTR = _F.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR


@dataclass(eq=False)
class Allocation:
    """A buffer: its handle, GPU VA, size, CPU view (``cpu``; ``None`` without CPU access) and mappings."""

    device: KfdGpu
    handle: int
    va: int
    size: int
    domain: MemoryDomain
    flags: int
    mmap_offset: int
    cpu: MappedBuffer | None = None
    host: mmap.mmap | None = None
    mapped_on: list[KfdGpu] = field(default_factory=list)
    freed: bool = False

    def _view(self, what: str) -> MappedBuffer:
        if self.freed or self.cpu is None:
            state = "was freed" if self.freed else "has no CPU mapping (allocated with cpu_access=False)"
            raise StateError(f"{what} of the allocation at VA {self.va:#x}: it {state}")
        return self.cpu

    def write(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` into the buffer at byte ``offset`` through the CPU mapping."""
        view = as_readonly_bytes("data", data)
        check_range("write", offset, len(view), self.size)
        self._view("write")[offset : offset + len(view)] = view

    def read(self, offset: int, nbytes: int) -> bytes:
        """``nbytes`` bytes at ``offset`` through the CPU mapping."""
        check_range("read", offset, nbytes, self.size)
        return self._view("read")[offset : offset + nbytes]

    def free(self) -> None:
        """Unmap from every GPU and free (idempotent)."""
        self.device.free(self)

    def __repr__(self) -> str:
        return f"Allocation({self.domain.name}, va={self.va:#x}, size={self.size:#x}, handle={self.handle:#x})"


class KfdGpu:
    """A GPU whose VM the process ``kfd`` acquired (``KFD.device(i)``)."""

    def __init__(self, kfd: KfdProcess, node: KfdNode) -> None:
        self.kfd = kfd
        self.node = node
        self.render_fd = kfd.fileio.open(render_node_path(node.drm_render_minor), os.O_RDWR)
        self._doorbells: MappedBuffer | None = None
        self.allocations: list[Allocation] = []
        self.queues: list[KfdQueue] = []
        self._queue_buffers: dict[KfdQueue, tuple[Allocation, ...]] = {}
        kfd.ioctl(KfdIoctl.AMDKFD_IOC_ACQUIRE_VM, kfd_ioctl_acquire_vm_args(drm_fd=self.render_fd, gpu_id=self.gpu_id))

    @property
    def gpu_id(self) -> int:
        return self.node.gpu_id

    # --- memory --------------------------------------------------------------------------------------------------
    def alloc(
        self,
        nbytes: int,
        domain: MemoryDomain = MemoryDomain.VRAM,
        *,
        map_to: Sequence[KfdGpu] | None = None,
        cpu_access: bool = True,
        executable: bool = False,
        uncached: bool = False,
    ) -> Allocation:
        """Allocate ``nbytes`` (rounded up to pages) in ``domain``, map it on ``map_to`` (default: this GPU) and,
        with ``cpu_access``, map it for the CPU (VRAM and GTT through the render node)."""
        size = round_up(check_int("nbytes", nbytes, min_value=1), PAGE_BYTES)
        flags = domain.value | _F.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
        if executable:
            flags |= _F.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE
        if uncached:
            flags |= _F.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | _F.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED
        if domain is MemoryDomain.VRAM and cpu_access:
            flags |= _F.KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC
        host = None
        if domain is MemoryDomain.USERPTR:
            host = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            va = cpu_address = ctypes.addressof(ctypes.c_char.from_buffer(host))
        else:
            va, cpu_address = self.kfd.va_space.alloc(size), 0
        args = kfd_ioctl_alloc_memory_of_gpu_args(va_addr=va, size=size, gpu_id=self.gpu_id, flags=int(flags),
                                                    mmap_offset=cpu_address)  # fmt: skip
        try:
            self.kfd.ioctl(KfdIoctl.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)
        except OSError:
            if host is None:
                self.kfd.va_space.free(va)
            raise
        allocation = Allocation(self, args.handle, va, size, domain, int(flags), args.mmap_offset, host=host)
        self.allocations.append(allocation)
        try:
            self.map(allocation, [self] if map_to is None else map_to)
            if host is not None:
                allocation.cpu = MappedBuffer.over(host)
            elif cpu_access:
                allocation.cpu = self.kfd.fileio.mmap(self.render_fd, size, allocation.mmap_offset)
        except BaseException:
            self.free(allocation)
            raise
        return allocation

    def _device_ids(self, devices: Sequence[KfdGpu]) -> ctypes.Array[ctypes.c_uint32]:
        if not devices:
            raise InvalidArgument("devices=[], expected at least one KfdGpu to map on")
        return (ctypes.c_uint32 * len(devices))(*(device.gpu_id for device in devices))

    def map(self, allocation: Allocation, devices: Sequence[KfdGpu]) -> None:
        """Map ``allocation`` on ``devices`` (GPUs it is already mapped on are skipped)."""
        todo = [device for device in devices if device not in allocation.mapped_on]
        if not todo:
            return
        ids = self._device_ids(todo)
        args = kfd_ioctl_map_memory_to_gpu_args(handle=allocation.handle, device_ids_array_ptr=ctypes.addressof(ids),
                                                  n_devices=len(todo))  # fmt: skip
        try:
            self.kfd.ioctl(KfdIoctl.AMDKFD_IOC_MAP_MEMORY_TO_GPU, args)
        finally:
            allocation.mapped_on.extend(todo[: args.n_success])

    def unmap(self, allocation: Allocation, devices: Sequence[KfdGpu] | None = None) -> None:
        """Unmap ``allocation`` from ``devices`` (default: every GPU it is mapped on)."""
        todo = [
            device
            for device in (allocation.mapped_on if devices is None else devices)
            if device in allocation.mapped_on
        ]
        if not todo:
            return
        ids = self._device_ids(todo)
        args = kfd_ioctl_unmap_memory_from_gpu_args(
            handle=allocation.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=len(todo)
        )
        try:
            self.kfd.ioctl(KfdIoctl.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, args)
        finally:
            for device in todo[: args.n_success]:
                allocation.mapped_on.remove(device)

    def free(self, allocation: Allocation) -> None:
        """Drop the CPU mapping, unmap from every GPU, free the buffer and its VA (idempotent)."""
        if allocation.freed:
            return
        if allocation.cpu is not None:
            if allocation.host is None:
                self.kfd.fileio.munmap(allocation.cpu)
            else:
                allocation.cpu.release()
        self.unmap(allocation)
        self.kfd.ioctl(
            KfdIoctl.AMDKFD_IOC_FREE_MEMORY_OF_GPU, kfd_ioctl_free_memory_of_gpu_args(handle=allocation.handle)
        )
        if allocation.host is None:
            self.kfd.va_space.free(allocation.va)
        allocation.freed = True
        self.allocations.remove(allocation)

    # --- queues --------------------------------------------------------------------------------------------------
    def _doorbell_page(self, doorbell_offset: int) -> tuple[MappedBuffer, int]:
        base = round_down(doorbell_offset, KFD_DOORBELL_PROCESS_SLICE_BYTES)
        if self._doorbells is None:
            self._doorbells = self.kfd.fileio.mmap(self.kfd.fd, KFD_DOORBELL_PROCESS_SLICE_BYTES, base)
        return self._doorbells, doorbell_offset - base

    def create_queue(
        self, engine: QueueEngine, *, ring_bytes: int = _DEFAULT_RING_BYTES, cwsr: bool = True
    ) -> KfdQueue:
        """Create a queue: ring and read/write pointers in host memory, doorbell mapped from /dev/kfd; compute
        queues also get an EOP buffer and (``cwsr``) a context save area in VRAM, sized from the topology."""
        check_ring_bytes("ring_bytes", ring_bytes, min_bytes=KFD_MIN_QUEUE_RING_SIZE, max_bytes=None)
        made: list[Allocation] = []
        try:
            ring, rptr, wptr = (self.alloc(n, MemoryDomain.USERPTR) for n in (ring_bytes, PAGE_BYTES, PAGE_BYTES))
            made += [ring, rptr, wptr]
            args = kfd_ioctl_create_queue_args(
                ring_base_address=ring.va, ring_size=ring_bytes, gpu_id=self.gpu_id, queue_type=engine.value,
                queue_percentage=_QUEUE_PERCENTAGE, queue_priority=_QUEUE_PRIORITY,
                read_pointer_address=rptr.va, write_pointer_address=wptr.va,
            )  # fmt: skip
            extra: list[Allocation] = []
            if engine is QueueEngine.COMPUTE:
                sizes = cwsr_sizes(self.node)
                eop = self.alloc(sizes.eop_buffer_size, MemoryDomain.VRAM, cpu_access=False)
                extra.append(eop)
                args.eop_buffer_address, args.eop_buffer_size = eop.va, sizes.eop_buffer_size
                if cwsr:
                    num_xcc = max(self.node.properties.get("num_xcc", 1), 1)
                    area = (sizes.cwsr_size + sizes.debug_memory_size) * num_xcc
                    ctx = self.alloc(area, MemoryDomain.VRAM, cpu_access=False)
                    extra.append(ctx)
                    args.ctx_save_restore_address, args.ctx_save_restore_size = ctx.va, sizes.cwsr_size
                    args.ctl_stack_size = sizes.ctl_stack_size
            made += extra
            self.kfd.ioctl(KfdIoctl.AMDKFD_IOC_CREATE_QUEUE, args)
        except BaseException:
            for allocation in reversed(made):
                self.free(allocation)
            raise
        doorbell = self._doorbell_page(args.doorbell_offset)
        queue = KfdQueue(engine, args.queue_id, self.gpu_id, (ring, ring_bytes), (rptr, wptr), doorbell, tuple(extra),
                         destroy=self.destroy_queue)  # fmt: skip
        self.queues.append(queue)
        self._queue_buffers[queue] = (*extra, wptr, rptr, ring)
        return queue

    def destroy_queue(self, queue: KfdQueue) -> None:
        """Destroy ``queue`` and free its buffers (idempotent)."""
        if queue.destroyed:
            return
        if queue not in self._queue_buffers:
            raise InvalidArgument(f"queue={queue!r}, expected a queue created on {self!r}")
        self.kfd.ioctl(KfdIoctl.AMDKFD_IOC_DESTROY_QUEUE, kfd_ioctl_destroy_queue_args(queue_id=queue.queue_id))
        queue.destroyed = True
        self.queues.remove(queue)
        for allocation in self._queue_buffers.pop(queue):
            self.free(allocation)

    def close(self) -> None:
        """Destroy this device's queues, free its allocations, unmap the doorbells, close the render node."""
        for queue in list(self.queues):
            self.destroy_queue(queue)
        for allocation in list(reversed(self.allocations)):
            self.free(allocation)
        if self._doorbells is not None:
            self.kfd.fileio.munmap(self._doorbells)
            self._doorbells = None
        self.kfd.fileio.close(self.render_fd)

    def __repr__(self) -> str:
        return f"KfdGpu({self.node.arch}, gpu_id={self.gpu_id:#x}, renderD{self.node.drm_render_minor})"
