"""What userspace sees of amdkfd beyond ``kfd_ioctl.h``: mmap offset and handle encodings, event slots, paths.

These come from the kernel's private headers (``kfd_priv.h``, ``kfd_events.h``) and the sysfs layout of
``kfd_topology.c``; a KFD client depends on them as much as on the uapi (it splits the doorbell offset the kernel
returns, and writes event slots the kernel reads), so the client and MOCKKFD share them from here.
"""

from __future__ import annotations

from typing import Final

from tinyhil.kfd.uapi import KFD_SIGNAL_EVENT_LIMIT

__all__ = [
    "DRM_RENDER_MINOR_BASE",
    "EVENT_ID_BITS_END_OF_PIPE",
    "EVENT_ID_BITS_SDMA_TRAP",
    "KFD_DEVICE_PATH",
    "KFD_DOORBELL_BYTES",
    "KFD_DOORBELL_PROCESS_SLICE_BYTES",
    "KFD_EVENT_TIMEOUT_IMMEDIATE",
    "KFD_EVENT_TIMEOUT_INFINITE",
    "KFD_FIRST_NONSIGNAL_EVENT_ID",
    "KFD_GPU_ID_HASH_WIDTH",
    "KFD_MAX_NUM_OF_QUEUES_PER_PROCESS",
    "KFD_MMAP_GPU_ID_MASK",
    "KFD_MMAP_GPU_ID_SHIFT",
    "KFD_MMAP_TYPE_DOORBELL",
    "KFD_MMAP_TYPE_EVENTS",
    "KFD_MMAP_TYPE_MASK",
    "KFD_MMAP_TYPE_MMIO",
    "KFD_MMAP_TYPE_RESERVED_MEM",
    "KFD_MMAP_TYPE_SHIFT",
    "KFD_SIGNAL_PAGE_BYTES",
    "KFD_TOPOLOGY_PATH",
    "PAGE_SIZE",
    "UNSIGNALED_EVENT_SLOT",
    "handle_gpu_id",
    "handle_idr",
    "kfd_mmap_get_gpu_id",
    "kfd_mmap_gpu_id",
    "make_handle",
    "render_node_path",
]

PAGE_SIZE: Final = 4096
KFD_DEVICE_PATH: Final = "/dev/kfd"
KFD_TOPOLOGY_PATH: Final = "/sys/devices/virtual/kfd/kfd/topology"
# /dev/dri/renderD<minor>; the first render node is minor 128 (drm_render_minor in the node properties).
DRM_RENDER_MINOR_BASE: Final = 128

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

# Doorbells on SOC15 GPUs (gfx9 and later): 8 bytes each, a process owns a frame of 1024 of them (two pages);
# CREATE_QUEUE returns the queue's byte offset inside that frame in the low bits of doorbell_offset.
KFD_MAX_NUM_OF_QUEUES_PER_PROCESS: Final = 1024
KFD_DOORBELL_BYTES: Final = 8
KFD_DOORBELL_PROCESS_SLICE_BYTES: Final = KFD_DOORBELL_BYTES * KFD_MAX_NUM_OF_QUEUES_PER_PROCESS

# Events (kfd_events.h): signal events own one u64 slot each in the signal page, indexed by event id; a slot that
# holds UNSIGNALED_EVENT_SLOT has not been signalled. Ids at or above KFD_FIRST_NONSIGNAL_EVENT_ID are other events.
UNSIGNALED_EVENT_SLOT: Final = 0xFFFF_FFFF_FFFF_FFFF
KFD_SIGNAL_PAGE_BYTES: Final = KFD_SIGNAL_EVENT_LIMIT * 8
KFD_FIRST_NONSIGNAL_EVENT_ID: Final = KFD_SIGNAL_EVENT_LIMIT
KFD_EVENT_TIMEOUT_IMMEDIATE: Final = 0
KFD_EVENT_TIMEOUT_INFINITE: Final = 0xFFFFFFFF
# How many low bits of an interrupt's context id name the event (kfd_int_process_v11.c): end-of-pipe interrupts
# (RELEASE_MEM) carry a full 32-bit id, SDMA traps 28 bits.
EVENT_ID_BITS_END_OF_PIPE: Final = 32
EVENT_ID_BITS_SDMA_TRAP: Final = 28

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


def render_node_path(minor: int) -> str:
    """The DRM render node of ``drm_render_minor`` ``minor``: ``/dev/dri/renderD<minor>``."""
    return f"/dev/dri/renderD{minor}"
