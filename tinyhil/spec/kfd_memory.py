"""The amdkfd memory ABI (``linux/kfd_ioctl.h``, KFD ioctl interface 1.11; ``kfd_priv.h`` for mmap offsets and
handles): allocation flags, the VM, allocate / map / free, apertures, scratch, XNACK, SVM and dma-buf structures, and
the encodings of /dev/kfd mmap offsets and memory handles.

Structures keep their C names and field names verbatim, laid out byte for byte as the C compiler lays them out on
Linux (``tests/spec/test_kfd_abi.py`` compares them with the installed header); request numbers are in
:mod:`tinyhil.spec.kfd_ioctls`.
"""

from __future__ import annotations

import ctypes
from enum import IntEnum, IntFlag
from typing import Annotated, Final

from .ctypes_layout import layout, s32, u32, u64
from .kfd_topology import NUM_OF_SUPPORTED_GPUS

__all__ = [
    "KFD_GPU_ID_HASH_WIDTH",
    "KFD_MMAP_GPU_ID_MASK",
    "KFD_MMAP_GPU_ID_SHIFT",
    "KFD_MMAP_TYPE_DOORBELL",
    "KFD_MMAP_TYPE_EVENTS",
    "KFD_MMAP_TYPE_MASK",
    "KFD_MMAP_TYPE_MMIO",
    "KFD_MMAP_TYPE_RESERVED_MEM",
    "KFD_MMAP_TYPE_SHIFT",
    "AllocMemFlags",
    "CachePolicy",
    "MmioRemap",
    "handle_gpu_id",
    "handle_idr",
    "kfd_ioctl_acquire_vm_args",
    "kfd_ioctl_alloc_memory_of_gpu_args",
    "kfd_ioctl_free_memory_of_gpu_args",
    "kfd_ioctl_get_available_memory_args",
    "kfd_ioctl_get_dmabuf_info_args",
    "kfd_ioctl_get_process_apertures_args",
    "kfd_ioctl_get_process_apertures_new_args",
    "kfd_ioctl_import_dmabuf_args",
    "kfd_ioctl_map_memory_to_gpu_args",
    "kfd_ioctl_set_memory_policy_args",
    "kfd_ioctl_set_scratch_backing_va_args",
    "kfd_ioctl_set_xnack_mode_args",
    "kfd_ioctl_svm_args",
    "kfd_ioctl_svm_attribute",
    "kfd_ioctl_unmap_memory_from_gpu_args",
    "kfd_mmap_get_gpu_id",
    "kfd_mmap_gpu_id",
    "kfd_process_device_apertures",
    "make_handle",
]


class CachePolicy(IntEnum):
    """``kfd_ioctl_set_memory_policy_args.default_policy`` and ``alternate_policy``."""

    KFD_IOC_CACHE_POLICY_COHERENT = 0
    KFD_IOC_CACHE_POLICY_NONCOHERENT = 1


class AllocMemFlags(IntFlag):
    """``kfd_ioctl_alloc_memory_of_gpu_args.flags``: one memory type (bits 0-4) plus attributes (bits 25-31)."""

    KFD_IOC_ALLOC_MEM_FLAGS_VRAM = 1 << 0
    KFD_IOC_ALLOC_MEM_FLAGS_GTT = 1 << 1
    KFD_IOC_ALLOC_MEM_FLAGS_USERPTR = 1 << 2
    KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL = 1 << 3
    KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP = 1 << 4
    KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE = 1 << 31
    KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE = 1 << 30
    KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC = 1 << 29
    KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE = 1 << 28
    KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM = 1 << 27
    KFD_IOC_ALLOC_MEM_FLAGS_COHERENT = 1 << 26
    KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED = 1 << 25


class MmioRemap(IntEnum):
    """Register offsets inside the remapped MMIO page (``enum kfd_mmio_remap``)."""

    KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL = 0
    KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL = 4


@layout
class kfd_ioctl_get_available_memory_args(ctypes.Structure):
    available: u64
    gpu_id: u32
    pad: u32


@layout
class kfd_ioctl_set_memory_policy_args(ctypes.Structure):
    alternate_aperture_base: u64
    alternate_aperture_size: u64
    gpu_id: u32
    default_policy: u32
    alternate_policy: u32
    pad: u32


@layout
class kfd_process_device_apertures(ctypes.Structure):
    lds_base: u64
    lds_limit: u64
    scratch_base: u64
    scratch_limit: u64
    gpuvm_base: u64
    gpuvm_limit: u64
    gpu_id: u32
    pad: u32


