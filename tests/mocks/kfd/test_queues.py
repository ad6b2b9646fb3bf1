"""Queue ioctls and the doorbell page: validation errnos, ids, doorbell offsets, and stores that ring the GPU."""

from __future__ import annotations

import ctypes
import errno
import mmap
from typing import Any

import pytest

from tinyhil.mocks.kfd import MockKFD
from tinyhil.spec.kfd_ioctls import KfdIoctl as K
from tinyhil.spec.kfd_memory import (
    KFD_MMAP_TYPE_DOORBELL,
    AllocMemFlags,
    kfd_ioctl_set_xnack_mode_args,
    kfd_mmap_gpu_id,
)
from tinyhil.spec.kfd_queues import (
    KFD_DOORBELL_PROCESS_SLICE_BYTES,
    QueueType,
    kfd_ioctl_create_queue_args,
    kfd_ioctl_destroy_queue_args,
)

F = AllocMemFlags
Q = QueueType
VA = 0x1000_0000_0000


@pytest.fixture
def ring(mock: MockKFD, raw: Any) -> dict[str, int]:
    """GPU 0 with its VM, a mapped 64 KiB ring buffer and a mapped host page for the pointers."""
    gpu_id = raw.acquire(0)
    raw.map(raw.alloc(0, 0x10000, VA).handle, [gpu_id])
    host = mmap.mmap(-1, 4096)
    address = ctypes.addressof(ctypes.c_char.from_buffer(host))
    raw.map(raw.alloc(0, 4096, address, F.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, mmap_offset=address).handle, [gpu_id])
    raw.host = host  # keep the pointer page alive
    return {"gpu_id": gpu_id, "ring": VA, "rptr": address, "wptr": address + 8}


def _create(ring: dict[str, int], **fields: int) -> kfd_ioctl_create_queue_args:
    values = {"ring_base_address": ring["ring"], "ring_size": 0x10000, "gpu_id": ring["gpu_id"],
              "queue_type": Q.KFD_IOC_QUEUE_TYPE_SDMA, "queue_percentage": 100, "read_pointer_address": ring["rptr"],
              "write_pointer_address": ring["wptr"]} | fields  # fmt: skip
    return kfd_ioctl_create_queue_args(**values)


def test_create_queue_returns_id_and_doorbell_offset(mock: MockKFD, raw: Any, ring: dict[str, int]) -> None:
    sdma = raw.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring))
    compute = raw.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring, queue_type=Q.KFD_IOC_QUEUE_TYPE_COMPUTE))
    assert (sdma.queue_id, compute.queue_id) == (0, 1)
    assert sdma.doorbell_offset == KFD_MMAP_TYPE_DOORBELL | kfd_mmap_gpu_id(ring["gpu_id"]) | 0
    assert compute.doorbell_offset == KFD_MMAP_TYPE_DOORBELL | kfd_mmap_gpu_id(ring["gpu_id"]) | 8
    created = mock.gpus[0].port.queues
    assert [q.kind.name for q in created] == ["SDMA", "COMPUTE"] and [q.doorbell_index for q in created] == [0, 1]
    assert (created[0].ring_va, created[0].ring_bytes, created[0].rptr_va, created[0].wptr_va) == (
        ring["ring"], 0x10000, ring["rptr"], ring["wptr"])  # fmt: skip


def test_small_rings_are_clamped_to_1024_bytes(mock: MockKFD, raw: Any, ring: dict[str, int]) -> None:
    args = raw.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring, ring_size=256))
    assert args.ring_size == 1024 and mock.gpus[0].port.queues[0].ring_bytes == 1024


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"queue_percentage": 101}, errno.EINVAL),
        ({"queue_priority": 16}, errno.EINVAL),
        ({"ring_size": 0x3000}, errno.EINVAL),  # not a power of two
        ({"ring_base_address": 0x7FFF_FFFF_FFF9}, errno.EFAULT),  # beyond user space
        ({"write_pointer_address": 1 << 48}, errno.EFAULT),
        ({"queue_type": 9}, 524),  # the kernel's ENOTSUPP reaches userspace
        ({"queue_type": Q.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL}, errno.EINVAL),  # the fake GPU has no AQL processor
        ({"gpu_id": 0xBEEF}, errno.EINVAL),
        ({"ring_base_address": VA + 0x8000}, errno.EINVAL),  # the ring runs past its buffer
        ({"read_pointer_address": VA + 0x20000}, errno.EINVAL),  # nothing mapped there
    ],
)
def test_create_queue_bad_inputs(
    mock: MockKFD, raw: Any, ring: dict[str, int], fields: dict[str, int], code: int
) -> None:
    before = mock.state_digest(), mock.gpus[0].port.state()
    assert raw.errno(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring, **fields)) == code
    assert (mock.state_digest(), mock.gpus[0].port.state()) == before


