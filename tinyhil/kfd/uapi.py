"""The amdkfd uapi, ``linux/kfd_ioctl.h`` (KFD ioctl interface 1.11), as ctypes structures and named constants.

Every structure of the header is here with its C name and field names verbatim, laid out byte for byte as the C
compiler lays it out on Linux (``tests/kfd/test_uapi_abi.py`` compiles a program against the installed header and
compares every size and field offset). The ioctl request numbers built from these sizes live in
:mod:`tinyhil.kfd.ioctls`.

Fields are declared as annotations (``Annotated[int, ctypes.c_uint32]``) so type checkers see ``int`` attributes;
:func:`_layout` turns the annotations into ``_fields_`` in declaration order.
"""

from __future__ import annotations

import ctypes
from enum import IntEnum, IntFlag
from typing import TYPE_CHECKING, Annotated, Final, TypeVar, get_args, get_origin, get_type_hints

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
    "kfd_criu_bo_bucket",
    "kfd_criu_device_bucket",
    "kfd_event_data",
    "kfd_hsa_hw_exception_data",
    "kfd_hsa_memory_exception_data",
    "kfd_ioctl_acquire_vm_args",
    "kfd_ioctl_alloc_memory_of_gpu_args",
    "kfd_ioctl_alloc_queue_gws_args",
    "kfd_ioctl_create_event_args",
    "kfd_ioctl_create_queue_args",
    "kfd_ioctl_criu_args",
    "kfd_ioctl_dbg_address_watch_args",
    "kfd_ioctl_dbg_register_args",
    "kfd_ioctl_dbg_unregister_args",
    "kfd_ioctl_dbg_wave_control_args",
    "kfd_ioctl_destroy_event_args",
    "kfd_ioctl_destroy_queue_args",
    "kfd_ioctl_free_memory_of_gpu_args",
    "kfd_ioctl_get_available_memory_args",
    "kfd_ioctl_get_clock_counters_args",
    "kfd_ioctl_get_dmabuf_info_args",
    "kfd_ioctl_get_process_apertures_args",
    "kfd_ioctl_get_process_apertures_new_args",
    "kfd_ioctl_get_queue_wave_state_args",
    "kfd_ioctl_get_tile_config_args",
    "kfd_ioctl_get_version_args",
    "kfd_ioctl_import_dmabuf_args",
    "kfd_ioctl_map_memory_to_gpu_args",
    "kfd_ioctl_reset_event_args",
    "kfd_ioctl_set_cu_mask_args",
    "kfd_ioctl_set_event_args",
    "kfd_ioctl_set_memory_policy_args",
    "kfd_ioctl_set_scratch_backing_va_args",
    "kfd_ioctl_set_trap_handler_args",
    "kfd_ioctl_set_xnack_mode_args",
    "kfd_ioctl_smi_events_args",
    "kfd_ioctl_svm_args",
    "kfd_ioctl_svm_attribute",
    "kfd_ioctl_unmap_memory_from_gpu_args",
    "kfd_ioctl_update_queue_args",
    "kfd_ioctl_wait_events_args",
    "kfd_memory_exception_failure",
    "kfd_process_device_apertures",
]

_u32 = Annotated[int, ctypes.c_uint32]
_u64 = Annotated[int, ctypes.c_uint64]
_s32 = Annotated[int, ctypes.c_int32]
_C = TypeVar("_C", bound=type[ctypes.Structure] | type[ctypes.Union])

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


def _layout(cls: _C) -> _C:
    """Set ``cls._fields_`` from its annotations, in declaration order (``Annotated[int, ctype]`` or a ctypes type)."""
    fields = []
    for name, hint in get_type_hints(cls, include_extras=True).items():
        ctype = get_args(hint)[1] if get_origin(hint) is Annotated else hint
        fields.append((name, ctype))
    cls._fields_ = fields
    return cls


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
class kfd_ioctl_update_queue_args(ctypes.Structure):
    ring_base_address: _u64
    queue_id: _u32
    ring_size: _u32
    queue_percentage: _u32
    queue_priority: _u32


