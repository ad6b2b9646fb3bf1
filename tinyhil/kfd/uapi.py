"""The amdkfd uapi, ``linux/kfd_ioctl.h`` (KFD ioctl interface 1.11), as ctypes structures and named constants.

Every structure of the header is here with its C name and field names verbatim, laid out byte for byte as the C
compiler lays it out on Linux (``tests/kfd/test_uapi_abi.py`` compiles a program against the installed header and
compares every size and field offset). The ioctl request numbers built from these sizes live in
:mod:`tinyhil.kfd.ioctls`.

Fields are declared as annotations (``Annotated[int, ctypes.c_uint32]``) so type checkers see ``int`` attributes;
a decorator turns the annotations into ``_fields_`` in declaration order. The structures of ioctls neither the client
nor MOCKKFD implements live in :mod:`tinyhil.kfd.uapi_misc`.
"""

from __future__ import annotations

import ctypes
from enum import IntEnum, IntFlag
from typing import TYPE_CHECKING, Annotated, Final

from tinyhil.kfd import uapi_misc
from tinyhil.kfd._layout import layout as _layout
from tinyhil.kfd._layout import s32 as _s32
from tinyhil.kfd._layout import u32 as _u32
from tinyhil.kfd._layout import u64 as _u64

__all__ = [
    "KFD_INVALID_FD",
    "KFD_IOCTL_MAJOR_VERSION",
    "KFD_IOCTL_MINOR_VERSION",
    "KFD_MAX_QUEUE_PERCENTAGE",
    "KFD_MAX_QUEUE_PRIORITY",
    "KFD_MIN_QUEUE_RING_SIZE",
    "KFD_SIGNAL_EVENT_LIMIT",
    "NUM_OF_SUPPORTED_GPUS",
    "STRUCTS",
    "AllocMemFlags",
    "CachePolicy",
    "EventType",
    "HwExceptionResetCause",
    "HwExceptionResetType",
    "MemErrorType",
    "MmioRemap",
    "QueueType",
    "WaitResult",
    "kfd_event_data",
    "kfd_hsa_hw_exception_data",
    "kfd_hsa_memory_exception_data",
    "kfd_ioctl_acquire_vm_args",
    "kfd_ioctl_alloc_memory_of_gpu_args",
    "kfd_ioctl_create_event_args",
    "kfd_ioctl_create_queue_args",
    "kfd_ioctl_destroy_event_args",
    "kfd_ioctl_destroy_queue_args",
    "kfd_ioctl_free_memory_of_gpu_args",
    "kfd_ioctl_get_available_memory_args",
    "kfd_ioctl_get_clock_counters_args",
    "kfd_ioctl_get_process_apertures_args",
    "kfd_ioctl_get_process_apertures_new_args",
    "kfd_ioctl_get_version_args",
    "kfd_ioctl_map_memory_to_gpu_args",
    "kfd_ioctl_reset_event_args",
    "kfd_ioctl_set_event_args",
    "kfd_ioctl_set_memory_policy_args",
    "kfd_ioctl_set_scratch_backing_va_args",
    "kfd_ioctl_set_trap_handler_args",
    "kfd_ioctl_set_xnack_mode_args",
    "kfd_ioctl_unmap_memory_from_gpu_args",
    "kfd_ioctl_wait_events_args",
    "kfd_memory_exception_failure",
    "kfd_process_device_apertures",
]

# --- scalar constants (kfd_ioctl.h) ---------------------------------------------------------------------------------
KFD_IOCTL_MAJOR_VERSION: Final = 1
KFD_IOCTL_MINOR_VERSION: Final = 11
KFD_MAX_QUEUE_PERCENTAGE: Final = 100
KFD_MAX_QUEUE_PRIORITY: Final = 15
KFD_MIN_QUEUE_RING_SIZE: Final = 1024
NUM_OF_SUPPORTED_GPUS: Final = 7
KFD_INVALID_FD: Final = 0xFFFFFFFF
KFD_SIGNAL_EVENT_LIMIT: Final = 4096


class QueueType(IntEnum):
    """``kfd_ioctl_create_queue_args.queue_type``."""

    KFD_IOC_QUEUE_TYPE_COMPUTE = 0x0
    KFD_IOC_QUEUE_TYPE_SDMA = 0x1
    KFD_IOC_QUEUE_TYPE_COMPUTE_AQL = 0x2
    KFD_IOC_QUEUE_TYPE_SDMA_XGMI = 0x3