def test_a_gpu_without_a_vm_cannot_get_queues(raw: Any, ring: dict[str, int]) -> None:
    assert raw.errno(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring, gpu_id=raw.gpu_id(1))) == errno.ESRCH


def test_sdma_queues_are_limited_by_the_topology(mock: MockKFD, raw: Any, ring: dict[str, int]) -> None:
    limit = mock.gpus[0].sdma_queue_limit
    for _ in range(limit):
        raw.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring))
    assert raw.errno(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring)) == errno.ENOMEM
    raw.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring, queue_type=Q.KFD_IOC_QUEUE_TYPE_COMPUTE))


def test_doorbell_stores_ring_the_queue_and_free_slots_are_dropped(
    mock: MockKFD, raw: Any, ring: dict[str, int]
) -> None:
    fake = mock.gpus[0].port
    queue = raw.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring))
    second = raw.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring))
    base = queue.doorbell_offset & ~(KFD_DOORBELL_PROCESS_SLICE_BYTES - 1)
    page = mock.fileio.mmap(raw.fd, KFD_DOORBELL_PROCESS_SLICE_BYTES, base)
    page[0:8] = (0x40).to_bytes(8, "little")
    page[8:12] = (0x10).to_bytes(4, "little")  # a 32-bit store rings with the slot's whole u64
    page[16:24] = (5).to_bytes(8, "little")  # slot 2 has no queue
    page[0:16] = (0x80).to_bytes(8, "little") + (0x20).to_bytes(8, "little")  # one store, two doorbells
    assert fake.doorbells == [(0, 0x40), (1, 0x10), (0, 0x80), (1, 0x20)]
    assert second.doorbell_offset - base == 8


def test_destroy_queue_frees_its_id_and_doorbell(mock: MockKFD, raw: Any, ring: dict[str, int]) -> None:
    first = raw.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring))
    raw.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring))
    raw.ioctl(K.AMDKFD_IOC_DESTROY_QUEUE, kfd_ioctl_destroy_queue_args(queue_id=first.queue_id))
    assert [q.doorbell_index for q in mock.gpus[0].port.queues] == [1]
    again = raw.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring))
    assert (again.queue_id, again.doorbell_offset & 0xFFF) == (0, 0)
    assert raw.errno(K.AMDKFD_IOC_DESTROY_QUEUE, kfd_ioctl_destroy_queue_args(queue_id=7)) == errno.EINVAL


def test_xnack_mode_can_be_queried_and_only_changed_without_queues(raw: Any, ring: dict[str, int]) -> None:
    assert raw.ioctl(K.AMDKFD_IOC_SET_XNACK_MODE, kfd_ioctl_set_xnack_mode_args(xnack_enabled=-1)).xnack_enabled == 0
    assert raw.errno(K.AMDKFD_IOC_SET_XNACK_MODE, kfd_ioctl_set_xnack_mode_args(xnack_enabled=1)) == errno.EPERM
    raw.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring))
    assert raw.errno(K.AMDKFD_IOC_SET_XNACK_MODE, kfd_ioctl_set_xnack_mode_args(xnack_enabled=0)) == errno.EBUSY


def test_process_exit_destroys_queues_and_unmaps(mock: MockKFD, raw: Any, ring: dict[str, int]) -> None:
    raw.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, _create(ring))
    mock.close()
    assert mock.gpus[0].port.queues == [] and mock.gpus[0].port.mappings == {} and not mock.has_process
