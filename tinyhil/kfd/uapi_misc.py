"""Structures of the amdkfd ioctls neither the reference client nor MOCKKFD implements (queue tuning, the deprecated
debugger, tile config, GWS, dma-buf, SMI events, CRIU, SVM): defined for their request numbers and the ABI test.

Layouts follow ``linux/kfd_ioctl.h`` (KFD 1.11) byte for byte, with the C names.
"""

from __future__ import annotations

import ctypes

from tinyhil.kfd._layout import layout as _layout
from tinyhil.kfd._layout import u32 as _u32
from tinyhil.kfd._layout import u64 as _u64

__all__ = [
    "kfd_criu_bo_bucket",
    "kfd_criu_device_bucket",
    "kfd_ioctl_alloc_queue_gws_args",
    "kfd_ioctl_criu_args",
    "kfd_ioctl_dbg_address_watch_args",
    "kfd_ioctl_dbg_register_args",
    "kfd_ioctl_dbg_unregister_args",
    "kfd_ioctl_dbg_wave_control_args",
    "kfd_ioctl_get_dmabuf_info_args",
    "kfd_ioctl_get_queue_wave_state_args",
    "kfd_ioctl_get_tile_config_args",
    "kfd_ioctl_import_dmabuf_args",
    "kfd_ioctl_set_cu_mask_args",
    "kfd_ioctl_smi_events_args",
    "kfd_ioctl_svm_args",
    "kfd_ioctl_svm_attribute",
    "kfd_ioctl_update_queue_args",
]


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
