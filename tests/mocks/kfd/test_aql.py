"""AQL queues on MOCKKFD over the emulated GPU, driven through the file seam as a ROCr-style runtime drives them:
GTT memory for the queue, ring and signals, CREATE_QUEUE of type COMPUTE_AQL, packets, a 64-bit doorbell, and
KFD events behind interrupt signals. Kernels are the RDNA3 corpus, built by clang-19 and compared with numpy."""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from support.aql import amd_queue, barrier, invalid_ring, kernel_dispatch, kernel_source, signal
from support.rdna3 import compile_cl, needs_clang
from support.rdna3_corpus import divloop_reference, privsum_reference

from tinyhil.amdgpu.code_object import CodeObject, hidden_kernargs
from tinyhil.emulators.amdgpu import AmdGpu
from tinyhil.emulators.amdgpu.aql import AqlEngine
from tinyhil.emulators.kernel import EventKernel
from tinyhil.kfd import KFD, KfdEvent, KfdHwException, KfdMemoryFault, MemoryDomain
from tinyhil.kfd.gpu import KfdGpu
from tinyhil.mocks.kfd import MockKFD
from tinyhil.spec.amdgpu_pm4 import GFX1100_SHADER_ENGINES
from tinyhil.spec.hsa_aql import AQL_PACKET_BYTES, AmdQueueOffset, AmdSignalOffset, HsaPacketType
from tinyhil.spec.kfd_events import KFD_EVENT_TIMEOUT_INFINITE, HwExceptionResetType
from tinyhil.spec.kfd_ioctls import KfdIoctl
from tinyhil.spec.kfd_queues import (
    KFD_DOORBELL_PROCESS_SLICE_BYTES,
    QueueType,
    kfd_ioctl_create_queue_args,
    kfd_ioctl_destroy_queue_args,
)

T = HsaPacketType
RING_BYTES = 0x1000
SLOTS = RING_BYTES // AQL_PACKET_BYTES
TIMEOUT_MS = 1000


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> CodeObject:
    if needs_clang.args[0]:
        pytest.skip(needs_clang.kwargs["reason"])
    return compile_cl(kernel_source(), Path(tmp_path_factory.mktemp("kfd_aql")))


@pytest.fixture
def machine() -> Iterator[tuple[MockKFD, KFD]]:
    gpus = [AmdGpu(EventKernel(), vram_bytes=64 << 20, name="gpu0")]
    mock = MockKFD(gpus)
    client = KFD(mock.fileio)
    yield mock, client
    client.close()
    mock.close()


class AqlQueue:
    """An AQL queue as ROCr sets one up: ``amd_queue_t`` and the ring in GTT, CREATE_QUEUE, the doorbell page."""

    def __init__(self, mock: MockKFD, kfd: KFD, gpu: KfdGpu, scratch: int = 0, tmpring_size: int = 0) -> None:
        self.kfd, self.gpu = kfd, gpu
        self.struct = gpu.alloc(4096, MemoryDomain.GTT)
        self.ring = gpu.alloc(RING_BYTES, MemoryDomain.GTT)
        self.ring.write(0, invalid_ring(SLOTS))
        self.struct.write(0, amd_queue(self.ring.va, SLOTS, scratch=scratch, tmpring_size=tmpring_size))
        args = kfd_ioctl_create_queue_args(
            ring_base_address=self.ring.va, ring_size=RING_BYTES, gpu_id=gpu.gpu_id,
            queue_type=QueueType.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, queue_percentage=100, queue_priority=7,
            read_pointer_address=self.struct.va + AmdQueueOffset.read_dispatch_id,
            write_pointer_address=self.struct.va + AmdQueueOffset.write_dispatch_id,
        )  # fmt: skip
        kfd.ioctl(KfdIoctl.AMDKFD_IOC_CREATE_QUEUE, args)
        self.queue_id = args.queue_id
        base = args.doorbell_offset & ~(KFD_DOORBELL_PROCESS_SLICE_BYTES - 1)
        self.doorbells = mock.fileio.mmap(kfd.fd, KFD_DOORBELL_PROCESS_SLICE_BYTES, base)
        self.doorbell = args.doorbell_offset - base
        self.engine = mock.gpus[0].port.queues[-1].engine  # type: ignore[attr-defined]
        assert isinstance(self.engine, AqlEngine)
        self.write_index = 0

    def submit(self, *packets: bytes) -> None:
        """Write each packet (the header last), store the write index, ring the doorbell with it."""
        for packet in packets:
            offset = (self.write_index % SLOTS) * AQL_PACKET_BYTES
            self.ring.write(offset + 2, packet[2:])
            self.ring.write(offset, packet[:2])
            self.write_index += 1
        index = struct.pack("<Q", self.write_index)
        self.struct.write(AmdQueueOffset.write_dispatch_id, index)
        self.doorbells[self.doorbell : self.doorbell + 8] = index

    @property
    def read_index(self) -> int:
        return int.from_bytes(self.struct.read(AmdQueueOffset.read_dispatch_id, 8), "little")


