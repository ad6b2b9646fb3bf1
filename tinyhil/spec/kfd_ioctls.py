"""amdkfd ioctl request numbers (``AMDKFD_IOC_*`` of ``linux/kfd_ioctl.h``, KFD ioctl interface 1.11), the ioctl table,
and every structure of the header by C name.

The encoding (asm-generic's: number, type ``'K'`` for amdkfd, argument size, direction) is
:mod:`tinyhil.spec.linux_ioctl`'s, shared with the file-I/O seam. The argument sizes come from the ctypes structures
of :mod:`~tinyhil.spec.kfd_memory`, :mod:`~tinyhil.spec.kfd_queues`, :mod:`~tinyhil.spec.kfd_events` and
:mod:`~tinyhil.spec.kfd_process`, so a layout bug shows up as a wrong request number too.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from . import kfd_events, kfd_memory, kfd_process, kfd_queues
from .kfd_events import (
    kfd_ioctl_create_event_args,
    kfd_ioctl_destroy_event_args,
    kfd_ioctl_reset_event_args,
    kfd_ioctl_set_event_args,
    kfd_ioctl_smi_events_args,
    kfd_ioctl_wait_events_args,
)
from .kfd_memory import (
    kfd_ioctl_acquire_vm_args,
    kfd_ioctl_alloc_memory_of_gpu_args,
    kfd_ioctl_free_memory_of_gpu_args,
    kfd_ioctl_get_available_memory_args,
    kfd_ioctl_get_dmabuf_info_args,
    kfd_ioctl_get_process_apertures_args,
    kfd_ioctl_get_process_apertures_new_args,
    kfd_ioctl_import_dmabuf_args,
    kfd_ioctl_map_memory_to_gpu_args,
    kfd_ioctl_set_memory_policy_args,
    kfd_ioctl_set_scratch_backing_va_args,
    kfd_ioctl_set_xnack_mode_args,
    kfd_ioctl_svm_args,
    kfd_ioctl_unmap_memory_from_gpu_args,
)
from .kfd_process import (
    kfd_ioctl_criu_args,
    kfd_ioctl_dbg_address_watch_args,
    kfd_ioctl_dbg_register_args,
    kfd_ioctl_dbg_unregister_args,
    kfd_ioctl_dbg_wave_control_args,
    kfd_ioctl_get_clock_counters_args,
    kfd_ioctl_get_tile_config_args,
    kfd_ioctl_get_version_args,
    kfd_ioctl_set_trap_handler_args,
)
from .kfd_queues import (
    kfd_ioctl_alloc_queue_gws_args,
    kfd_ioctl_create_queue_args,
    kfd_ioctl_destroy_queue_args,
    kfd_ioctl_get_queue_wave_state_args,
    kfd_ioctl_set_cu_mask_args,
    kfd_ioctl_update_queue_args,
)
from .linux_ioctl import IocDir, ioc, ioc_nr

__all__ = [
    "AMDKFD_COMMAND_END",
    "AMDKFD_COMMAND_START",
    "AMDKFD_IOCTL_BASE",
    "IOCTLS",
    "KFD_IOCTL_MAJOR_VERSION",
    "KFD_IOCTL_MINOR_VERSION",
    "STRUCTS",
    "IoctlDef",
    "KfdIoctl",
]

KFD_IOCTL_MAJOR_VERSION: Final = 1
KFD_IOCTL_MINOR_VERSION: Final = 11

AMDKFD_IOCTL_BASE: Final = ord("K")
# Request numbers the kernel dispatches are AMDKFD_COMMAND_START <= nr < AMDKFD_COMMAND_END.
AMDKFD_COMMAND_START: Final = 0x01
AMDKFD_COMMAND_END: Final = 0x24


def _ior(nr: int, args: type[ctypes.Structure]) -> int:
    return ioc(IocDir.IOC_READ, AMDKFD_IOCTL_BASE, nr, ctypes.sizeof(args))


def _iow(nr: int, args: type[ctypes.Structure]) -> int:
    return ioc(IocDir.IOC_WRITE, AMDKFD_IOCTL_BASE, nr, ctypes.sizeof(args))


def _iowr(nr: int, args: type[ctypes.Structure]) -> int:
    return ioc(IocDir.IOC_READ | IocDir.IOC_WRITE, AMDKFD_IOCTL_BASE, nr, ctypes.sizeof(args))


class KfdIoctl(IntEnum):
    """Every request number of the header, with the header's names."""

    AMDKFD_IOC_GET_VERSION = _ior(0x01, kfd_ioctl_get_version_args)
    AMDKFD_IOC_CREATE_QUEUE = _iowr(0x02, kfd_ioctl_create_queue_args)
    AMDKFD_IOC_DESTROY_QUEUE = _iowr(0x03, kfd_ioctl_destroy_queue_args)
    AMDKFD_IOC_SET_MEMORY_POLICY = _iow(0x04, kfd_ioctl_set_memory_policy_args)
    AMDKFD_IOC_GET_CLOCK_COUNTERS = _iowr(0x05, kfd_ioctl_get_clock_counters_args)
    AMDKFD_IOC_GET_PROCESS_APERTURES = _ior(0x06, kfd_ioctl_get_process_apertures_args)
    AMDKFD_IOC_UPDATE_QUEUE = _iow(0x07, kfd_ioctl_update_queue_args)
    AMDKFD_IOC_CREATE_EVENT = _iowr(0x08, kfd_ioctl_create_event_args)
    AMDKFD_IOC_DESTROY_EVENT = _iow(0x09, kfd_ioctl_destroy_event_args)
    AMDKFD_IOC_SET_EVENT = _iow(0x0A, kfd_ioctl_set_event_args)
    AMDKFD_IOC_RESET_EVENT = _iow(0x0B, kfd_ioctl_reset_event_args)
    AMDKFD_IOC_WAIT_EVENTS = _iowr(0x0C, kfd_ioctl_wait_events_args)
    AMDKFD_IOC_DBG_REGISTER_DEPRECATED = _iow(0x0D, kfd_ioctl_dbg_register_args)
    AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED = _iow(0x0E, kfd_ioctl_dbg_unregister_args)
    AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED = _iow(0x0F, kfd_ioctl_dbg_address_watch_args)
    AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED = _iow(0x10, kfd_ioctl_dbg_wave_control_args)
    AMDKFD_IOC_SET_SCRATCH_BACKING_VA = _iowr(0x11, kfd_ioctl_set_scratch_backing_va_args)
    AMDKFD_IOC_GET_TILE_CONFIG = _iowr(0x12, kfd_ioctl_get_tile_config_args)
    AMDKFD_IOC_SET_TRAP_HANDLER = _iow(0x13, kfd_ioctl_set_trap_handler_args)
    AMDKFD_IOC_GET_PROCESS_APERTURES_NEW = _iowr(0x14, kfd_ioctl_get_process_apertures_new_args)
    AMDKFD_IOC_ACQUIRE_VM = _iow(0x15, kfd_ioctl_acquire_vm_args)
    AMDKFD_IOC_ALLOC_MEMORY_OF_GPU = _iowr(0x16, kfd_ioctl_alloc_memory_of_gpu_args)
    AMDKFD_IOC_FREE_MEMORY_OF_GPU = _iow(0x17, kfd_ioctl_free_memory_of_gpu_args)
    AMDKFD_IOC_MAP_MEMORY_TO_GPU = _iowr(0x18, kfd_ioctl_map_memory_to_gpu_args)
    AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU = _iowr(0x19, kfd_ioctl_unmap_memory_from_gpu_args)
    AMDKFD_IOC_SET_CU_MASK = _iow(0x1A, kfd_ioctl_set_cu_mask_args)
    AMDKFD_IOC_GET_QUEUE_WAVE_STATE = _iowr(0x1B, kfd_ioctl_get_queue_wave_state_args)
    AMDKFD_IOC_GET_DMABUF_INFO = _iowr(0x1C, kfd_ioctl_get_dmabuf_info_args)
    AMDKFD_IOC_IMPORT_DMABUF = _iowr(0x1D, kfd_ioctl_import_dmabuf_args)
    AMDKFD_IOC_ALLOC_QUEUE_GWS = _iowr(0x1E, kfd_ioctl_alloc_queue_gws_args)
    AMDKFD_IOC_SMI_EVENTS = _iowr(0x1F, kfd_ioctl_smi_events_args)
    AMDKFD_IOC_SVM = _iowr(0x20, kfd_ioctl_svm_args)
    AMDKFD_IOC_SET_XNACK_MODE = _iowr(0x21, kfd_ioctl_set_xnack_mode_args)
    AMDKFD_IOC_CRIU_OP = _iowr(0x22, kfd_ioctl_criu_args)
    AMDKFD_IOC_AVAILABLE_MEMORY = _iowr(0x23, kfd_ioctl_get_available_memory_args)