@_layout
class kfd_ioctl_set_cu_mask_args(ctypes.Structure):
    queue_id: _u32
    num_cu_mask: _u32
    cu_mask_ptr: _u64


@_layout
class kfd_ioctl_get_queue_wave_state_args(ctypes.Structure):
    ctl_stack_address: _u64
    ctl_stack_used_size: _u32
    save_area_used_size: _u32
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


# --- deprecated debugger ioctls (the kernel answers EPERM) ------------------------------------------------------------
@_layout
class kfd_ioctl_dbg_register_args(ctypes.Structure):
    gpu_id: _u32
    pad: _u32


@_layout
class kfd_ioctl_dbg_unregister_args(ctypes.Structure):
    gpu_id: _u32
    pad: _u32


@_layout
class kfd_ioctl_dbg_address_watch_args(ctypes.Structure):
    content_ptr: _u64
    gpu_id: _u32
    buf_size_in_bytes: _u32


@_layout
class kfd_ioctl_dbg_wave_control_args(ctypes.Structure):
    content_ptr: _u64
    gpu_id: _u32
    buf_size_in_bytes: _u32


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
class kfd_ioctl_get_tile_config_args(ctypes.Structure):
    tile_config_ptr: _u64
    macro_tile_config_ptr: _u64
    num_tile_configs: _u32
    num_macro_tile_configs: _u32
    gpu_id: _u32
    gb_addr_config: _u32
    num_banks: _u32
    num_ranks: _u32


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


@_layout
class kfd_ioctl_alloc_queue_gws_args(ctypes.Structure):
    queue_id: _u32
    num_gws: _u32
    first_gws: _u32
    pad: _u32


@_layout
class kfd_ioctl_get_dmabuf_info_args(ctypes.Structure):
    size: _u64
    metadata_ptr: _u64
    metadata_size: _u32
    gpu_id: _u32
    flags: _u32
    dmabuf_fd: _u32


@_layout
class kfd_ioctl_import_dmabuf_args(ctypes.Structure):
    va_addr: _u64
    handle: _u64
    gpu_id: _u32
    dmabuf_fd: _u32


@_layout
class kfd_ioctl_smi_events_args(ctypes.Structure):
    gpuid: _u32
    anon_fd: _u32


# --- CRIU, SVM, XNACK -------------------------------------------------------------------------------------------------
@_layout
class kfd_ioctl_criu_args(ctypes.Structure):
    devices: _u64
    bos: _u64
    priv_data: _u64
    priv_data_size: _u64
    num_devices: _u32
    num_bos: _u32
    num_objects: _u32
    pid: _u32
    op: _u32


@_layout
class kfd_criu_device_bucket(ctypes.Structure):
    user_gpu_id: _u32
    actual_gpu_id: _u32
    drm_fd: _u32
    pad: _u32


@_layout
class kfd_criu_bo_bucket(ctypes.Structure):
    addr: _u64
    size: _u64
    offset: _u64
    restored_offset: _u64
    gpu_id: _u32
    alloc_flags: _u32
    dmabuf_fd: _u32
    pad: _u32


@_layout
class kfd_ioctl_svm_attribute(ctypes.Structure):
    type: _u32
    value: _u32


@_layout
class kfd_ioctl_svm_args(ctypes.Structure):
    """The fixed part; the C struct ends in a flexible array ``attrs[]`` of :class:`kfd_ioctl_svm_attribute`."""

    start_addr: _u64
    size: _u64
    op: _u32
    nattr: _u32


@_layout
class kfd_ioctl_set_xnack_mode_args(ctypes.Structure):
    xnack_enabled: _s32


# Every structure above, by C name (the ABI test walks this).
STRUCTS: Final[dict[str, type[ctypes.Structure]]] = {
    name: obj
    for name, obj in list(globals().items())
    if name.startswith("kfd_") and isinstance(obj, type) and issubclass(obj, ctypes.Structure)
}