@layout
class kfd_ioctl_get_process_apertures_args(ctypes.Structure):
    process_apertures: Annotated[
        ctypes.Array[kfd_process_device_apertures], kfd_process_device_apertures * NUM_OF_SUPPORTED_GPUS
    ]
    num_of_nodes: u32
    pad: u32


@layout
class kfd_ioctl_get_process_apertures_new_args(ctypes.Structure):
    kfd_process_device_apertures_ptr: u64
    num_of_nodes: u32
    pad: u32


@layout
class kfd_ioctl_set_scratch_backing_va_args(ctypes.Structure):
    va_addr: u64
    gpu_id: u32
    pad: u32


@layout
class kfd_ioctl_acquire_vm_args(ctypes.Structure):
    drm_fd: u32
    gpu_id: u32


@layout
class kfd_ioctl_alloc_memory_of_gpu_args(ctypes.Structure):
    va_addr: u64
    size: u64
    handle: u64
    mmap_offset: u64
    gpu_id: u32
    flags: u32


@layout
class kfd_ioctl_free_memory_of_gpu_args(ctypes.Structure):
    handle: u64


@layout
class kfd_ioctl_map_memory_to_gpu_args(ctypes.Structure):
    handle: u64
    device_ids_array_ptr: u64
    n_devices: u32
    n_success: u32


@layout
class kfd_ioctl_unmap_memory_from_gpu_args(ctypes.Structure):
    handle: u64
    device_ids_array_ptr: u64
    n_devices: u32
    n_success: u32


@layout
class kfd_ioctl_set_xnack_mode_args(ctypes.Structure):
    xnack_enabled: s32


@layout
class kfd_ioctl_get_dmabuf_info_args(ctypes.Structure):
    size: u64
    metadata_ptr: u64
    metadata_size: u32
    gpu_id: u32
    flags: u32
    dmabuf_fd: u32


@layout
class kfd_ioctl_import_dmabuf_args(ctypes.Structure):
    va_addr: u64
    handle: u64
    gpu_id: u32
    dmabuf_fd: u32


@layout
class kfd_ioctl_svm_attribute(ctypes.Structure):
    type: u32
    value: u32


@layout
class kfd_ioctl_svm_args(ctypes.Structure):
    """The fixed part; the C struct ends in a flexible array ``attrs[]`` of :class:`kfd_ioctl_svm_attribute`."""

    start_addr: u64
    size: u64
    op: u32
    nattr: u32


# mmap offsets on /dev/kfd (kfd_priv.h): bits 62-63 select what is mapped, bits 46-61 name the GPU.
KFD_MMAP_TYPE_SHIFT: Final = 62

KFD_MMAP_TYPE_MASK: Final = 0x3 << KFD_MMAP_TYPE_SHIFT

KFD_MMAP_TYPE_DOORBELL: Final = 0x3 << KFD_MMAP_TYPE_SHIFT

KFD_MMAP_TYPE_EVENTS: Final = 0x2 << KFD_MMAP_TYPE_SHIFT

KFD_MMAP_TYPE_RESERVED_MEM: Final = 0x1 << KFD_MMAP_TYPE_SHIFT

KFD_MMAP_TYPE_MMIO: Final = 0x0 << KFD_MMAP_TYPE_SHIFT

KFD_GPU_ID_HASH_WIDTH: Final = 16

KFD_MMAP_GPU_ID_SHIFT: Final = 46

KFD_MMAP_GPU_ID_MASK: Final = ((1 << KFD_GPU_ID_HASH_WIDTH) - 1) << KFD_MMAP_GPU_ID_SHIFT

_IDR_BITS: Final = 32


def kfd_mmap_gpu_id(gpu_id: int) -> int:
    """``KFD_MMAP_GPU_ID(gpu_id)``: the GPU's bits of a /dev/kfd mmap offset."""
    return (gpu_id << KFD_MMAP_GPU_ID_SHIFT) & KFD_MMAP_GPU_ID_MASK


def kfd_mmap_get_gpu_id(offset: int) -> int:
    """``KFD_MMAP_GET_GPU_ID(offset)``."""
    return (offset & KFD_MMAP_GPU_ID_MASK) >> KFD_MMAP_GPU_ID_SHIFT


def make_handle(gpu_id: int, idr_handle: int) -> int:
    """``MAKE_HANDLE(gpu_id, idr_handle)``: the 64-bit memory handle ALLOC_MEMORY_OF_GPU returns."""
    return (gpu_id << _IDR_BITS) + idr_handle


def handle_gpu_id(handle: int) -> int:
    """``GET_GPU_ID(handle)``."""
    return handle >> _IDR_BITS


def handle_idr(handle: int) -> int:
    """``GET_IDR_HANDLE(handle)``."""
    return handle & ((1 << _IDR_BITS) - 1)