class Runtime:
    """Code, kernel arguments and signals for one GPU of the machine."""

    def __init__(self, machine: tuple[MockKFD, KFD], code: CodeObject | None = None) -> None:
        self.mock, self.kfd = machine
        self.gpu = self.kfd.device(0)
        self.code = code
        self.text = self.gpu.alloc(max(len(code.image) if code else 0, 4096), MemoryDomain.VRAM, executable=True)
        if code is not None:
            self.text.write(0, code.image)
        self.kernargs = self.gpu.alloc(1 << 16, MemoryDomain.GTT)
        self.signals = self.gpu.alloc(4096, MemoryDomain.GTT)
        self.data = self.gpu.alloc(1 << 20, MemoryDomain.VRAM)
        self._kernarg_at = 0
        self._signal_count = 0

    def queue(self, scratch: int = 0, tmpring_size: int = 0) -> AqlQueue:
        return AqlQueue(self.mock, self.kfd, self.gpu, scratch, tmpring_size)

    def signal(self, value: int, event: KfdEvent | None = None) -> int:
        """A new ``amd_signal_t``; with ``event``, an interrupt signal whose completion fires it."""
        offset = 64 * self._signal_count
        self._signal_count += 1
        mailbox = 0 if event is None or event.mailbox_va is None else event.mailbox_va
        self.signals.write(offset, signal(value, mailbox=mailbox, event_id=0 if event is None else event.event_id))
        return self.signals.va + offset

    def value(self, handle: int) -> int:
        offset = handle - self.signals.va + AmdSignalOffset.value
        return int(struct.unpack("<q", self.signals.read(offset, 8))[0])

    def dispatch(self, name: str, args: bytes, grid: int, block: int, completion: int = 0) -> bytes:
        """A dispatch packet of ``grid`` workgroups of ``block`` work-items; its kernargs written."""
        assert self.code is not None
        kd = self.code.kernels[name]
        kernargs = bytearray(hidden_kernargs(kd, (grid, 1, 1), (block, 1, 1)))
        kernargs[: len(args)] = args
        self.kernargs.write(self._kernarg_at, bytes(kernargs))
        at = self.kernargs.va + self._kernarg_at
        self._kernarg_at += 0x400
        return kernel_dispatch(kernel_object=self.text.va + kd.descriptor_vaddr, kernarg=at, grid=(grid * block,),
                               block=(block,), completion_signal=completion,
                               group_segment_size=kd.group_segment_fixed_size)  # fmt: skip

    def put(self, offset: int, array: np.ndarray) -> int:
        self.data.write(offset, array.tobytes())
        return self.data.va + offset

    def get(self, offset: int, count: int, dtype: str) -> np.ndarray:
        return np.frombuffer(self.data.read(offset, count * np.dtype(dtype).itemsize), dtype)


