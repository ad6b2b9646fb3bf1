"""The amdkfd queue ABI (``linux/kfd_ioctl.h``, KFD ioctl interface 1.11; ``kfd_priv.h`` for the doorbells): queue
types and limits, the queue ioctls' structures, and the process doorbell frame.

Structures keep their C names and field names verbatim, laid out byte for byte as the C compiler lays them out on
Linux (``tests/spec/test_kfd_abi.py`` compares them with the installed header); request numbers are in
:mod:`tinyhil.spec.kfd_ioctls`.
"""

from __future__ import annotations

import ctypes
from enum import IntEnum
from typing import Final

from .ctypes_layout import layout, u32, u64

__all__ = [
    "KFD_DOORBELL_BYTES",
    "KFD_DOORBELL_PROCESS_SLICE_BYTES",
    "KFD_MAX_NUM_OF_QUEUES_PER_PROCESS",
    "KFD_MAX_QUEUE_PERCENTAGE",
    "KFD_MAX_QUEUE_PRIORITY",
    "KFD_MIN_QUEUE_RING_SIZE",
    "QueueType",
    "kfd_ioctl_alloc_queue_gws_args",
    "kfd_ioctl_create_queue_args",
    "kfd_ioctl_destroy_queue_args",
    "kfd_ioctl_get_queue_wave_state_args",
    "kfd_ioctl_set_cu_mask_args",
    "kfd_ioctl_update_queue_args",
]

KFD_MAX_QUEUE_PERCENTAGE: Final = 100

KFD_MAX_QUEUE_PRIORITY: Final = 15

KFD_MIN_QUEUE_RING_SIZE: Final = 1024


class QueueType(IntEnum):
    """``kfd_ioctl_create_queue_args.queue_type``."""

    KFD_IOC_QUEUE_TYPE_COMPUTE = 0x0
    KFD_IOC_QUEUE_TYPE_SDMA = 0x1
    KFD_IOC_QUEUE_TYPE_COMPUTE_AQL = 0x2
    KFD_IOC_QUEUE_TYPE_SDMA_XGMI = 0x3


@layout
class kfd_ioctl_create_queue_args(ctypes.Structure):
    ring_base_address: u64
    write_pointer_address: u64
    read_pointer_address: u64
    doorbell_offset: u64
    ring_size: u32
    gpu_id: u32
    queue_type: u32
    queue_percentage: u32
    queue_priority: u32
    queue_id: u32
    eop_buffer_address: u64
    eop_buffer_size: u64
    ctx_save_restore_address: u64
    ctx_save_restore_size: u32
    ctl_stack_size: u32


@layout
class kfd_ioctl_destroy_queue_args(ctypes.Structure):
    queue_id: u32
    pad: u32


@layout
class kfd_ioctl_update_queue_args(ctypes.Structure):
    ring_base_address: u64
    queue_id: u32
    ring_size: u32
    queue_percentage: u32
    queue_priority: u32


@layout
class kfd_ioctl_set_cu_mask_args(ctypes.Structure):
    queue_id: u32
    num_cu_mask: u32
    cu_mask_ptr: u64


@layout
class kfd_ioctl_get_queue_wave_state_args(ctypes.Structure):
    ctl_stack_address: u64
    ctl_stack_used_size: u32
    save_area_used_size: u32
    queue_id: u32
    pad: u32


@layout
class kfd_ioctl_alloc_queue_gws_args(ctypes.Structure):
    queue_id: u32
    num_gws: u32
    first_gws: u32
    pad: u32


# Doorbells on SOC15 GPUs (gfx9 and later): 8 bytes each, a process owns a frame of 1024 of them (two pages);
# CREATE_QUEUE returns the queue's byte offset inside that frame in the low bits of doorbell_offset.
KFD_MAX_NUM_OF_QUEUES_PER_PROCESS: Final = 1024

KFD_DOORBELL_BYTES: Final = 8

KFD_DOORBELL_PROCESS_SLICE_BYTES: Final = KFD_DOORBELL_BYTES * KFD_MAX_NUM_OF_QUEUES_PER_PROCESS
