"""The amdkfd process-level ABI (``linux/kfd_ioctl.h``, KFD ioctl interface 1.11): version, clock counters, trap
handler, the deprecated debugger, tile config and CRIU structures.

Structures keep their C names and field names verbatim, laid out byte for byte as the C compiler lays them out on
Linux (``tests/spec/test_kfd_abi.py`` compares them with the installed header); request numbers are in
:mod:`tinyhil.spec.kfd_ioctls`.
"""

from __future__ import annotations

import ctypes
from typing import Final

from .ctypes_layout import layout, u32, u64

__all__ = [
    "KFD_INVALID_FD",
    "kfd_criu_bo_bucket",
    "kfd_criu_device_bucket",
    "kfd_ioctl_criu_args",
    "kfd_ioctl_dbg_address_watch_args",
    "kfd_ioctl_dbg_register_args",
    "kfd_ioctl_dbg_unregister_args",
    "kfd_ioctl_dbg_wave_control_args",
    "kfd_ioctl_get_clock_counters_args",
    "kfd_ioctl_get_tile_config_args",
    "kfd_ioctl_get_version_args",
    "kfd_ioctl_set_trap_handler_args",
]

KFD_INVALID_FD: Final = 0xFFFFFFFF


@layout
class kfd_ioctl_get_version_args(ctypes.Structure):
    major_version: u32
    minor_version: u32


@layout
class kfd_ioctl_get_clock_counters_args(ctypes.Structure):
    gpu_clock_counter: u64
    cpu_clock_counter: u64
    system_clock_counter: u64
    system_clock_freq: u64
    gpu_id: u32
    pad: u32


@layout
class kfd_ioctl_set_trap_handler_args(ctypes.Structure):
    tba_addr: u64
    tma_addr: u64
    gpu_id: u32
    pad: u32


@layout
class kfd_ioctl_dbg_register_args(ctypes.Structure):
    gpu_id: u32
    pad: u32


@layout
class kfd_ioctl_dbg_unregister_args(ctypes.Structure):
    gpu_id: u32
    pad: u32


@layout
class kfd_ioctl_dbg_address_watch_args(ctypes.Structure):
    content_ptr: u64
    gpu_id: u32
    buf_size_in_bytes: u32


@layout
class kfd_ioctl_dbg_wave_control_args(ctypes.Structure):
    content_ptr: u64
    gpu_id: u32
    buf_size_in_bytes: u32


@layout
class kfd_ioctl_get_tile_config_args(ctypes.Structure):
    tile_config_ptr: u64
    macro_tile_config_ptr: u64
    num_tile_configs: u32
    num_macro_tile_configs: u32
    gpu_id: u32
    gb_addr_config: u32
    num_banks: u32
    num_ranks: u32


@layout
class kfd_ioctl_criu_args(ctypes.Structure):
    devices: u64
    bos: u64
    priv_data: u64
    priv_data_size: u64
    num_devices: u32
    num_bos: u32
    num_objects: u32
    pid: u32
    op: u32


@layout
class kfd_criu_device_bucket(ctypes.Structure):
    user_gpu_id: u32
    actual_gpu_id: u32
    drm_fd: u32
    pad: u32


@layout
class kfd_criu_bo_bucket(ctypes.Structure):
    addr: u64
    size: u64
    offset: u64
    restored_offset: u64
    gpu_id: u32
    alloc_flags: u32
    dmabuf_fd: u32
    pad: u32