def test_the_kernel_corpus_runs_through_an_aql_queue_and_matches_numpy(
    machine: tuple[MockKFD, KFD], kernels: CodeObject
) -> None:
    rt = Runtime(machine, kernels)
    queue = rt.queue()
    rng = np.random.default_rng(7)
    n = 2048
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    alpha = np.float32(0.625)
    ints = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    sums = rng.integers(-1000, 1000, n).astype(np.float32)  # exact in any order
    pa, pb, pc, py = (rt.put(i * 4 * n, x) for i, x in enumerate((a, b, np.zeros(n, np.float32), b)))
    pi, po, ps, pr = (rt.put((4 + i) * 4 * n, x) for i, x in enumerate((ints, ints, sums, sums)))
    events = [rt.kfd.create_event() for _ in range(4)]
    queue.submit(
        rt.dispatch("vadd", struct.pack("<QQQi", pa, pb, pc, n), n // 256, 256, rt.signal(1, events[0])),
        rt.dispatch("saxpy", struct.pack("<f4xQQi", alpha, pa, py, n), n // 256, 256, rt.signal(1, events[1])),
        rt.dispatch("divloop", struct.pack("<QQ", pi, po), n // 256, 256, rt.signal(1, events[2])),
        rt.dispatch("reduce", struct.pack("<QQ", ps, pr), n // 256, 256, rt.signal(1, events[3])),
    )
    rt.kfd.wait(events, timeout_ms=TIMEOUT_MS, wait_all=True)
    np.testing.assert_array_equal(rt.get(2 * 4 * n, n, "<f4"), a + b)
    np.testing.assert_array_equal(rt.get(3 * 4 * n, n, "<f4"), (alpha.astype(np.float64) * a + b).astype(np.float32))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(rt.get(5 * 4 * n, n, "<i4"), divloop_reference(ints))
    np.testing.assert_array_equal(rt.get(7 * 4 * n, n // 256, "<f4"), sums.reshape(-1, 256).sum(axis=1))
    assert (queue.read_index, queue.engine.dispatches, rt.mock.queue_errors) == (4, 4, [])


def test_a_kernel_using_scratch_runs_in_the_queues_scratch_memory(
    machine: tuple[MockKFD, KFD], kernels: CodeObject
) -> None:
    rt = Runtime(machine, kernels)
    lane_bytes = -(-kernels.kernels["privsum"].private_segment_fixed_size // 4) * 4
    wave_units, waves_per_se = -(-lane_bytes * 32 // 256), 1  # a wave's lanes in 256-byte units; 1 slot per SE
    scratch = rt.gpu.alloc(wave_units * 256 * waves_per_se * GFX1100_SHADER_ENGINES, MemoryDomain.VRAM)
    queue = rt.queue(scratch=scratch.va, tmpring_size=waves_per_se | wave_units << 12)
    threads = 512  # 16 waves: more than the 6 slots, so batches of 3 workgroups
    a = np.random.default_rng(13).integers(-1000, 1000, (threads, 32)).astype(np.int32)
    pa = rt.put(0, a)
    done = rt.kfd.create_event()
    queue.submit(rt.dispatch("privsum", struct.pack("<QQ", pa, pa + a.nbytes), threads // 64, 64, rt.signal(1, done)))
    rt.kfd.wait(done, timeout_ms=TIMEOUT_MS)
    np.testing.assert_array_equal(rt.get(a.nbytes, threads, "<i4"), privsum_reference(a))
    assert any(scratch.read(0, 256))  # the waves' private arrays went to the queue's scratch
    assert rt.mock.queue_errors == []


def test_a_barrier_and_waits_for_a_dispatch_on_another_queue(machine: tuple[MockKFD, KFD], kernels: CodeObject) -> None:
    rt = Runtime(machine, kernels)
    first, second = rt.queue(), rt.queue()
    n = 256
    a = np.arange(n, dtype=np.float32)
    pa, pb, pc = rt.put(0, a), rt.put(4 * n, np.zeros(n, np.float32)), rt.put(8 * n, np.zeros(n, np.float32))
    produced = rt.signal(1)
    finished = rt.kfd.create_event()
    first.submit(barrier(T.HSA_PACKET_TYPE_BARRIER_AND, [produced]),
                 rt.dispatch("vadd", struct.pack("<QQQi", pb, pb, pc, n), 1, n, rt.signal(1, finished)))  # fmt: skip
    assert not rt.kfd.wait_events([finished], timeout_ms=5)  # the barrier holds the queue
    assert (first.read_index, first.engine.wait is not None) == (0, True)
    second.submit(rt.dispatch("vadd", struct.pack("<QQQi", pa, pa, pb, n), 1, n, produced))
    rt.kfd.wait(finished, timeout_ms=TIMEOUT_MS)
    assert rt.value(produced) == 0 and first.read_index == 2
    np.testing.assert_array_equal(rt.get(8 * n, n, "<f4"), 4 * a)


def test_a_host_store_to_a_dependency_releases_a_barrier_or(machine: tuple[MockKFD, KFD]) -> None:
    rt = Runtime(machine)
    queue = rt.queue()
    deps = [rt.signal(1), rt.signal(1)]
    done = rt.kfd.create_event()
    queue.submit(barrier(T.HSA_PACKET_TYPE_BARRIER_OR, deps, rt.signal(1, done)))
    assert not rt.kfd.wait_events([done], timeout_ms=5)
    rt.signals.write(deps[1] - rt.signals.va + AmdSignalOffset.value, struct.pack("<q", 0))  # hsa_signal_store
    rt.kfd.wait(done, timeout_ms=TIMEOUT_MS)
    assert queue.read_index == 1


def test_an_unmapped_kernel_object_reaches_the_client_as_a_memory_fault(
    machine: tuple[MockKFD, KFD], kernels: CodeObject
) -> None:
    rt = Runtime(machine, kernels)
    wild = 0x7F00_0000_0000
    rt.queue().submit(kernel_dispatch(kernel_object=wild, kernarg=rt.kernargs.va, grid=(64,), block=(64,)))
    with pytest.raises(KfdMemoryFault) as caught:
        rt.kfd.wait_events([], timeout_ms=10)
    assert caught.value.va == wild and rt.mock.faults == [(rt.gpu.gpu_id, wild)]
    # a new queue on the same GPU runs
    done = rt.kfd.create_event()
    a = np.arange(64, dtype=np.float32)
    pa = rt.put(0, a)
    rt.queue().submit(rt.dispatch("vadd", struct.pack("<QQQi", pa, pa, pa + 256, 64), 1, 64, rt.signal(1, done)))
    rt.kfd.wait(done, timeout_ms=TIMEOUT_MS)
    np.testing.assert_array_equal(rt.get(256, 64, "<f4"), a + a)


def test_a_kernel_with_a_wild_pointer_faults_at_that_address(machine: tuple[MockKFD, KFD], kernels: CodeObject) -> None:
    rt = Runtime(machine, kernels)
    queue = rt.queue()
    wild = 0x7E00_0000_0000
    pa = rt.put(0, np.ones(64, np.float32))
    done = rt.kfd.create_event()
    queue.submit(rt.dispatch("vadd", struct.pack("<QQQi", pa, wild, pa + 256, 64), 1, 64, rt.signal(1, done)))
    with pytest.raises(KfdMemoryFault) as caught:
        rt.kfd.wait_events([done], timeout_ms=TIMEOUT_MS)
    assert caught.value.va == wild and queue.read_index == 0 and queue.engine.stopped


def test_a_misaligned_kernel_object_is_a_queue_error_and_the_queue_can_be_replaced(
    machine: tuple[MockKFD, KFD], kernels: CodeObject
) -> None:
    rt = Runtime(machine, kernels)
    broken = rt.queue()
    done = rt.kfd.create_event()
    bad = rt.text.va + kernels.kernels["vadd"].descriptor_vaddr + 4
    broken.submit(kernel_dispatch(kernel_object=bad, kernarg=rt.kernargs.va, grid=(64,), block=(64,),
                                  completion_signal=rt.signal(1, done)))  # fmt: skip
    with pytest.raises(KfdHwException):
        rt.kfd.wait_events([done], timeout_ms=10)
    ((gpu_id, message),) = rt.mock.queue_errors
    assert gpu_id == rt.gpu.gpu_id and f"kernel_object={bad:#x}" in message and "AQL queue" in message
    rt.kfd.ioctl(KfdIoctl.AMDKFD_IOC_DESTROY_QUEUE, kfd_ioctl_destroy_queue_args(queue_id=broken.queue_id))
    replacement = rt.queue()
    assert replacement.queue_id == broken.queue_id  # the id is free again
    pa = rt.put(0, np.ones(64, np.float32))
    again = rt.kfd.create_event()
    replacement.submit(rt.dispatch("vadd", struct.pack("<QQQi", pa, pa, pa + 256, 64), 1, 64, rt.signal(1, again)))
    rt.kfd.wait(again, timeout_ms=TIMEOUT_MS)
    np.testing.assert_array_equal(rt.get(256, 64, "<f4"), np.full(64, 2, np.float32))


def test_an_endless_kernel_is_a_wave_trap_that_fires_the_hw_exception_event(
    machine: tuple[MockKFD, KFD], kernels: CodeObject
) -> None:
    rt = Runtime(machine, kernels)
    queue = rt.queue()
    queue.engine.step_budget = 2000
    done = rt.kfd.create_event()
    pa = rt.put(0, np.zeros(4, np.int32))
    queue.submit(rt.dispatch("spin", struct.pack("<Qi", pa, 1), 1, 32, rt.signal(1, done)))
    with pytest.raises(KfdHwException) as caught:  # the client waits on its HW exception event with the signal
        rt.kfd.wait(done, timeout_ms=TIMEOUT_MS)
    exception = caught.value
    assert (exception.gpu_id, exception.reset_type, exception.memory_lost) == (
        rt.gpu.gpu_id, HwExceptionResetType.KFD_HW_EXCEPTION_PER_ENGINE_RESET, False
    )  # fmt: skip
    ((_, message),) = rt.mock.queue_errors
    assert "wave trap at PC" in message and "step budget of 2000" in message
    with pytest.raises(OSError) as caught:  # nothing can fire the completion event any more: EDEADLK, not a hang
        rt.kfd.wait_events([done], timeout_ms=KFD_EVENT_TIMEOUT_INFINITE)
    assert caught.value.errno == errno.EDEADLK


@pytest.mark.parametrize("packet_type", [T.HSA_PACKET_TYPE_VENDOR_SPECIFIC, T.HSA_PACKET_TYPE_AGENT_DISPATCH, 9])
def test_a_malformed_packet_type_is_a_queue_error_without_a_hang(
    machine: tuple[MockKFD, KFD], packet_type: int
) -> None:
    rt = Runtime(machine)
    queue = rt.queue()
    done = rt.kfd.create_event()
    queue.submit(kernel_dispatch(kernel_object=rt.text.va, kernarg=0, grid=(1,), block=(1,), packet_type=packet_type,
                                 completion_signal=rt.signal(1, done)))  # fmt: skip
    with pytest.raises(KfdHwException):
        rt.kfd.wait_events([done], timeout_ms=10)
    ((_, message),) = rt.mock.queue_errors
    assert "packets are not processed" in message and queue.read_index == 0


def test_an_aql_queue_needs_the_emulated_gpu(make_mock: Callable[..., MockKFD], helpers: ModuleType) -> None:
    mock = make_mock()
    raw = helpers.RawKfd(mock)
    gpu_id = raw.acquire(0)
    va, pointers = helpers.VA, helpers.VA + 0x2000
    raw.map(raw.alloc(0, 0x10000, va, helpers.GTT).handle, [gpu_id])
    args = kfd_ioctl_create_queue_args(ring_base_address=va, ring_size=0x1000, gpu_id=gpu_id,
                                       queue_type=QueueType.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, queue_percentage=100,
                                       read_pointer_address=pointers + AmdQueueOffset.read_dispatch_id,
                                       write_pointer_address=pointers + AmdQueueOffset.write_dispatch_id)  # fmt: skip
    with pytest.raises(OSError, match="has no AQL packet processor") as caught:
        mock.fileio.ioctl(raw.fd, KfdIoctl.AMDKFD_IOC_CREATE_QUEUE, args)
    assert caught.value.errno == errno.EINVAL
    assert not mock.gpus[0].port.queues  # type: ignore[attr-defined]
