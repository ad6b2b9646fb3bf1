"""The amdkfd event ABI (``linux/kfd_ioctl.h``, KFD ioctl interface 1.11; ``kfd_events.h`` and
``kfd_int_process_v11.c`` for the signal page and interrupt ids): event types, the event ioctls' structures, the
exception data of memory and hardware events, and the signal page's slots.

Structures keep their C names and field names verbatim, laid out byte for byte as the C compiler lays them out on
Linux (``tests/spec/test_kfd_abi.py`` compares them with the installed header); request numbers are in
:mod:`tinyhil.spec.kfd_ioctls`.
"""

from __future__ import annotations

import ctypes
from enum import IntEnum
from typing import TYPE_CHECKING, Final

from .ctypes_layout import layout, u32, u64

__all__ = [
    "EVENT_ID_BITS_END_OF_PIPE",
    "EVENT_ID_BITS_SDMA_TRAP",
    "KFD_EVENT_TIMEOUT_IMMEDIATE",
    "KFD_EVENT_TIMEOUT_INFINITE",
    "KFD_FIRST_NONSIGNAL_EVENT_ID",
    "KFD_SIGNAL_EVENT_LIMIT",
    "KFD_SIGNAL_PAGE_BYTES",
    "UNSIGNALED_EVENT_SLOT",
    "EventType",
    "HwExceptionResetCause",
    "HwExceptionResetType",
    "MemErrorType",
    "WaitResult",
    "kfd_event_data",
    "kfd_hsa_hw_exception_data",
    "kfd_hsa_memory_exception_data",
    "kfd_ioctl_create_event_args",
    "kfd_ioctl_destroy_event_args",
    "kfd_ioctl_reset_event_args",
    "kfd_ioctl_set_event_args",
    "kfd_ioctl_smi_events_args",
    "kfd_ioctl_wait_events_args",
    "kfd_memory_exception_failure",
]

KFD_SIGNAL_EVENT_LIMIT: Final = 4096


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


@layout
class kfd_ioctl_create_event_args(ctypes.Structure):
    event_page_offset: u64
    event_trigger_data: u32
    event_type: u32
    auto_reset: u32
    node_id: u32
    event_id: u32
    event_slot_index: u32


@layout
class kfd_ioctl_destroy_event_args(ctypes.Structure):
    event_id: u32
    pad: u32


@layout
class kfd_ioctl_set_event_args(ctypes.Structure):
    event_id: u32
    pad: u32


@layout
class kfd_ioctl_reset_event_args(ctypes.Structure):
    event_id: u32
    pad: u32


@layout
class kfd_memory_exception_failure(ctypes.Structure):
    NotPresent: u32
    ReadOnly: u32
    NoExecute: u32
    imprecise: u32


@layout
class kfd_hsa_memory_exception_data(ctypes.Structure):
    failure: kfd_memory_exception_failure
    va: u64
    gpu_id: u32
    ErrorType: u32


@layout
class kfd_hsa_hw_exception_data(ctypes.Structure):
    reset_type: u32
    reset_cause: u32
    memory_lost: u32
    gpu_id: u32


@layout
class _kfd_event_data_union(ctypes.Union):
    memory_exception_data: kfd_hsa_memory_exception_data
    hw_exception_data: kfd_hsa_hw_exception_data


@layout
class kfd_event_data(ctypes.Structure):
    """One entry of the array ``kfd_ioctl_wait_events_args.events_ptr`` points to; the union is anonymous in C."""

    _anonymous_ = ("_union",)
    _union: _kfd_event_data_union
    kfd_event_data_ext: u64
    event_id: u32
    pad: u32

    if TYPE_CHECKING:
        memory_exception_data: kfd_hsa_memory_exception_data
        hw_exception_data: kfd_hsa_hw_exception_data


@layout
class kfd_ioctl_wait_events_args(ctypes.Structure):
    events_ptr: u64
    num_events: u32
    wait_for_all: u32
    timeout: u32
    wait_result: u32


@layout
class kfd_ioctl_smi_events_args(ctypes.Structure):
    gpuid: u32
    anon_fd: u32


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
