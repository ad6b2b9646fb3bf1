"""Fixtures for MOCKKFD's tests: fake GPUs on one event kernel, a MockKFD over them, a KFD client on its seam."""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.scripts import load_script

from tinyhil.emulators.kernel import EventKernel
from tinyhil.kfd import KFD
from tinyhil.mocks.kfd import MockKFD
from tinyhil.spec.kfd_ioctls import KfdIoctl
from tinyhil.spec.kfd_memory import (
    AllocMemFlags,
    kfd_ioctl_acquire_vm_args,
    kfd_ioctl_alloc_memory_of_gpu_args,
    kfd_ioctl_map_memory_to_gpu_args,
    kfd_ioctl_unmap_memory_from_gpu_args,
)


def load_fake_gpu() -> ModuleType:
    """``fake_gpu.py`` as one shared module (test folders are not packages; tests/kfd loads it the same way)."""
    return load_script(Path(__file__).with_name("fake_gpu.py"), "tinyhil_tests_kfd_fake_gpu")


@pytest.fixture
def kernel() -> EventKernel:
    return EventKernel(seed=1)


@pytest.fixture
def make_mock(kernel: EventKernel) -> Iterator[Callable[..., MockKFD]]:
    """``make_mock(110000, 120001, vram_bytes=...)``: a MockKFD over one fake GPU per gfx_target_version."""
    made: list[MockKFD] = []
    fake_gpu = load_fake_gpu()

    def make(*versions: int, **options: Any) -> MockKFD:
        vram_bytes = options.pop("vram_bytes", 64 << 20)
        gpus = [fake_gpu.FakeGpu(kernel, gfx_target_version=v, vram_bytes=vram_bytes) for v in versions or (110000,)]
        mock = MockKFD(gpus, **options)
        made.append(mock)
        return mock

    yield make
    for mock in made:
        mock.close()


@pytest.fixture
def mock(make_mock: Callable[..., MockKFD]) -> MockKFD:
    return make_mock(110000, 120001)


@pytest.fixture
def kfd(mock: MockKFD) -> Iterator[KFD]:
    client = KFD(mock.fileio)
    yield client
    client.close()


VRAM = int(AllocMemFlags.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | AllocMemFlags.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)
GTT = int(AllocMemFlags.KFD_IOC_ALLOC_MEM_FLAGS_GTT | AllocMemFlags.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)
VA = 0x1000_0000_0000


class RawKfd:
    """Raw ioctls on a MockKFD's /dev/kfd, for tests that bypass the client."""

    def __init__(self, mock: MockKFD) -> None:
        self.mock = mock
        self.fd = mock.fileio.open("/dev/kfd", os.O_RDWR)
        self.render_fds: dict[int, int] = {}

    def gpu_id(self, index: int) -> int:
        return self.mock.gpus[index].gpu_id

    def ioctl(self, request: int, args: Any) -> Any:
        self.mock.fileio.ioctl(self.fd, request, args)
        return args

    def errno(self, request: int, args: Any) -> int:
        """The errno the request fails with (the test fails if it succeeds)."""
        try:
            self.mock.fileio.ioctl(self.fd, request, args)
        except OSError as exc:
            return int(exc.errno or 0)
        raise AssertionError(f"request {request:#x} succeeded, expected an error")

    def acquire(self, index: int) -> int:
        """Open GPU ``index``'s render node and acquire its VM; return the gpu_id."""
        gpu = self.mock.gpus[index]
        fd = self.mock.fileio.open(gpu.identity.render_path, os.O_RDWR)
        self.render_fds[index] = fd
        self.ioctl(KfdIoctl.AMDKFD_IOC_ACQUIRE_VM, kfd_ioctl_acquire_vm_args(drm_fd=fd, gpu_id=gpu.gpu_id))
        return gpu.gpu_id

    def alloc(self, index: int, size: int, va: int, flags: int = VRAM, mmap_offset: int = 0) -> Any:
        args = kfd_ioctl_alloc_memory_of_gpu_args(
            va_addr=va, size=size, gpu_id=self.gpu_id(index), flags=flags, mmap_offset=mmap_offset
        )
        return self.ioctl(KfdIoctl.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)

    def map_args(self, handle: int, gpu_ids: list[int], *, unmap: bool = False) -> tuple[Any, Any]:
        ids = (ctypes.c_uint32 * max(len(gpu_ids), 1))(*gpu_ids)
        kind = kfd_ioctl_unmap_memory_from_gpu_args if unmap else kfd_ioctl_map_memory_to_gpu_args
        args = kind(handle=handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=len(gpu_ids))
        args.keepalive = ids  # the kernel reads the array through the raw pointer: it must outlive the call
        return args, ids

    def map(self, handle: int, gpu_ids: list[int]) -> Any:
        args, _ids = self.map_args(handle, gpu_ids)
        return self.ioctl(KfdIoctl.AMDKFD_IOC_MAP_MEMORY_TO_GPU, args)


@pytest.fixture
def raw(mock: MockKFD) -> RawKfd:
    return RawKfd(mock)


@pytest.fixture
def helpers() -> ModuleType:
    """This module, for the helpers and constants above (tests cannot import a conftest)."""
    return sys.modules[__name__]