@dataclass(frozen=True, slots=True)
class IoctlDef:
    """One ioctl: its request number and the structure it carries."""

    request: KfdIoctl
    args: type[ctypes.Structure]

    @property
    def name(self) -> str:
        return self.request.name

    @property
    def nr(self) -> int:
        return ioc_nr(self.request)


_ARGS: Final[dict[KfdIoctl, type[ctypes.Structure]]] = {
    KfdIoctl.AMDKFD_IOC_GET_VERSION: kfd_ioctl_get_version_args,
    KfdIoctl.AMDKFD_IOC_CREATE_QUEUE: kfd_ioctl_create_queue_args,
    KfdIoctl.AMDKFD_IOC_DESTROY_QUEUE: kfd_ioctl_destroy_queue_args,
    KfdIoctl.AMDKFD_IOC_SET_MEMORY_POLICY: kfd_ioctl_set_memory_policy_args,
    KfdIoctl.AMDKFD_IOC_GET_CLOCK_COUNTERS: kfd_ioctl_get_clock_counters_args,
    KfdIoctl.AMDKFD_IOC_GET_PROCESS_APERTURES: kfd_ioctl_get_process_apertures_args,
    KfdIoctl.AMDKFD_IOC_UPDATE_QUEUE: kfd_ioctl_update_queue_args,
    KfdIoctl.AMDKFD_IOC_CREATE_EVENT: kfd_ioctl_create_event_args,
    KfdIoctl.AMDKFD_IOC_DESTROY_EVENT: kfd_ioctl_destroy_event_args,
    KfdIoctl.AMDKFD_IOC_SET_EVENT: kfd_ioctl_set_event_args,
    KfdIoctl.AMDKFD_IOC_RESET_EVENT: kfd_ioctl_reset_event_args,
    KfdIoctl.AMDKFD_IOC_WAIT_EVENTS: kfd_ioctl_wait_events_args,
    KfdIoctl.AMDKFD_IOC_DBG_REGISTER_DEPRECATED: kfd_ioctl_dbg_register_args,
    KfdIoctl.AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED: kfd_ioctl_dbg_unregister_args,
    KfdIoctl.AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED: kfd_ioctl_dbg_address_watch_args,
    KfdIoctl.AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED: kfd_ioctl_dbg_wave_control_args,
    KfdIoctl.AMDKFD_IOC_SET_SCRATCH_BACKING_VA: kfd_ioctl_set_scratch_backing_va_args,
    KfdIoctl.AMDKFD_IOC_GET_TILE_CONFIG: kfd_ioctl_get_tile_config_args,
    KfdIoctl.AMDKFD_IOC_SET_TRAP_HANDLER: kfd_ioctl_set_trap_handler_args,
    KfdIoctl.AMDKFD_IOC_GET_PROCESS_APERTURES_NEW: kfd_ioctl_get_process_apertures_new_args,
    KfdIoctl.AMDKFD_IOC_ACQUIRE_VM: kfd_ioctl_acquire_vm_args,
    KfdIoctl.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU: kfd_ioctl_alloc_memory_of_gpu_args,
    KfdIoctl.AMDKFD_IOC_FREE_MEMORY_OF_GPU: kfd_ioctl_free_memory_of_gpu_args,
    KfdIoctl.AMDKFD_IOC_MAP_MEMORY_TO_GPU: kfd_ioctl_map_memory_to_gpu_args,
    KfdIoctl.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU: kfd_ioctl_unmap_memory_from_gpu_args,
    KfdIoctl.AMDKFD_IOC_SET_CU_MASK: kfd_ioctl_set_cu_mask_args,
    KfdIoctl.AMDKFD_IOC_GET_QUEUE_WAVE_STATE: kfd_ioctl_get_queue_wave_state_args,
    KfdIoctl.AMDKFD_IOC_GET_DMABUF_INFO: kfd_ioctl_get_dmabuf_info_args,
    KfdIoctl.AMDKFD_IOC_IMPORT_DMABUF: kfd_ioctl_import_dmabuf_args,
    KfdIoctl.AMDKFD_IOC_ALLOC_QUEUE_GWS: kfd_ioctl_alloc_queue_gws_args,
    KfdIoctl.AMDKFD_IOC_SMI_EVENTS: kfd_ioctl_smi_events_args,
    KfdIoctl.AMDKFD_IOC_SVM: kfd_ioctl_svm_args,
    KfdIoctl.AMDKFD_IOC_SET_XNACK_MODE: kfd_ioctl_set_xnack_mode_args,
    KfdIoctl.AMDKFD_IOC_CRIU_OP: kfd_ioctl_criu_args,
    KfdIoctl.AMDKFD_IOC_AVAILABLE_MEMORY: kfd_ioctl_get_available_memory_args,
}

# The kernel's ioctl table, by request number (nr), AMDKFD_COMMAND_START <= nr < AMDKFD_COMMAND_END.
IOCTLS: Final[dict[int, IoctlDef]] = {ioc_nr(request): IoctlDef(request, args) for request, args in _ARGS.items()}

# Every structure of the header, by C name (the ABI test walks this).
STRUCTS: Final[dict[str, type[ctypes.Structure]]] = {
    name: obj
    for module in (kfd_memory, kfd_queues, kfd_events, kfd_process)
    for name, obj in vars(module).items()
    if name.startswith("kfd_") and isinstance(obj, type) and issubclass(obj, ctypes.Structure)
}