class CachePolicy(IntEnum):
    """``kfd_ioctl_set_memory_policy_args.default_policy`` and ``alternate_policy``."""

    KFD_IOC_CACHE_POLICY_COHERENT = 0
    KFD_IOC_CACHE_POLICY_NONCOHERENT = 1


class EventType(IntEnum):
    """``kfd_ioctl_create_event_args.event_type`` (matching HSA_EVENTTYPE)."""

    KFD_IOC_EVENT_SIGNAL = 0
    KFD_IOC_EVENT_NODECHANGE = 1
    KFD_IOC_EVENT_DEVICESTATECHANGE = 2
    KFD_IOC_EVENT_HW_EXCEPTION = 3
    KFD_IOC_EVENT_SYSTEM_EVENT = 4
    KFD_IOC_EVENT_DEBUG_EVENT = 5
    KFD_IOC_EVENT_PROFILE_EVENT = 6
    KFD_IOC_EVENT_QUEUE_EVENT = 7
    KFD_IOC_EVENT_MEMORY = 8


class WaitResult(IntEnum):
    """``kfd_ioctl_wait_events_args.wait_result``."""

    KFD_IOC_WAIT_RESULT_COMPLETE = 0
    KFD_IOC_WAIT_RESULT_TIMEOUT = 1
    KFD_IOC_WAIT_RESULT_FAIL = 2


class HwExceptionResetType(IntEnum):
    """``kfd_event_data.hw_exception_data.reset_type``."""

    KFD_HW_EXCEPTION_WHOLE_GPU_RESET = 0
    KFD_HW_EXCEPTION_PER_ENGINE_RESET = 1


class HwExceptionResetCause(IntEnum):
    """``kfd_event_data.hw_exception_data.reset_cause``."""

    KFD_HW_EXCEPTION_GPU_HANG = 0
    KFD_HW_EXCEPTION_ECC = 1


class MemErrorType(IntEnum):
    """``kfd_hsa_memory_exception_data.ErrorType``."""

    KFD_MEM_ERR_NO_RAS = 0
    KFD_MEM_ERR_SRAM_ECC = 1
    KFD_MEM_ERR_POISON_CONSUMED = 2
    KFD_MEM_ERR_GPU_HANG = 3


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


# --- queues -----------------------------------------------------------------------------------------------------------
@_layout
class kfd_ioctl_get_version_args(ctypes.Structure):
    major_version: _u32
    minor_version: _u32


@_layout
class kfd_ioctl_create_queue_args(ctypes.Structure):
    ring_base_address: _u64
    write_pointer_address: _u64
    read_pointer_address: _u64
    doorbell_offset: _u64
    ring_size: _u32
    gpu_id: _u32
    queue_type: _u32
    queue_percentage: _u32
    queue_priority: _u32
    queue_id: _u32
    eop_buffer_address: _u64
    eop_buffer_size: _u64
    ctx_save_restore_address: _u64
    ctx_save_restore_size: _u32
    ctl_stack_size: _u32


@_layout
class kfd_ioctl_destroy_queue_args(ctypes.Structure):
    queue_id: _u32
    pad: _u32


@_layout
class kfd_ioctl_get_available_memory_args(ctypes.Structure):
    available: _u64
    gpu_id: _u32
    pad: _u32


@_layout
class kfd_ioctl_set_memory_policy_args(ctypes.Structure):
    alternate_aperture_base: _u64
    alternate_aperture_size: _u64
    gpu_id: _u32
    default_policy: _u32
    alternate_policy: _u32
    pad: _u32


@_layout
class kfd_ioctl_get_clock_counters_args(ctypes.Structure):
    gpu_clock_counter: _u64
    cpu_clock_counter: _u64
    system_clock_counter: _u64
    system_clock_freq: _u64
    gpu_id: _u32
    pad: _u32


# --- apertures --------------------------------------------------------------------------------------------------------
@_layout
class kfd_process_device_apertures(ctypes.Structure):
    lds_base: _u64
    lds_limit: _u64
    scratch_base: _u64
    scratch_limit: _u64
    gpuvm_base: _u64
    gpuvm_limit: _u64
    gpu_id: _u32
    pad: _u32


@_layout
class kfd_ioctl_get_process_apertures_args(ctypes.Structure):
    process_apertures: Annotated[
        ctypes.Array[kfd_process_device_apertures], kfd_process_device_apertures * NUM_OF_SUPPORTED_GPUS
    ]
    num_of_nodes: _u32
    pad: _u32


