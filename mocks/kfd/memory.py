"""Memory ioctls: VM acquire, apertures, allocate / free, map / unmap to GPUs, memory policy.

Errnos follow ``kfd_chardev.c`` and ``amdgpu_amdkfd_gpuvm.c``: an unknown gpu_id is ``EINVAL``; using a GPU before
ACQUIRE_VM is ``ENODEV`` (``ESRCH`` where the kernel remaps it); a bad buffer handle is ``EINVAL`` for FREE but
``ENOMEM`` for MAP / UNMAP; freeing a mapped buffer is ``EBUSY``; a mapping whose VA range overlaps another on that
GPU, or leaves the GPUVM aperture, is ``EINVAL``. A rejected request changes no state.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
from typing import TYPE_CHECKING, Final

from tinyhil.align import round_up
from tinyhil.allocator import OutOfMemory
from tinyhil.errors import InvalidArgument
from tinyhil.mocks.kfd._errno import fail
from tinyhil.mocks.kfd.state import (
    GPUVM_BASE,
    GPUVM_LIMIT,
    LDS_BASE,
    SCRATCH_BASE,
    Allocation,
    GpuDevice,
    MemKind,
    ProcessDevice,
    aperture_limit,
    lowest_free,
)
from tinyhil.spec.amdgpu import PAGE_BYTES
from tinyhil.spec.kfd_memory import (
    KFD_MMAP_TYPE_MMIO,
    AllocMemFlags,
    CachePolicy,
    handle_gpu_id,
    handle_idr,
    kfd_ioctl_acquire_vm_args,
    kfd_ioctl_alloc_memory_of_gpu_args,
    kfd_ioctl_free_memory_of_gpu_args,
    kfd_ioctl_get_available_memory_args,
    kfd_ioctl_get_process_apertures_args,
    kfd_ioctl_get_process_apertures_new_args,
    kfd_ioctl_map_memory_to_gpu_args,
    kfd_ioctl_set_memory_policy_args,
    kfd_ioctl_set_scratch_backing_va_args,
    kfd_ioctl_unmap_memory_from_gpu_args,
    kfd_mmap_gpu_id,
    kfd_process_device_apertures,
    make_handle,
)
from tinyhil.spec.kfd_process import kfd_ioctl_set_trap_handler_args
from tinyhil.spec.kfd_queues import KFD_DOORBELL_PROCESS_SLICE_BYTES
from tinyhil.spec.kfd_topology import NUM_OF_SUPPORTED_GPUS

if TYPE_CHECKING:
    from tinyhil.mocks.kfd.device import MockKFD

__all__ = ["MemoryIoctls"]

_F = AllocMemFlags
# The kernel tries the memory types in this order; the first bit set wins.
_KINDS: Final = (
    (_F.KFD_IOC_ALLOC_MEM_FLAGS_VRAM, MemKind.VRAM),
    (_F.KFD_IOC_ALLOC_MEM_FLAGS_GTT, MemKind.GTT),
    (_F.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, MemKind.USERPTR),
    (_F.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL, MemKind.DOORBELL),
    (_F.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP, MemKind.MMIO_REMAP),
)
_IDR_LIMIT: Final = 1 << 31
_KMALLOC_MAX_BYTES: Final = 4 << 20  # larger device-id arrays fail kmalloc_array with ENOMEM
_U32: Final = 4
# Bus address of GPU n's doorbell BAR (what a DOORBELL allocation reports as mmap_offset).
_DOORBELL_BUS_BASE: Final = 0xFC00_0000
_DOORBELL_BUS_STRIDE: Final = 1 << 20


class MemoryIoctls:
    """The memory half of the ioctl table; handlers take the ctypes argument copy and fill it in place."""

    def __init__(self, kfd: MockKFD) -> None:
        self.kfd = kfd

    # --- lookups -------------------------------------------------------------------------------------------------
    def pdd(self, gpu_id: int, what: str) -> ProcessDevice:
        """The process's device data for ``gpu_id``, or ``EINVAL`` (``kfd_process_device_data_by_id``)."""
        pdd = self.kfd.process.pdds.get(gpu_id)
        if pdd is None:
            known = ", ".join(f"{known:#x}" for known in self.kfd.process.pdds) or "none"
            fail(errno.EINVAL, f"{what}: gpu_id={gpu_id:#x} is no GPU of this process (GPUs: {known})")
        return pdd

    @staticmethod
    def bind(pdd: ProcessDevice, what: str, code: int = errno.ENODEV) -> None:
        """``kfd_bind_process_to_device``: the GPU needs a VM, which ACQUIRE_VM gives it."""
        if pdd.drm_file is None:
            fail(
                code,
                f"{what}: gpu_id={pdd.gpu.gpu_id:#x} has no VM yet; call AMDKFD_IOC_ACQUIRE_VM with its render node",
            )

    def device_ids(self, what: str, address: int, count: int) -> list[int]:
        if count * _U32 > _KMALLOC_MAX_BYTES:
            fail(errno.ENOMEM, f"{what}: n_devices={count} is too many to copy in")
        raw = self.kfd.user.read(f"{what} device_ids_array_ptr", address, count * _U32)
        return list((ctypes.c_uint32 * count).from_buffer_copy(raw))

    # --- VM and apertures ----------------------------------------------------------------------------------------
    def _op_acquire_vm(self, args: kfd_ioctl_acquire_vm_args) -> None:
        what = "AMDKFD_IOC_ACQUIRE_VM"
        file = self.kfd.fileio.file_of(args.drm_fd)
        if file is None:
            fail(errno.EINVAL, f"{what}: drm_fd={args.drm_fd} is not an open file")
        pdd = self.pdd(args.gpu_id, what)
        if pdd.drm_file is not None:
            if pdd.drm_file is not file:
                fail(errno.EBUSY, f"{what}: gpu_id={args.gpu_id:#x} already has a VM from another render node file")
            return
        if file.gpu is not pdd.gpu:
            fail(errno.EINVAL, f"{what}: drm_fd={args.drm_fd} is {file.path}, not {pdd.gpu.identity.render_path}")
        pdd.drm_file = file

    @staticmethod
    def _apertures(pdd: ProcessDevice, out: kfd_process_device_apertures) -> None:
        out.lds_base, out.lds_limit = LDS_BASE, aperture_limit(LDS_BASE)
        out.scratch_base, out.scratch_limit = SCRATCH_BASE, aperture_limit(SCRATCH_BASE)
        out.gpuvm_base, out.gpuvm_limit = GPUVM_BASE, GPUVM_LIMIT
        out.gpu_id = pdd.gpu.gpu_id

    def _op_get_process_apertures(self, args: kfd_ioctl_get_process_apertures_args) -> None:
        pdds = list(self.kfd.process.pdds.values())[:NUM_OF_SUPPORTED_GPUS]
        for index, pdd in enumerate(pdds):
            self._apertures(pdd, args.process_apertures[index])
        args.num_of_nodes = len(pdds)

    def _op_get_process_apertures_new(self, args: kfd_ioctl_get_process_apertures_new_args) -> None:
        pdds = list(self.kfd.process.pdds.values())
        if args.num_of_nodes == 0:
            args.num_of_nodes = len(pdds)
            return
        count = min(len(pdds), args.num_of_nodes)
        table = (kfd_process_device_apertures * count)()
        for index in range(count):
            self._apertures(pdds[index], table[index])
        self.kfd.user.write("kfd_process_device_apertures_ptr", args.kfd_process_device_apertures_ptr, bytes(table))
        args.num_of_nodes = count

    # --- allocate / free -----------------------------------------------------------------------------------------
    def _op_alloc_memory_of_gpu(self, args: kfd_ioctl_alloc_memory_of_gpu_args) -> None:
        what = "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU"
        if args.size == 0:
            fail(errno.EINVAL, f"{what}: size=0, expected a size > 0")
        pdd = self.pdd(args.gpu_id, what)
        self.bind(pdd, what)
        kind = next((kind for flag, kind in _KINDS if args.flags & flag), None)
        if kind is None:
            fail(
                errno.EINVAL,
                f"{what}: flags={args.flags:#x} name no memory type (VRAM, GTT, USERPTR, DOORBELL, MMIO_REMAP)",
            )
        injected = self.kfd.injected.alloc_fails(pdd.gpu.identity.index, kind)
        if injected is not None:
            fail(errno.ENOMEM, f"{what}: {kind.name} size={args.size:#x} on gpu_id={args.gpu_id:#x}: injected by "
                               f"{injected!r}")  # fmt: skip
        size = round_up(args.size, PAGE_BYTES)
        idr = lowest_free(pdd.allocations, 0, _IDR_LIMIT)
        if idr is None:
            fail(errno.EFAULT, f"{what}: no free buffer handle on gpu_id={args.gpu_id:#x}")
        allocation = self._allocate(what, pdd.gpu, kind, size, args)
        allocation.handle, allocation.idr = make_handle(args.gpu_id, idr), idr
        pdd.allocations[idr] = allocation
        args.handle = allocation.handle
        args.mmap_offset = allocation.mmap_offset

    def _allocate(
        self, what: str, gpu: GpuDevice, kind: MemKind, size: int, args: kfd_ioctl_alloc_memory_of_gpu_args
    ) -> Allocation:
        def made(
            backing: memoryview,
            mmap_offset: int,
            drm_offset: int | None = None,
            vram_offset: int | None = None,
            keepalive: mmap.mmap | None = None,
        ) -> Allocation:
            return Allocation(0, gpu.gpu_id, 0, kind, args.flags, args.va_addr, size, backing, mmap_offset,
                              drm_offset, vram_offset, keepalive)  # fmt: skip

        if kind is MemKind.DOORBELL:
            if args.size != KFD_DOORBELL_PROCESS_SLICE_BYTES:
                fail(
                    errno.EINVAL,
                    f"{what}: DOORBELL size={args.size:#x}, expected {KFD_DOORBELL_PROCESS_SLICE_BYTES:#x}",
                )
            bus = _DOORBELL_BUS_BASE + gpu.identity.index * _DOORBELL_BUS_STRIDE
            return made(memoryview(gpu.doorbell_page), bus)
        if kind is MemKind.MMIO_REMAP:
            if args.size != PAGE_BYTES:
                fail(errno.EINVAL, f"{what}: MMIO_REMAP size={args.size:#x}, expected {PAGE_BYTES:#x}")
            return made(memoryview(gpu.mmio_page), KFD_MMAP_TYPE_MMIO | kfd_mmap_gpu_id(gpu.gpu_id))
        if kind is MemKind.USERPTR:
            address = args.mmap_offset
            if address == 0 or address % PAGE_BYTES:
                fail(errno.EINVAL, f"{what}: USERPTR address {address:#x}, expected a page-aligned CPU address")
            return made(self.kfd.user.view(f"{what} USERPTR", address, size), address)
        if kind is MemKind.VRAM:
            try:
                vram_offset = gpu.vram.alloc(size)
            except OutOfMemory:
                fail(errno.ENOMEM, f"{what}: VRAM size={size:#x}, {gpu.vram.free_bytes:#x} bytes free")
            drm_offset = gpu.drm_offsets.alloc(size)
            backing = gpu.port.vram[vram_offset : vram_offset + size]
            return made(backing, drm_offset, drm_offset=drm_offset, vram_offset=vram_offset)
        process = self.kfd.process
        if process.gtt_bytes + size > self.kfd.gtt_limit_bytes:
            fail(errno.ENOMEM, f"{what}: GTT size={size:#x} exceeds the {self.kfd.gtt_limit_bytes:#x}-byte GTT limit")
        try:
            keepalive = self.kfd.host_memory(size)
        except (OSError, OverflowError):
            fail(errno.ENOMEM, f"{what}: GTT size={size:#x} cannot be backed by host memory")
        process.gtt_bytes += size
        drm_offset = gpu.drm_offsets.alloc(size)
        return made(memoryview(keepalive), drm_offset, drm_offset=drm_offset, keepalive=keepalive)

    def _op_free_memory_of_gpu(self, args: kfd_ioctl_free_memory_of_gpu_args) -> None:
        what = "AMDKFD_IOC_FREE_MEMORY_OF_GPU"
        process = self.kfd.process
        if process.signal_handle and process.signal_handle == args.handle:
            fail(errno.EPERM, f"{what}: handle={args.handle:#x} is the event page, freed only at process exit")
        pdd = self.pdd(handle_gpu_id(args.handle), what)
        allocation = pdd.allocations.get(handle_idr(args.handle))
        if allocation is None:
            fail(errno.EINVAL, f"{what}: handle={args.handle:#x} names no allocation")
        if allocation.mapped_on:
            gpus = ", ".join(f"{gpu_id:#x}" for gpu_id in allocation.mapped_on)
            fail(errno.EBUSY, f"{what}: handle={args.handle:#x} is still mapped on GPUs {gpus}; unmap it first")
        self.release(allocation, pdd.gpu)
        if allocation.kind is MemKind.GTT:
            process.gtt_bytes -= allocation.size
        del pdd.allocations[allocation.idr]

    @staticmethod
    def release(allocation: Allocation, gpu: GpuDevice) -> None:
        """Give ``allocation``'s VRAM and DRM mmap offset back to ``gpu`` (a free, or the process's exit)."""
        if allocation.vram_offset is not None:
            gpu.vram.free(allocation.vram_offset)
        if allocation.drm_offset is not None:
            gpu.drm_offsets.free(allocation.drm_offset)

    # --- map / unmap ---------------------------------------------------------------------------------------------
    def _op_map_memory_to_gpu(self, args: kfd_ioctl_map_memory_to_gpu_args) -> None:
        what = "AMDKFD_IOC_MAP_MEMORY_TO_GPU"
        self._check_counts(what, args.n_devices, args.n_success)
        ids = self.device_ids(what, args.device_ids_array_ptr, args.n_devices)
        pdd = self.pdd(handle_gpu_id(args.handle), what)
        self.bind(pdd, what)
        allocation = pdd.allocations.get(handle_idr(args.handle))
        if allocation is None:
            fail(errno.ENOMEM, f"{what}: handle={args.handle:#x} names no allocation")
        for index in range(args.n_success, args.n_devices):
            peer = self.pdd(ids[index], what)
            self.bind(peer, what)
            self._map(what, allocation, peer.gpu)
            args.n_success = index + 1

    def _map(self, what: str, allocation: Allocation, gpu: GpuDevice) -> None:
        if gpu.gpu_id in allocation.mapped_on:
            return
        va, size = allocation.va, allocation.size
        if va % PAGE_BYTES or va < GPUVM_BASE or va + size - 1 > GPUVM_LIMIT:
            fail(errno.EINVAL, f"{what}: VA {va:#x}+{size:#x} is not a page-aligned range inside the GPUVM "
                               f"aperture {GPUVM_BASE:#x}..{GPUVM_LIMIT:#x}")  # fmt: skip
        for pdd in self.kfd.process.pdds.values():
            for other in pdd.allocations.values():
                if gpu.gpu_id in other.mapped_on and other.overlaps(va, size):
                    fail(errno.EINVAL, f"{what}: VA {va:#x}+{size:#x} overlaps handle {other.handle:#x} at "
                                       f"{other.va:#x}+{other.size:#x} on gpu_id={gpu.gpu_id:#x}")  # fmt: skip
        pieces = list(self.kfd.injected.mapped_pieces(gpu.identity.index, va, allocation.backing.nbytes))
        done: list[int] = []
        try:
            for offset, nbytes in pieces:
                gpu.port.map_memory(va + offset, allocation.backing[offset : offset + nbytes])
                done.append(va + offset)
        except InvalidArgument as exc:
            for piece_va in done:
                gpu.port.unmap_memory(piece_va)
            fail(errno.EINVAL, f"{what}: the GPU refused VA {va:#x}+{size:#x}: {exc}")
        allocation.mapped_on.append(gpu.gpu_id)

    def unmap(self, allocation: Allocation, gpu: GpuDevice) -> None:
        """Unmap ``allocation`` from ``gpu`` (each piece :meth:`_map` mapped around the fault plan's holes)."""
        for offset, _ in self.kfd.injected.mapped_pieces(gpu.identity.index, allocation.va, allocation.backing.nbytes):
            gpu.port.unmap_memory(allocation.va + offset)
        allocation.mapped_on.remove(gpu.gpu_id)

    def _op_unmap_memory_from_gpu(self, args: kfd_ioctl_unmap_memory_from_gpu_args) -> None:
        what = "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU"
        self._check_counts(what, args.n_devices, args.n_success)
        ids = self.device_ids(what, args.device_ids_array_ptr, args.n_devices)
        pdd = self.pdd(handle_gpu_id(args.handle), what)
        allocation = pdd.allocations.get(handle_idr(args.handle))
        if allocation is None:
            fail(errno.ENOMEM, f"{what}: handle={args.handle:#x} names no allocation")
        for index in range(args.n_success, args.n_devices):
            peer = self.pdd(ids[index], what)
            if peer.gpu.gpu_id not in allocation.mapped_on:
                fail(errno.EINVAL, f"{what}: handle={args.handle:#x} is not mapped on gpu_id={ids[index]:#x}")
            self.unmap(allocation, peer.gpu)
            args.n_success = index + 1

    @staticmethod
    def _check_counts(what: str, n_devices: int, n_success: int) -> None:
        if n_devices == 0:
            fail(errno.EINVAL, f"{what}: n_devices=0, expected at least one gpu_id")
        if n_success > n_devices:
            fail(errno.EINVAL, f"{what}: n_success={n_success} exceeds n_devices={n_devices}")

    # --- policies and per-GPU settings ---------------------------------------------------------------------------
    def _op_set_memory_policy(self, args: kfd_ioctl_set_memory_policy_args) -> None:
        what = "AMDKFD_IOC_SET_MEMORY_POLICY"
        for name in ("default_policy", "alternate_policy"):
            if getattr(args, name) not in tuple(CachePolicy):
                fail(errno.EINVAL, f"{what}: {name}={getattr(args, name)}, expected 0 (coherent) or 1 (noncoherent)")
        pdd = self.pdd(args.gpu_id, what)
        self.bind(pdd, what, errno.ESRCH)
        pdd.default_policy, pdd.alternate_policy = args.default_policy, args.alternate_policy
        pdd.alternate_aperture = (args.alternate_aperture_base, args.alternate_aperture_size)

    def _op_available_memory(self, args: kfd_ioctl_get_available_memory_args) -> None:
        args.available = self.pdd(args.gpu_id, "AMDKFD_IOC_AVAILABLE_MEMORY").gpu.vram.free_bytes

    def _op_set_scratch_backing_va(self, args: kfd_ioctl_set_scratch_backing_va_args) -> None:
        what = "AMDKFD_IOC_SET_SCRATCH_BACKING_VA"
        pdd = self.pdd(args.gpu_id, what)
        self.bind(pdd, what)
        pdd.scratch_backing_va = args.va_addr

    def _op_set_trap_handler(self, args: kfd_ioctl_set_trap_handler_args) -> None:
        what = "AMDKFD_IOC_SET_TRAP_HANDLER"
        pdd = self.pdd(args.gpu_id, what)
        self.bind(pdd, what, errno.ESRCH)
        pdd.trap_handler = (args.tba_addr, args.tma_addr)
