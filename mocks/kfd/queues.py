"""Queue ioctls (CREATE_QUEUE / DESTROY_QUEUE) and the doorbell page behind ``mmap(/dev/kfd, doorbell offset)``.

Doorbell frame (per GPU, per process; SOC15 layout)::

    byte offset 8*i .. 8*i+7    doorbell i (u64, little endian); CREATE_QUEUE's doorbell_offset has 8*i in its
                                low 13 bits, KFD_MMAP_TYPE_DOORBELL in bits 62-63 and the gpu_id in bits 46-61

A store into slot i of a queue rings the GPU's doorbell i with the slot's u64 value; stores to free slots are
dropped, as by the hardware.

An AQL queue (KFD_IOC_QUEUE_TYPE_COMPUTE_AQL) is a compute queue whose packet processor reads HSA packets
(``tinyhil.emulators.amdgpu.aql``): its pointers are the ``amd_queue_t`` read and write dispatch ids, in packets,
and its doorbell carries the write index. Only the emulated ``AmdGpu`` has one; another GPU port refuses it.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Final

from tinyhil.emulators.amdgpu import AmdGpu
from tinyhil.emulators.amdgpu.aql import serve_aql
from tinyhil.errors import InvalidArgument, TinyHilError
from tinyhil.mocks.kfd._errno import ENOTSUPP, LOG, fail
from tinyhil.mocks.kfd.gpu_port import QueueKind
from tinyhil.mocks.kfd.state import GpuDevice, Process, ProcessDevice, Queue, lowest_free
from tinyhil.spec.kfd_memory import KFD_MMAP_TYPE_DOORBELL, kfd_mmap_gpu_id
from tinyhil.spec.kfd_queues import (
    KFD_DOORBELL_BYTES,
    KFD_MAX_NUM_OF_QUEUES_PER_PROCESS,
    KFD_MAX_QUEUE_PERCENTAGE,
    KFD_MAX_QUEUE_PRIORITY,
    KFD_MIN_QUEUE_RING_SIZE,
    QueueType,
    kfd_ioctl_create_queue_args,
    kfd_ioctl_destroy_queue_args,
)

if TYPE_CHECKING:
    from tinyhil.mocks.kfd.device import MockKFD

__all__ = ["TASK_SIZE", "QueueIoctls"]

# The top of x86-64 user space: access_ok() rejects pointers whose range ends above it.
TASK_SIZE: Final = 0x7FFF_FFFF_F000
_Q = QueueType
_KINDS: Final[dict[int, QueueKind]] = {
    _Q.KFD_IOC_QUEUE_TYPE_COMPUTE: QueueKind.COMPUTE,
    _Q.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL: QueueKind.COMPUTE,  # a compute queue whose packet processor reads AQL
    _Q.KFD_IOC_QUEUE_TYPE_SDMA: QueueKind.SDMA,
    _Q.KFD_IOC_QUEUE_TYPE_SDMA_XGMI: QueueKind.SDMA,
}
_POINTER_BYTES: Final = 8
_PERCENTAGE_MASK: Final = 0xFF


def _access_ok(address: int, nbytes: int) -> bool:
    return address + nbytes <= TASK_SIZE


class QueueIoctls:
    """The queue half of the ioctl table, and doorbell stores."""

    def __init__(self, kfd: MockKFD) -> None:
        self.kfd = kfd

    def _op_create_queue(self, args: kfd_ioctl_create_queue_args) -> None:
        what = "AMDKFD_IOC_CREATE_QUEUE"
        if args.queue_percentage & _PERCENTAGE_MASK > KFD_MAX_QUEUE_PERCENTAGE:
            fail(errno.EINVAL, f"{what}: queue_percentage={args.queue_percentage & _PERCENTAGE_MASK}, expected <= 100")
        if args.queue_priority > KFD_MAX_QUEUE_PRIORITY:
            fail(errno.EINVAL, f"{what}: queue_priority={args.queue_priority}, expected <= 15")
        if args.ring_base_address and not _access_ok(args.ring_base_address, _POINTER_BYTES):
            fail(errno.EFAULT, f"{what}: ring_base_address={args.ring_base_address:#x} is not a user address")
        if args.ring_size & (args.ring_size - 1):
            fail(errno.EINVAL, f"{what}: ring_size={args.ring_size:#x}, expected a power of two (or 0)")
        args.ring_size = max(args.ring_size, KFD_MIN_QUEUE_RING_SIZE)
        for name in ("read_pointer_address", "write_pointer_address", "eop_buffer_address", "ctx_save_restore_address"):
            address = getattr(args, name)
            if (address or name.endswith("pointer_address")) and not _access_ok(address, 4):
                fail(errno.EFAULT, f"{what}: {name}={address:#x} is not a user address")
        kind = _KINDS.get(args.queue_type)
        if kind is None:
            fail(ENOTSUPP, f"{what}: queue_type={args.queue_type}, expected 0 (COMPUTE), 1 (SDMA), 2 (COMPUTE_AQL) "
                 "or 3 (SDMA_XGMI)")  # fmt: skip
        pdd = self.kfd.memory.pdd(args.gpu_id, what)
        self.kfd.memory.bind(pdd, what, errno.ESRCH)
        self._check_buffers(what, pdd, args)
        gpu = pdd.gpu
        aql = args.queue_type == _Q.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL
        if aql and not isinstance(gpu.port, AmdGpu):
            fail(errno.EINVAL, f"{what}: gpu_id={gpu.gpu_id:#x} is a {type(gpu.port).__name__}, which has no AQL "
                 "packet processor (the emulated AmdGpu has one)")  # fmt: skip
        process = self.kfd.process
        if kind is QueueKind.SDMA:
            in_use = sum(q.kind is QueueKind.SDMA and q.gpu_id == gpu.gpu_id for q in process.queues.values())
            if in_use >= gpu.sdma_queue_limit:
                fail(
                    errno.ENOMEM, f"{what}: all {gpu.sdma_queue_limit} SDMA queues of gpu_id={gpu.gpu_id:#x} are in use"
                )
        queue_id = lowest_free(process.queues, 0, KFD_MAX_NUM_OF_QUEUES_PER_PROCESS)
        doorbell_id = lowest_free(pdd.doorbells, 0, KFD_MAX_NUM_OF_QUEUES_PER_PROCESS)
        if queue_id is None or doorbell_id is None:
            fail(errno.ENOMEM, f"{what}: the process already has {KFD_MAX_NUM_OF_QUEUES_PER_PROCESS} queues")
        try:
            gpu_queue = gpu.port.create_queue(
                kind,
                ring_va=args.ring_base_address,
                ring_bytes=args.ring_size,
                rptr_va=args.read_pointer_address,
                wptr_va=args.write_pointer_address,
                doorbell_index=doorbell_id,
            )
        except InvalidArgument as exc:
            fail(errno.EINVAL, f"{what}: the GPU refused the queue: {exc}")
        except TinyHilError as exc:
            fail(errno.EIO, f"{what}: the GPU failed to create the queue: {exc}")
        if aql:
            serve_aql(gpu_queue)  # a fresh compute queue, its ring a power of two >= 1 KiB: always accepted
        queue = Queue(queue_id, gpu.gpu_id, kind, doorbell_id, args.ring_base_address, args.ring_size,
                      args.read_pointer_address, args.write_pointer_address, gpu_queue)  # fmt: skip
        queue.hung_by = self.kfd.injected.queue_hangs(gpu.identity.index, kind)
        process.queues[queue_id] = queue
        pdd.doorbells[doorbell_id] = queue
        args.queue_id = queue_id
        args.doorbell_offset = KFD_MMAP_TYPE_DOORBELL | kfd_mmap_gpu_id(gpu.gpu_id) | doorbell_id * KFD_DOORBELL_BYTES

    def _check_buffers(self, what: str, pdd: ProcessDevice, args: kfd_ioctl_create_queue_args) -> None:
        """Like ``kfd_queue_acquire_buffers``: the ring and both pointers must lie in buffers mapped on this GPU."""
        gpu_id = pdd.gpu.gpu_id
        buffers = [(args.ring_base_address, args.ring_size, "ring"), (args.read_pointer_address, _POINTER_BYTES,
                   "read pointer"), (args.write_pointer_address, _POINTER_BYTES, "write pointer")]  # fmt: skip
        mapped = [a for p in self.kfd.process.pdds.values() for a in p.allocations.values() if gpu_id in a.mapped_on]
        for va, nbytes, name in buffers:
            if not any(allocation.contains(va, nbytes) for allocation in mapped):
                fail(
                    errno.EINVAL,
                    f"{what}: {name} {va:#x}+{nbytes:#x} is not inside one buffer mapped on gpu_id={gpu_id:#x}",
                )

    def _op_destroy_queue(self, args: kfd_ioctl_destroy_queue_args) -> None:
        queue = self.kfd.process.queues.get(args.queue_id)
        if queue is None:
            fail(errno.EINVAL, f"AMDKFD_IOC_DESTROY_QUEUE: queue_id={args.queue_id} matches no queue of this process")
        self.destroy(queue)

    def destroy(self, queue: Queue, process: Process | None = None) -> None:
        """Destroy ``queue`` of ``process`` (default: the calling process's)."""
        process = self.kfd.process if process is None else process
        pdd = process.pdds[queue.gpu_id]
        pdd.gpu.port.destroy_queue(queue.gpu_queue)
        del pdd.doorbells[queue.doorbell_id]
        del process.queues[queue.queue_id]

    def doorbell_written(self, gpu: GpuDevice, offset: int, nbytes: int) -> None:
        """A CPU store hit ``[offset, offset + nbytes)`` of ``gpu``'s doorbell frame: ring each queue it touched."""
        pdd = self.kfd.process.pdds[gpu.gpu_id]
        first, last = offset // KFD_DOORBELL_BYTES, (offset + nbytes - 1) // KFD_DOORBELL_BYTES
        for slot in range(first, last + 1):
            if slot not in pdd.doorbells:
                LOG.debug("doorbell store to free slot %d of gpu_id=%#x dropped", slot, gpu.gpu_id)
                continue
            queue = pdd.doorbells[slot]
            if queue.hung_by is not None:
                LOG.debug("doorbell of queue %d lost: hung by %r", queue.queue_id, queue.hung_by)
                continue
            start = slot * KFD_DOORBELL_BYTES
            value = int.from_bytes(gpu.doorbell_page[start : start + KFD_DOORBELL_BYTES], "little")
            gpu.port.ring_doorbell(slot, value)
