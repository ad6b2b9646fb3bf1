"""The AQL packet processor on the emulated GPU: kernel dispatch of clang-built code objects, barriers, signals,
invalid headers, bad packets and kernels, and the queue state after each."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from support.aql import amd_queue, barrier, compile_kernels, invalid_ring, kernel_dispatch, signal
from support.rdna3 import assemble, needs_llvm_mc

from tinyhil.amdgpu.code_object import CodeObject, hidden_kernargs
from tinyhil.emulators.amdgpu import AmdGpu, ErrorCode, GpuQueueError, Interrupt, InterruptKind, Queue, QueueKind
from tinyhil.emulators.amdgpu.aql import AqlEngine, serve_aql
from tinyhil.emulators.amdgpu.aql_dispatch import KernelDispatch, dispatch_setup
from tinyhil.emulators.kernel import EventKernel
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdhsa import USER_SGPR_WIDTHS, KdOffset, KernelCodeProperty, Rsrc2
from tinyhil.spec.hsa_aql import AQL_PACKET_BYTES, AmdQueueOffset, AmdSignalOffset, HsaPacketType

T = HsaPacketType
VRAM_BYTES = 64 << 20
QUEUES = 0x1000  # amd_queue_t of queue n at QUEUES + 0x100 * n
SIGNALS = 0x8000  # signal i at SIGNALS + 64 * i
RINGS = 0x100000  # ring of queue n at RINGS + RING_BYTES * n
RING_BYTES = 0x1000
SLOTS = RING_BYTES // AQL_PACKET_BYTES
CODE = 0x200000
KERNARGS = 0x300000
DATA = 0x400000
WAIT_NS = 1_000_000_000


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> CodeObject:
    return compile_kernels(tmp_path_factory, "aql")


class Rig:
    """A GPU with AQL queues over plain VRAM, and a host that writes packets the way ROCr does."""

    def __init__(self, code: CodeObject | None = None) -> None:
        self.kernel = EventKernel(seed=0)
        self.gpu = AmdGpu(self.kernel, vram_bytes=VRAM_BYTES, vram_at_zero=True)
        self.interrupts: list[Interrupt] = []
        self.gpu.on_interrupt = self.interrupts.append
        self.queues: list[tuple[Queue, AqlEngine]] = []
        self.wptrs: list[int] = []
        self.kernarg_at = KERNARGS
        if code is not None:
            self.gpu.write(CODE, code.image)
        self.code = code

    def add_queue(self) -> AqlEngine:
        index = len(self.queues)
        queue_va, ring_va = QUEUES + 0x100 * index, RINGS + RING_BYTES * index
        self.gpu.write(ring_va, invalid_ring(SLOTS))
        self.gpu.write(queue_va, amd_queue(ring_va, SLOTS, scratch_srd=(1, 2, 3, 4), scratch=0xABC000))
        queue = self.gpu.create_queue(QueueKind.COMPUTE, ring_va=ring_va, ring_bytes=RING_BYTES, doorbell_index=index,
                                      rptr_va=queue_va + AmdQueueOffset.read_dispatch_id,
                                      wptr_va=queue_va + AmdQueueOffset.write_dispatch_id)  # fmt: skip
        engine = serve_aql(queue)
        self.queues.append((queue, engine))
        self.wptrs.append(0)
        return engine

    def submit(self, index: int, *packets: bytes, ring: bool = True) -> None:
        """Write each packet (body first, then its header), publish the write index and ring the doorbell."""
        queue, _ = self.queues[index]
        for packet in packets:
            slot = queue.config.ring_va + (self.wptrs[index] % SLOTS) * AQL_PACKET_BYTES
            self.gpu.write(slot + 2, packet[2:])
            self.gpu.write(slot, packet[:2])
            self.wptrs[index] += 1
        self.gpu.write(queue.config.wptr_va, struct.pack("<Q", self.wptrs[index]))
        if ring:
            self.gpu.ring_doorbell(index, self.wptrs[index])

    def signal(self, index: int, value: int, **fields: int) -> int:
        handle = SIGNALS + 64 * index
        self.gpu.write(handle, signal(value, **fields))
        return handle

    def value(self, handle: int) -> int:
        return int(struct.unpack("<q", bytes(self.gpu.read(handle + AmdSignalOffset.value, 8)))[0])

    def dispatch(self, name: str, args: bytes, grid: int | tuple[int, int, int], block: int | tuple[int, int, int],
                 completion: int = 0) -> bytes:  # fmt: skip
        """A kernel dispatch packet for kernel ``name`` (``grid`` in workgroups), its kernargs written."""
        assert self.code is not None
        grid3 = (grid, 1, 1) if isinstance(grid, int) else grid
        block3 = (block, 1, 1) if isinstance(block, int) else block
        kd = self.code.kernels[name]
        kernargs = bytearray(hidden_kernargs(kd, grid3, block3))
        kernargs[: len(args)] = args
        at = self.kernarg_at
        self.gpu.write(at, bytes(kernargs))
        self.kernarg_at += 0x1000
        items = [g * b for g, b in zip(grid3, block3, strict=True)]
        return kernel_dispatch(kernel_object=CODE + kd.descriptor_vaddr, kernarg=at, grid=items, block=block3,
                               completion_signal=completion,
                               group_segment_size=kd.group_segment_fixed_size)  # fmt: skip

    def wait(self, condition: object, what: str) -> None:
        assert callable(condition)
        self.gpu.wait(condition, WAIT_NS, what=what)

    def run(self, condition: object, what: str) -> None:
        """Run until ``condition()`` holds, whatever other queues do (a stopped queue does not end the wait)."""
        assert callable(condition)
        self.kernel.run_until(condition, WAIT_NS, what=what)

    def read(self, va: int, count: int, dtype: str) -> np.ndarray:
        return np.frombuffer(bytes(self.gpu.read(va, count * np.dtype(dtype).itemsize)), dtype)


def test_vector_add_through_an_aql_queue_matches_numpy(kernels: CodeObject) -> None:
    rig = Rig(kernels)
    engine = rig.add_queue()
    n = 4096
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    rig.gpu.write(DATA, a)
    rig.gpu.write(DATA + 4 * n, b)
    done = rig.signal(0, 1)
    rig.submit(0, rig.dispatch("vadd", struct.pack("<QQQi", DATA, DATA + 4 * n, DATA + 8 * n, n), n // 256, 256, done))
    rig.wait(lambda: rig.value(done) == 0, "vadd")
    np.testing.assert_array_equal(rig.read(DATA + 8 * n, n, "<f4"), a + b)
    queue, _ = rig.queues[0]
    assert (engine.rptr, engine.dispatches, queue.idle) == (1, 1, True)
    assert rig.read(queue.config.rptr_va, 1, "<u8")[0] == 1  # read_dispatch_id written back
    assert rig.read(queue.config.ring_va, 1, "<u2")[0] == T.HSA_PACKET_TYPE_INVALID  # the slot is free again


def test_the_dispatch_ptr_points_at_the_packet(kernels: CodeObject) -> None:
    rig = Rig(kernels)
    rig.add_queue()
    done = rig.signal(0, 2)
    rig.submit(0, rig.dispatch("ids", struct.pack("<Q", DATA), 2, 64, done), rig.dispatch("ids", struct.pack(
        "<Q", DATA + 64), 3, 32, done))  # fmt: skip
    rig.wait(lambda: rig.value(done) == 0, "ids")
    queue, _ = rig.queues[0]
    first, second = rig.read(DATA, 2, "<u8"), rig.read(DATA + 64, 2, "<u8")
    assert list(first) == [128, queue.config.ring_va]  # grid_size_x read through the dispatch ptr, the ptr itself
    assert list(second) == [96, queue.config.ring_va + AQL_PACKET_BYTES]


def _descriptor(properties: int, user_sgprs: int) -> bytes:
    kd = bytearray(64)
    struct.pack_into("<q", kd, KdOffset.KERNEL_CODE_ENTRY_BYTE_OFFSET, 0x100)
    struct.pack_into("<I", kd, KdOffset.COMPUTE_PGM_RSRC2, user_sgprs << Rsrc2.USER_SGPR_COUNT)
    struct.pack_into("<H", kd, KdOffset.KERNEL_CODE_PROPERTIES, properties)
    return bytes(kd)


def test_every_user_sgpr_field_comes_from_the_packet_and_the_queue() -> None:
    rig = Rig()
    gpu = rig.gpu
    every = 0
    for flag in USER_SGPR_WIDTHS:
        every |= flag
    gpu.write(CODE, _descriptor(every | KernelCodeProperty.ENABLE_WAVEFRONT_SIZE32, 15))
    queue_va = QUEUES
    gpu.write(queue_va, amd_queue(RINGS, SLOTS, scratch_srd=(0x11, 0x22, 0x33, 0x44), scratch=0x5_6000_7000))
    packet = kernel_dispatch(kernel_object=CODE, kernarg=0x1_2345_6780, grid=(64, 2), block=(32, 2),
                             private_segment_size=48, group_segment_size=1000)  # fmt: skip
    dispatch = KernelDispatch.decode(packet)
    setup = dispatch_setup(gpu.memory, dispatch, packet_va=RINGS + 0x40, queue_va=queue_va, dispatch_id=0x1_0000_0002)
    srd, packet_ptr, queue_ptr, kernarg = (0x11, 0x22, 0x33, 0x44), (RINGS + 0x40, 0), (queue_va, 0), (0x2345_6780, 1)
    dispatch_id, flat_scratch, private_size = (2, 1), (0x6000_7000, 5), (48,)
    assert setup.user_data == srd + packet_ptr + queue_ptr + kernarg + dispatch_id + flat_scratch + private_size
    assert (setup.pgm_addr, setup.grid, setup.num_thread, setup.dispatch_id) == (CODE + 0x100, (2, 1, 1), (32, 2, 1),
                                                                                 0x1_0000_0002)  # fmt: skip
    assert (setup.rsrc2 >> Rsrc2.GRANULATED_LDS_SIZE) & 0x1FF == 2  # 1000 bytes of LDS in 512-byte granules


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kernel_object": CODE + 8}, "expected a 64-byte aligned descriptor address"),
        ({"kernel_object": 0}, "expected a 64-byte aligned descriptor address"),
        ({"grid": (100,), "block": (64,)}, "partial workgroups are not modelled"),
        ({"block": (0,)}, r"workgroup_size=\(0, 1, 1\)"),
        ({"block": (64, 32)}, "expected 1..1024 work-items"),
        ({"dims": 0}, "setup.dimensions=0"),
        ({"group_segment_size": 0x10001}, "group segment of 0x10001 bytes"),
    ],
)
def test_a_malformed_dispatch_stops_the_queue_with_a_packet_error(fields: dict[str, object], message: str) -> None:
    rig = Rig()
    rig.gpu.write(CODE, _descriptor(KernelCodeProperty.ENABLE_WAVEFRONT_SIZE32, 0))
    engine = rig.add_queue()
    done = rig.signal(0, 1)
    values: dict[str, object] = {"kernel_object": CODE, "kernarg": 0, "grid": (64,), "block": (64,),
                                 "completion_signal": done} | fields  # fmt: skip
    rig.submit(0, kernel_dispatch(**values))  # type: ignore[arg-type]
    with pytest.raises(GpuQueueError, match=message) as caught:
        rig.wait(lambda: False, "bad dispatch")
    assert caught.value.error_code == ErrorCode.BAD_PACKET and "AQL queue 0" in str(caught.value)
    assert rig.value(done) == 1 and engine.rptr == 0
    assert [i.kind for i in rig.interrupts] == [InterruptKind.QUEUE_ERROR]


def test_a_descriptor_that_asks_for_wave64_or_too_many_user_sgprs_is_refused() -> None:
    for descriptor, message in ((_descriptor(0, 0), "asks for wave64"),
                                (_descriptor(KernelCodeProperty.ENABLE_WAVEFRONT_SIZE32 |
                                             KernelCodeProperty.ENABLE_SGPR_KERNARG_SEGMENT_PTR, 1),
                                 "enables 2 user SGPRs, but rsrc2.USER_SGPR_COUNT is 1")):  # fmt: skip
        rig = Rig()
        rig.gpu.write(CODE, descriptor)
        rig.add_queue()
        rig.submit(0, kernel_dispatch(kernel_object=CODE, kernarg=0, grid=(32,), block=(32,)))
        with pytest.raises(GpuQueueError, match=message):
            rig.wait(lambda: False, "bad descriptor")


def test_an_unmapped_kernel_object_is_a_memory_fault_and_a_later_queue_still_works(kernels: CodeObject) -> None:
    rig = Rig(kernels)
    rig.add_queue()
    wild = 0x7_0000_0000
    rig.submit(0, kernel_dispatch(kernel_object=wild, kernarg=0, grid=(32,), block=(32,)))
    with pytest.raises(GpuQueueError, match=f"{wild:#x}") as caught:
        rig.wait(lambda: False, "wild kernel object")
    assert caught.value.fault_va == wild and caught.value.error_code == ErrorCode.MEMORY_FAULT
    assert [(i.kind, i.fault_va) for i in rig.interrupts] == [(InterruptKind.MEMORY_FAULT, wild)]
    rig.add_queue()
    done = rig.signal(1, 1)
    a = np.arange(64, dtype=np.float32)
    rig.gpu.write(DATA, a)
    rig.submit(1, rig.dispatch("vadd", struct.pack("<QQQi", DATA, DATA, DATA + 0x1000, 64), 1, 64, done))
    rig.run(lambda: rig.value(done) == 0, "vadd after a fault")
    np.testing.assert_array_equal(rig.read(DATA + 0x1000, 64, "<f4"), a + a)


def test_an_endless_kernel_is_a_wave_trap_that_stops_only_its_queue(kernels: CodeObject) -> None:
    rig = Rig(kernels)
    engine = rig.add_queue()
    engine.step_budget = 3000
    done = rig.signal(0, 1)
    rig.gpu.write(DATA, np.zeros(4, np.int32))
    rig.submit(0, rig.dispatch("spin", struct.pack("<Qi", DATA, 1), 1, 32, done))
    with pytest.raises(GpuQueueError, match=r"wave trap at PC 0x[0-9a-f]+ \(.+\): step budget of 3000") as caught:
        rig.wait(lambda: False, "spin")
    assert caught.value.error_code == ErrorCode.KERNEL_ERROR and "KERNEL_DISPATCH" in str(caught.value)
    assert rig.value(done) == 1 and [i.kind for i in rig.interrupts] == [InterruptKind.QUEUE_ERROR]
    rig.add_queue()
    rig.gpu.write(DATA, struct.pack("<i", 1))
    second = rig.signal(1, 1)
    rig.submit(1, rig.dispatch("spin", struct.pack("<Qi", DATA, 1), 1, 32, second))
    rig.run(lambda: rig.value(second) == 0, "spin that ends")
    assert rig.queues[1][1].dispatches == 1


@needs_llvm_mc
def test_an_unimplemented_instruction_is_a_wave_trap_naming_it() -> None:
    rig = Rig()
    rig.gpu.write(CODE, _descriptor(KernelCodeProperty.ENABLE_WAVEFRONT_SIZE32, 0))
    rig.gpu.write(CODE + 0x100, assemble("s_nop 0\ns_trap 2\ns_endpgm") + bytes(64))
    engine = rig.add_queue()
    done = rig.signal(0, 1)
    rig.submit(0, kernel_dispatch(kernel_object=CODE, kernarg=0, grid=(64,), block=(32,), completion_signal=done))
    rig.kernel.run_until_idle()
    assert engine.error_code == ErrorCode.KERNEL_ERROR and rig.value(done) == 1
    assert f"wave trap at PC {CODE + 0x104:#x} (s_trap" in engine.error_message


@pytest.mark.parametrize("packet_type", [T.HSA_PACKET_TYPE_VENDOR_SPECIFIC, T.HSA_PACKET_TYPE_AGENT_DISPATCH, 6, 0x7F])
def test_a_packet_type_the_processor_does_not_run_is_a_queue_error(packet_type: int) -> None:
    rig = Rig()
    engine = rig.add_queue()
    rig.submit(0, kernel_dispatch(kernel_object=CODE, kernarg=0, grid=(1,), block=(1,), packet_type=packet_type))
    rig.kernel.run_until_idle()
    assert engine.stopped and engine.error_code == ErrorCode.UNKNOWN_OPCODE
    assert "packets are not processed" in engine.error_message and "packet index 0x0" in engine.error_message
    assert [i.kind for i in rig.interrupts] == [InterruptKind.QUEUE_ERROR]


def test_an_invalid_header_stalls_the_queue_until_the_packet_is_written() -> None:
    rig = Rig()
    engine = rig.add_queue()
    queue, _ = rig.queues[0]
    first, second = rig.signal(0, 1), rig.signal(1, 1)
    rig.submit(0, barrier(T.HSA_PACKET_TYPE_BARRIER_AND, [], first))
    rig.kernel.run_until_idle()
    assert rig.value(first) == 0 and engine.rptr == 1
    # the write index moves past a slot whose header is still INVALID: the processor stops there
    rig.wptrs[0] += 1
    rig.gpu.write(queue.config.wptr_va, struct.pack("<Q", rig.wptrs[0]))
    rig.gpu.ring_doorbell(0, rig.wptrs[0])
    rig.kernel.run_until_idle()
    assert engine.rptr == 1 and not engine.stopped and "header is INVALID" in engine.describe()
    rig.gpu.write(queue.config.ring_va + AQL_PACKET_BYTES, barrier(T.HSA_PACKET_TYPE_BARRIER_AND, [], second))
    rig.gpu.ring_doorbell(0, rig.wptrs[0])
    rig.kernel.run_until_idle()
    assert (rig.value(second), engine.rptr, queue.idle) == (0, 2, True)


def test_a_barrier_and_waits_for_every_dependency_without_hanging() -> None:
    rig = Rig()
    engine = rig.add_queue()
    deps = [rig.signal(i, 1) for i in range(3)]
    done = rig.signal(3, 1)
    rig.submit(0, barrier(T.HSA_PACKET_TYPE_BARRIER_AND, [deps[0], 0, deps[1], deps[2]], done))
    rig.kernel.run_until_idle()  # nothing left to run: the queue waits, it does not spin
    assert engine.wait is not None and engine.rptr == 0 and "dependency signals to reach 0" in engine.describe()
    assert engine.execute() == 0
    for handle in deps[:2]:
        rig.gpu.write(handle + AmdSignalOffset.value, struct.pack("<q", 0))
        rig.kernel.run_until_idle()
        assert rig.value(done) == 1
    rig.gpu.write(deps[2] + AmdSignalOffset.value, struct.pack("<q", 0))
    rig.kernel.run_until_idle()
    assert (rig.value(done), engine.rptr, engine.wait) == (0, 1, None)


def test_a_barrier_or_completes_when_any_dependency_reaches_zero() -> None:
    rig = Rig()
    engine = rig.add_queue()
    deps = [rig.signal(0, 1), rig.signal(1, 5)]
    done = rig.signal(2, 2)
    rig.submit(0, barrier(T.HSA_PACKET_TYPE_BARRIER_OR, deps, done))
    rig.kernel.run_until_idle()
    assert engine.wait is not None and rig.value(done) == 2
    rig.gpu.write(deps[1] + AmdSignalOffset.value, struct.pack("<q", 0))
    rig.kernel.run_until_idle()
    assert (rig.value(done), engine.rptr) == (1, 1)


def test_a_barrier_or_without_dependencies_waits_and_one_without_and_does_not() -> None:
    rig = Rig()
    engine = rig.add_queue()
    done = rig.signal(0, 1)
    and_, or_ = T.HSA_PACKET_TYPE_BARRIER_AND, T.HSA_PACKET_TYPE_BARRIER_OR
    rig.submit(0, barrier(and_, [0, 0], done), barrier(or_, [0], done))
    rig.kernel.run_until_idle()  # null handles: satisfied for AND, never for OR; the queue waits, nothing spins
    assert (rig.value(done), engine.rptr, engine.wait is not None) == (0, 1, True)
    rig.gpu.write(SIGNALS, bytes(256))  # no write can release it
    rig.kernel.run_until_idle()
    assert engine.rptr == 1 and not engine.stopped


def test_a_barrier_waits_for_a_dispatch_on_another_queue(kernels: CodeObject) -> None:
    rig = Rig(kernels)
    waiter = rig.add_queue()
    rig.add_queue()
    kernel_done, barrier_done, after_done = rig.signal(0, 1), rig.signal(1, 1), rig.signal(2, 1)
    n = 256
    a = np.arange(n, dtype=np.float32)
    rig.gpu.write(DATA, a)
    # queue 0: wait for the add on queue 1, then add its result to itself
    rig.submit(0, barrier(T.HSA_PACKET_TYPE_BARRIER_AND, [kernel_done], barrier_done),
               rig.dispatch("vadd", struct.pack("<QQQi", DATA + 4 * n, DATA + 4 * n, DATA + 8 * n, n), 1, n,
                            after_done))  # fmt: skip
    rig.kernel.run_until_idle()
    assert waiter.wait is not None and waiter.rptr == 0
    rig.submit(1, rig.dispatch("vadd", struct.pack("<QQQi", DATA, DATA, DATA + 4 * n, n), 1, n, kernel_done))
    rig.wait(lambda: rig.value(after_done) == 0, "dependent dispatch")
    assert rig.value(barrier_done) == 0
    np.testing.assert_array_equal(rig.read(DATA + 8 * n, n, "<f4"), 4 * a)


def test_a_kernel_store_to_a_dependency_releases_a_barrier(kernels: CodeObject) -> None:
    rig = Rig(kernels)
    waiter = rig.add_queue()
    rig.add_queue()
    dep, done = rig.signal(0, 1), rig.signal(1, 1)
    rig.submit(0, barrier(T.HSA_PACKET_TYPE_BARRIER_AND, [dep], done))
    rig.kernel.run_until_idle()
    assert waiter.wait is not None
    rig.gpu.write(DATA, np.zeros(32, np.float32))
    value = dep + AmdSignalOffset.value
    rig.submit(1, rig.dispatch("vadd", struct.pack("<QQQi", DATA, DATA, value, 2), 1, 32))  # two f32 zeros: i64 0
    rig.run(lambda: rig.value(done) == 0, "barrier released by a kernel's store")
    assert waiter.rptr == 1


def test_a_completion_signal_with_a_mailbox_raises_its_event(kernels: CodeObject) -> None:
    rig = Rig(kernels)
    rig.add_queue()
    mailbox = SIGNALS + 0x1000
    rig.gpu.write(mailbox, struct.pack("<Q", (1 << 64) - 1))
    done = rig.signal(0, 1, mailbox=mailbox, event_id=7)
    rig.submit(0, barrier(T.HSA_PACKET_TYPE_BARRIER_AND, [], done))
    rig.kernel.run_until_idle()
    assert rig.value(done) == 0
    assert rig.read(mailbox, 2, "<u4").tolist() == [7, 0xFFFF_FFFF]  # event_id, a 32-bit store
    assert [(i.kind, i.context) for i in rig.interrupts] == [(InterruptKind.END_OF_PIPE, 7)]


def test_a_write_index_more_than_a_ring_ahead_stops_the_queue() -> None:
    rig = Rig()
    engine = rig.add_queue()
    queue, _ = rig.queues[0]
    rig.gpu.write(queue.config.wptr_va, struct.pack("<Q", SLOTS + 1))
    rig.gpu.ring_doorbell(0, SLOTS + 1)
    rig.kernel.run_until_idle()
    assert engine.error_code == ErrorCode.BAD_WPTR and f"write index {SLOTS + 1:#x}" in engine.error_message


def test_serve_aql_takes_only_a_fresh_compute_queue() -> None:
    rig = Rig()
    sdma = rig.gpu.create_queue(QueueKind.SDMA, ring_va=RINGS, ring_bytes=RING_BYTES, rptr_va=0x100, wptr_va=0x108,
                                doorbell_index=5)  # fmt: skip
    with pytest.raises(InvalidArgument, match="expected a compute queue that has not run yet"):
        serve_aql(sdma)
    rig.add_queue()
    with pytest.raises(InvalidArgument, match="expected a compute queue that has not run yet"):
        serve_aql(rig.queues[0][0])