@_layout
class kfd_ioctl_get_process_apertures_new_args(ctypes.Structure):
    kfd_process_device_apertures_ptr: _u64
    num_of_nodes: _u32
    pad: _u32


# --- events -----------------------------------------------------------------------------------------------------------
@_layout
class kfd_ioctl_create_event_args(ctypes.Structure):
    event_page_offset: _u64
    event_trigger_data: _u32
    event_type: _u32
    auto_reset: _u32
    node_id: _u32
    event_id: _u32
    event_slot_index: _u32


@_layout
class kfd_ioctl_destroy_event_args(ctypes.Structure):
    event_id: _u32
    pad: _u32


@_layout
class kfd_ioctl_set_event_args(ctypes.Structure):
    event_id: _u32
    pad: _u32


@_layout
class kfd_ioctl_reset_event_args(ctypes.Structure):
    event_id: _u32
    pad: _u32


@_layout
class kfd_memory_exception_failure(ctypes.Structure):
    NotPresent: _u32
    ReadOnly: _u32
    NoExecute: _u32
    imprecise: _u32


@_layout
class kfd_hsa_memory_exception_data(ctypes.Structure):
    failure: kfd_memory_exception_failure
    va: _u64
    gpu_id: _u32
    ErrorType: _u32


@_layout
class kfd_hsa_hw_exception_data(ctypes.Structure):
    reset_type: _u32
    reset_cause: _u32
    memory_lost: _u32
    gpu_id: _u32


@_layout
class _kfd_event_data_union(ctypes.Union):
    memory_exception_data: kfd_hsa_memory_exception_data
    hw_exception_data: kfd_hsa_hw_exception_data


@_layout
class kfd_event_data(ctypes.Structure):
    """One entry of the array ``kfd_ioctl_wait_events_args.events_ptr`` points to; the union is anonymous in C."""

    _anonymous_ = ("_union",)
    _union: _kfd_event_data_union
    kfd_event_data_ext: _u64
    event_id: _u32
    pad: _u32

    if TYPE_CHECKING:
        memory_exception_data: kfd_hsa_memory_exception_data
        hw_exception_data: kfd_hsa_hw_exception_data


@_layout
class kfd_ioctl_wait_events_args(ctypes.Structure):
    events_ptr: _u64
    num_events: _u32
    wait_for_all: _u32
    timeout: _u32
    wait_result: _u32


# --- memory -----------------------------------------------------------------------------------------------------------
@_layout
class kfd_ioctl_set_scratch_backing_va_args(ctypes.Structure):
    va_addr: _u64
    gpu_id: _u32
    pad: _u32


@_layout
class kfd_ioctl_set_trap_handler_args(ctypes.Structure):
    tba_addr: _u64
    tma_addr: _u64
    gpu_id: _u32
    pad: _u32


@_layout
class kfd_ioctl_acquire_vm_args(ctypes.Structure):
    drm_fd: _u32
    gpu_id: _u32


@_layout
class kfd_ioctl_alloc_memory_of_gpu_args(ctypes.Structure):
    va_addr: _u64
    size: _u64
    handle: _u64
    mmap_offset: _u64
    gpu_id: _u32
    flags: _u32


@_layout
class kfd_ioctl_free_memory_of_gpu_args(ctypes.Structure):
    handle: _u64


@_layout
class kfd_ioctl_map_memory_to_gpu_args(ctypes.Structure):
    handle: _u64
    device_ids_array_ptr: _u64
    n_devices: _u32
    n_success: _u32


@_layout
class kfd_ioctl_unmap_memory_from_gpu_args(ctypes.Structure):
    handle: _u64
    device_ids_array_ptr: _u64
    n_devices: _u32
    n_success: _u32


# --- XNACK ------------------------------------------------------------------------------------------------------------
@_layout
class kfd_ioctl_set_xnack_mode_args(ctypes.Structure):
    xnack_enabled: _s32


# Every structure of the header, here and in uapi_misc, by C name (the ABI test walks this).
STRUCTS: Final[dict[str, type[ctypes.Structure]]] = {
    name: obj
    for module in (globals(), vars(uapi_misc))
    for name, obj in list(module.items())
    if name.startswith("kfd_") and isinstance(obj, type) and issubclass(obj, ctypes.Structure)
}
