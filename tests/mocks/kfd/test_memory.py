"""Memory ioctls through raw requests: VM acquire, apertures, alloc / free, map / unmap, with the kernel's errnos."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from typing import Any

import pytest

from tinyhil.mocks.kfd import MockKFD
from tinyhil.mocks.kfd.state import GPUVM_BASE, GPUVM_LIMIT, LDS_BASE, SCRATCH_BASE
from tinyhil.spec.kfd_ioctls import KfdIoctl as K
from tinyhil.spec.kfd_memory import (
    KFD_MMAP_TYPE_MMIO,
    AllocMemFlags,
    handle_gpu_id,
    kfd_ioctl_acquire_vm_args,
    kfd_ioctl_alloc_memory_of_gpu_args,
    kfd_ioctl_free_memory_of_gpu_args,
    kfd_ioctl_get_available_memory_args,
    kfd_ioctl_get_process_apertures_args,
    kfd_ioctl_get_process_apertures_new_args,
    kfd_ioctl_map_memory_to_gpu_args,
    kfd_ioctl_set_memory_policy_args,
    kfd_ioctl_set_scratch_backing_va_args,
    kfd_mmap_gpu_id,
    kfd_process_device_apertures,
)
from tinyhil.spec.kfd_process import kfd_ioctl_set_trap_handler_args

F = AllocMemFlags
VA = 0x1000_0000_0000


def _unchanged(mock: MockKFD, raw: Any, request: int, args: Any, code: int) -> None:
    before = mock.state_digest(), [gpu.port.state() for gpu in mock.gpus]
    assert raw.errno(request, args) == code
    assert (mock.state_digest(), [gpu.port.state() for gpu in mock.gpus]) == before


# --- ACQUIRE_VM ----------------------------------------------------------------------------------------------------
def test_acquire_vm_binds_a_gpu_to_its_render_node_once(mock: MockKFD, raw: Any) -> None:
    gpu_id = raw.acquire(0)
    assert mock.process.pdds[gpu_id].drm_file is not None
    again = kfd_ioctl_acquire_vm_args(drm_fd=raw.render_fds[0], gpu_id=gpu_id)
    raw.ioctl(K.AMDKFD_IOC_ACQUIRE_VM, again)  # the same file again is fine
    other = mock.fileio.open(mock.gpus[0].identity.render_path, os.O_RDWR)
    _unchanged(mock, raw, K.AMDKFD_IOC_ACQUIRE_VM, kfd_ioctl_acquire_vm_args(drm_fd=other, gpu_id=gpu_id), errno.EBUSY)


@pytest.mark.parametrize(
    ("fd_of", "gpu", "code"),
    [
        ("none", 0, errno.EINVAL),
        ("render1", 0, errno.EINVAL),
        ("render0", "bogus", errno.EINVAL),
        ("sysfs", 0, errno.EINVAL),
    ],
)
def test_acquire_vm_bad_inputs(mock: MockKFD, raw: Any, fd_of: str, gpu: Any, code: int) -> None:
    fds = {
        "none": 999_999,
        "render0": mock.fileio.open(mock.gpus[0].identity.render_path, os.O_RDWR),
        "render1": mock.fileio.open(mock.gpus[1].identity.render_path, os.O_RDWR),
        "sysfs": mock.fileio.open("/sys/devices/virtual/kfd/kfd/topology/system_properties", os.O_RDONLY),
    }
    gpu_id = 0xBEEF if gpu == "bogus" else mock.gpus[gpu].gpu_id
    _unchanged(mock, raw, K.AMDKFD_IOC_ACQUIRE_VM, kfd_ioctl_acquire_vm_args(drm_fd=fds[fd_of], gpu_id=gpu_id), code)


def test_using_a_gpu_before_acquiring_its_vm_is_enodev(mock: MockKFD, raw: Any) -> None:
    args = kfd_ioctl_alloc_memory_of_gpu_args(
        va_addr=VA, size=4096, gpu_id=raw.gpu_id(0), flags=F.KFD_IOC_ALLOC_MEM_FLAGS_VRAM
    )
    _unchanged(mock, raw, K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args, errno.ENODEV)
    policy = kfd_ioctl_set_memory_policy_args(gpu_id=raw.gpu_id(0))
    _unchanged(mock, raw, K.AMDKFD_IOC_SET_MEMORY_POLICY, policy, errno.ESRCH)


# --- apertures -----------------------------------------------------------------------------------------------------
def test_process_apertures_new_counts_then_fills(mock: MockKFD, raw: Any) -> None:
    count = raw.ioctl(K.AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, kfd_ioctl_get_process_apertures_new_args())
    assert count.num_of_nodes == 2
    table = (kfd_process_device_apertures * 2)()
    one = kfd_ioctl_get_process_apertures_new_args(
        kfd_process_device_apertures_ptr=ctypes.addressof(table), num_of_nodes=1
    )
    assert raw.ioctl(K.AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, one).num_of_nodes == 1
    assert table[0].gpu_id == raw.gpu_id(0) and table[1].gpu_id == 0
    aperture = table[0]
    assert (aperture.lds_base, aperture.lds_limit) == (LDS_BASE, LDS_BASE | 0xFFFF_FFFF)
    assert (aperture.scratch_base, aperture.scratch_limit) == (SCRATCH_BASE, SCRATCH_BASE | 0xFFFF_FFFF)
    assert (aperture.gpuvm_base, aperture.gpuvm_limit) == (GPUVM_BASE, GPUVM_LIMIT)
    bad = kfd_ioctl_get_process_apertures_new_args(kfd_process_device_apertures_ptr=8, num_of_nodes=2)
    _unchanged(mock, raw, K.AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, bad, errno.EFAULT)


def test_old_process_apertures(raw: Any) -> None:
    args = raw.ioctl(K.AMDKFD_IOC_GET_PROCESS_APERTURES, kfd_ioctl_get_process_apertures_args())
    assert args.num_of_nodes == 2 and [args.process_apertures[i].gpu_id for i in range(2)] == [
        raw.gpu_id(0),
        raw.gpu_id(1),
    ]


# --- alloc / free --------------------------------------------------------------------------------------------------
def test_vram_allocations_get_handles_drm_offsets_and_vram(mock: MockKFD, raw: Any) -> None:
    raw.acquire(0)
    first, second = raw.alloc(0, 5000, VA), raw.alloc(0, 4096, VA + 0x10000)
    assert handle_gpu_id(first.handle) == raw.gpu_id(0) and first.handle & 0xFFFF_FFFF == 0
    assert second.handle & 0xFFFF_FFFF == 1
    assert first.mmap_offset == 1 << 32 and second.mmap_offset == (1 << 32) + 0x2000  # 5000 rounds up to 2 pages
    available = raw.ioctl(K.AMDKFD_IOC_AVAILABLE_MEMORY, kfd_ioctl_get_available_memory_args(gpu_id=raw.gpu_id(0)))
    assert available.available == mock.gpus[0].port.vram_bytes - 0x3000


@pytest.mark.parametrize(
    ("flags", "size", "mmap_offset", "code"),
    [
        (0, 4096, 0, errno.EINVAL),  # no memory type
        (F.KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 0, 0, errno.EINVAL),  # zero bytes
        (F.KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 1 << 40, 0, errno.ENOMEM),  # more than the VRAM
        (F.KFD_IOC_ALLOC_MEM_FLAGS_GTT, 1 << 40, 0, errno.ENOMEM),  # more than the GTT limit
        (F.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL, 4096, 0, errno.EINVAL),  # the doorbell slice is 8 KiB
        (F.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP, 8192, 0, errno.EINVAL),  # the MMIO remap page is 4 KiB
        (F.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, 4096, 0, errno.EINVAL),  # no CPU address
        (F.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, 4096, 0x1234, errno.EINVAL),  # not page aligned
        (F.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, 4096, 0x1000, errno.EFAULT),  # not mapped in this process
    ],
)
def test_bad_allocations(mock: MockKFD, raw: Any, flags: int, size: int, mmap_offset: int, code: int) -> None:
    raw.acquire(0)
    args = kfd_ioctl_alloc_memory_of_gpu_args(va_addr=VA, size=size, gpu_id=raw.gpu_id(0), flags=flags,
                                                   mmap_offset=mmap_offset)  # fmt: skip
    _unchanged(mock, raw, K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args, code)


def test_doorbell_and_mmio_remap_allocations_report_the_kernels_offsets(raw: Any) -> None:
    raw.acquire(1)
    doorbell = raw.alloc(1, 8192, VA, F.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL)
    mmio = raw.alloc(1, 4096, VA + 0x10000, F.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP)
    assert doorbell.mmap_offset == 0xFC00_0000 + (1 << 20)
    assert mmio.mmap_offset == KFD_MMAP_TYPE_MMIO | kfd_mmap_gpu_id(raw.gpu_id(1))


def test_userptr_maps_host_memory_into_the_gpu(mock: MockKFD, raw: Any) -> None:
    raw.acquire(0)
    host = mmap.mmap(-1, 8192)
    address = ctypes.addressof(ctypes.c_char.from_buffer(host))
    args = raw.alloc(0, 8192, address, F.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, mmap_offset=address)
    assert args.mmap_offset == address
    raw.map(args.handle, [raw.gpu_id(0)])
    mock.gpus[0].port.write(address + 100, b"GPU wrote this")
    assert host[100:114] == b"GPU wrote this"


def test_free_errors(mock: MockKFD, raw: Any) -> None:
    raw.acquire(0)
    handle = raw.alloc(0, 4096, VA).handle
    raw.map(handle, [raw.gpu_id(0)])
    free = kfd_ioctl_free_memory_of_gpu_args
    _unchanged(mock, raw, K.AMDKFD_IOC_FREE_MEMORY_OF_GPU, free(handle=handle), errno.EBUSY)
    _unchanged(mock, raw, K.AMDKFD_IOC_FREE_MEMORY_OF_GPU, free(handle=handle + 5), errno.EINVAL)
    _unchanged(mock, raw, K.AMDKFD_IOC_FREE_MEMORY_OF_GPU, free(handle=(0xBEEF << 32) + 0), errno.EINVAL)


# --- map / unmap ---------------------------------------------------------------------------------------------------
def test_mapping_an_unallocated_range_or_overlapping_vas_fails_with_state_unchanged(mock: MockKFD, raw: Any) -> None:
    gpu_id = raw.acquire(0)
    first = raw.alloc(0, 0x4000, VA).handle
    raw.map(first, [gpu_id])
    overlapping = raw.alloc(0, 0x1000, VA + 0x3000).handle
    for handle, code in ((overlapping, errno.EINVAL), (first + 9, errno.ENOMEM), ((0xBEEF << 32) | 0, errno.EINVAL)):
        args, _ids = raw.map_args(handle, [gpu_id])
        _unchanged(mock, raw, K.AMDKFD_IOC_MAP_MEMORY_TO_GPU, args, code)
    assert list(mock.gpus[0].port.mappings) == [VA]


@pytest.mark.parametrize(
    ("va", "why"), [(VA + 0x800, "unaligned"), (0, "VA 0"), (GPUVM_LIMIT - 0xFFF, "past the aperture")]
)
def test_mapping_outside_the_gpuvm_aperture_is_einval(mock: MockKFD, raw: Any, va: int, why: str) -> None:
    gpu_id = raw.acquire(0)
    handle = raw.alloc(0, 0x2000, va).handle
    args, _ids = raw.map_args(handle, [gpu_id])
    _unchanged(mock, raw, K.AMDKFD_IOC_MAP_MEMORY_TO_GPU, args, errno.EINVAL)


def test_map_reports_partial_success_in_n_success(mock: MockKFD, raw: Any) -> None:
    gpu0 = raw.acquire(0)
    handle = raw.alloc(0, 0x1000, VA).handle
    args, _ids = raw.map_args(handle, [gpu0, raw.gpu_id(1)])  # GPU 1 has no VM yet
    assert raw.errno(K.AMDKFD_IOC_MAP_MEMORY_TO_GPU, args) == errno.ENODEV
    assert args.n_success == 1 and list(mock.gpus[0].port.mappings) == [VA]
    raw.acquire(1)
    raw.ioctl(K.AMDKFD_IOC_MAP_MEMORY_TO_GPU, args)  # resume from n_success
    assert args.n_success == 2 and list(mock.gpus[1].port.mappings) == [VA]
    raw.ioctl(K.AMDKFD_IOC_MAP_MEMORY_TO_GPU, raw.map_args(handle, [gpu0])[0])  # mapping again is a no-op


def test_map_and_unmap_argument_errors(mock: MockKFD, raw: Any) -> None:
    gpu_id = raw.acquire(0)
    handle = raw.alloc(0, 0x1000, VA).handle
    cases = [
        (kfd_ioctl_map_memory_to_gpu_args(handle=handle, device_ids_array_ptr=8, n_devices=1), errno.EFAULT),
        (kfd_ioctl_map_memory_to_gpu_args(handle=handle, n_devices=1, n_success=2), errno.EINVAL),
        (kfd_ioctl_map_memory_to_gpu_args(handle=handle, n_devices=1 << 31), errno.ENOMEM),
    ]
    for args, code in cases:
        _unchanged(mock, raw, K.AMDKFD_IOC_MAP_MEMORY_TO_GPU, args, code)
    unmap, _ids = raw.map_args(handle, [gpu_id], unmap=True)
    _unchanged(mock, raw, K.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, unmap, errno.EINVAL)  # not mapped
    unknown, _ids2 = raw.map_args(handle + 3, [gpu_id], unmap=True)
    _unchanged(mock, raw, K.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, unknown, errno.ENOMEM)


def test_unmap_then_free_releases_vram_and_offsets(mock: MockKFD, raw: Any) -> None:
    gpu_id = raw.acquire(0)
    handle = raw.alloc(0, 0x3000, VA).handle
    raw.map(handle, [gpu_id])
    raw.ioctl(K.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, raw.map_args(handle, [gpu_id], unmap=True)[0])
    raw.ioctl(K.AMDKFD_IOC_FREE_MEMORY_OF_GPU, kfd_ioctl_free_memory_of_gpu_args(handle=handle))
    assert mock.gpus[0].vram.free_bytes == mock.gpus[0].port.vram_bytes and not mock.gpus[0].port.mappings
    assert raw.alloc(0, 0x1000, VA).mmap_offset == 1 << 32


def test_memory_policy_and_per_gpu_settings(mock: MockKFD, raw: Any) -> None:
    gpu_id = raw.acquire(0)
    raw.ioctl(K.AMDKFD_IOC_SET_MEMORY_POLICY, kfd_ioctl_set_memory_policy_args(gpu_id=gpu_id, default_policy=1,
              alternate_aperture_base=0x1000, alternate_aperture_size=0x2000))  # fmt: skip
    pdd = mock.process.pdds[gpu_id]
    assert (pdd.default_policy, pdd.alternate_aperture) == (1, (0x1000, 0x2000))
    bad = kfd_ioctl_set_memory_policy_args(gpu_id=gpu_id, alternate_policy=2)
    _unchanged(mock, raw, K.AMDKFD_IOC_SET_MEMORY_POLICY, bad, errno.EINVAL)
    raw.ioctl(K.AMDKFD_IOC_SET_SCRATCH_BACKING_VA, kfd_ioctl_set_scratch_backing_va_args(gpu_id=gpu_id, va_addr=0x5000))
    raw.ioctl(K.AMDKFD_IOC_SET_TRAP_HANDLER, kfd_ioctl_set_trap_handler_args(gpu_id=gpu_id, tba_addr=1, tma_addr=2))
    assert (pdd.scratch_backing_va, pdd.trap_handler) == (0x5000, (1, 2))
