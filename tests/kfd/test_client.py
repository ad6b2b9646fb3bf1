"""The reference KFD client against MOCKKFD over memory-only fake GPUs: memory, queues, events, waits."""

from __future__ import annotations

import errno
from typing import Any

import numpy as np
import pytest

from tinyhil.errors import DeviceTimeout, InvalidArgument, StateError
from tinyhil.fileio import RealFileIO
from tinyhil.kfd import KFD, KfdHwException, KfdMemoryFault, MemoryDomain, QueueEngine, cwsr_sizes
from tinyhil.mocks.kfd import MockKFD
from tinyhil.spec.amdgpu import PAGE_BYTES
from tinyhil.spec.kfd_events import EventType
from tinyhil.spec.kfd_ioctls import KfdIoctl
from tinyhil.spec.kfd_memory import kfd_ioctl_free_memory_of_gpu_args

MS = 1_000_000


def _gpus(mock: MockKFD) -> list[Any]:
    return [gpu.port for gpu in mock.gpus]


# --- memory --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("domain", [MemoryDomain.VRAM, MemoryDomain.GTT])
def test_cpu_writes_reach_the_gpu_and_wake_it(kfd: KFD, mock: MockKFD, domain: MemoryDomain) -> None:
    gpu0 = _gpus(mock)[0]
    buf = kfd.device(0).alloc(3 * PAGE_BYTES, domain)
    payload = np.random.default_rng(3).integers(0, 256, 5000, dtype=np.uint8)
    buf.write(100, payload)
    assert bytes(gpu0.read(buf.va + 100, 5000)) == payload.tobytes()
    assert gpu0.written[-1] == (buf.va + 100, 5000)
    gpu0.write(buf.va + 8, b"from the GPU")
    assert buf.read(8, 12) == b"from the GPU"


def test_vram_is_a_view_of_the_gpus_vram(kfd: KFD, mock: MockKFD) -> None:
    buf = kfd.device(0).alloc(PAGE_BYTES)
    buf.write(0, b"vram!")
    gpu0 = _gpus(mock)[0]
    assert bytes(gpu0.vram).find(b"vram!") >= 0


def test_a_buffer_mapped_on_two_gpus_is_one_memory(kfd: KFD, mock: MockKFD) -> None:
    gpu0, gpu1 = _gpus(mock)
    dev0, dev1 = kfd.device(0), kfd.device(1)
    buf = dev0.alloc(PAGE_BYTES, MemoryDomain.VRAM, map_to=[dev0, dev1])
    gpu1.write(buf.va, b"peer")
    assert bytes(gpu0.read(buf.va, 4)) == b"peer" and buf.read(0, 4) == b"peer"
    buf.write(4, b"!!")
    assert gpu0.written[-1] == gpu1.written[-1] == (buf.va + 4, 2)
    assert buf.mapped_on == [dev0, dev1]


def test_userptr_memory_is_mapped_at_its_cpu_address(kfd: KFD, mock: MockKFD) -> None:
    gpu0 = _gpus(mock)[0]
    buf = kfd.device(0).alloc(2 * PAGE_BYTES, MemoryDomain.USERPTR)
    assert buf.va == buf.cpu.address  # type: ignore[union-attr]
    gpu0.write(buf.va + PAGE_BYTES, b"host")
    assert buf.read(PAGE_BYTES, 4) == b"host"


def test_free_unmaps_and_returns_the_va(kfd: KFD, mock: MockKFD) -> None:
    fake = _gpus(mock)[0]
    device = kfd.device(0)
    buf = device.alloc(PAGE_BYTES)
    va = buf.va
    buf.free()
    buf.free()  # idempotent
    assert va not in fake.mappings and buf.freed
    with pytest.raises(StateError, match="was freed"):
        buf.read(0, 1)
    assert device.alloc(PAGE_BYTES).va == va


def test_memory_without_cpu_access_cannot_be_read_by_the_cpu(kfd: KFD) -> None:
    buf = kfd.device(0).alloc(PAGE_BYTES, cpu_access=False)
    with pytest.raises(StateError, match="no CPU mapping"):
        buf.read(0, 4)
    with pytest.raises(InvalidArgument, match="past the end"):
        kfd.device(0).alloc(PAGE_BYTES).write(PAGE_BYTES - 2, b"abc")


def test_running_out_of_vram_is_enomem_and_leaves_no_trace(kfd: KFD, mock: MockKFD) -> None:
    device = kfd.device(0)
    before = mock.state_digest()
    with pytest.raises(OSError, match="ALLOC_MEMORY_OF_GPU") as caught:
        device.alloc(1 << 40)
    assert caught.value.errno == 12 and mock.state_digest() == before
    assert device.allocations == [] and kfd.va_space.free_bytes == kfd.va_space.size_bytes


# --- queues --------------------------------------------------------------------------------------------------------
def test_an_sdma_queue_is_created_with_its_ring_pointers_and_doorbell(kfd: KFD, mock: MockKFD) -> None:
    fake = _gpus(mock)[0]
    queue = kfd.device(0).create_queue(QueueEngine.SDMA, ring_bytes=4096)
    (created,) = fake.queues
    assert created.kind.name == "SDMA" and created.ring_va == queue.ring.va and created.ring_bytes == 4096
    assert (created.rptr_va, created.wptr_va) == (queue.rptr.va, queue.wptr.va)
    assert queue.submit(bytes(range(16)) * 2) == 32
    assert bytes(fake.read(queue.ring.va, 32)) == bytes(range(16)) * 2
    assert int.from_bytes(fake.read(queue.wptr.va, 8), "little") == 32
    assert created.doorbells == [32] and fake.doorbells == [(created.doorbell_index, 32)]


def test_compute_pointers_count_dwords_and_the_queue_gets_eop_and_cwsr_buffers(kfd: KFD, mock: MockKFD) -> None:
    fake = _gpus(mock)[0]
    device = kfd.device(0)
    queue = device.create_queue(QueueEngine.COMPUTE)
    assert fake.queues[0].kind.name == "COMPUTE"
    assert queue.submit(b"\x00" * 16) == 4 and fake.queues[0].doorbells == [4]
    eop, ctx = queue.extra
    sizes = cwsr_sizes(device.node)
    assert eop.size == -(-sizes.eop_buffer_size // PAGE_BYTES) * PAGE_BYTES
    assert ctx.size >= sizes.cwsr_size and eop.va in fake.mappings and ctx.va in fake.mappings


def test_the_ring_wraps_and_refuses_to_overrun_the_engine(kfd: KFD, mock: MockKFD) -> None:
    fake = _gpus(mock)[0]
    queue = kfd.device(0).create_queue(QueueEngine.SDMA, ring_bytes=1024)
    queue.submit(b"\x11" * 1000)
    with pytest.raises(StateError, match="1000 of 1024 bytes in flight"):
        queue.submit(b"\x22" * 48)
    fake.write(queue.rptr.va, (1000).to_bytes(8, "little"))  # the engine consumed everything
    assert queue.idle
    queue.submit(b"\x22" * 48)
    ring = bytes(fake.read(queue.ring.va, 1024))
    assert ring[1000:1024] == b"\x22" * 24 and ring[:24] == b"\x22" * 24 and ring[24:1000] == b"\x11" * 976
    with pytest.raises(InvalidArgument, match="whole dwords"):
        queue.submit(b"\x00" * 3)


def test_queues_get_distinct_ids_and_doorbells_and_destroy_frees_everything(kfd: KFD, mock: MockKFD) -> None:
    fake = _gpus(mock)[0]
    device = kfd.device(0)
    first, second = device.create_queue(QueueEngine.SDMA), device.create_queue(QueueEngine.SDMA)
    assert first.queue_id != second.queue_id and first.doorbell_byte != second.doorbell_byte
    second.submit(b"\x00" * 8)
    assert [q.doorbells for q in fake.queues] == [[], [8]]
    first.destroy()
    second.destroy()
    assert fake.queues == [] and device.allocations == [] and len(fake.mappings) == 0
    with pytest.raises(StateError, match="destroyed"):
        first.submit(b"\x00" * 4)


# --- events and waits ----------------------------------------------------------------------------------------------
def test_set_wait_and_auto_reset_in_virtual_time(kfd: KFD, mock: MockKFD) -> None:
    event = kfd.create_event()
    start = mock.kernel.now_ns
    event.set()
    kfd.wait(event, timeout_ms=50)
    assert mock.kernel.now_ns == start  # already signalled: no time passes
    with pytest.raises(DeviceTimeout, match="5 ms"):
        kfd.wait(event, timeout_ms=5)  # the first wait consumed it
    assert mock.kernel.now_ns == start + 5 * MS


def test_manual_reset_events_stay_set_until_reset(kfd: KFD) -> None:
    event = kfd.create_event(auto_reset=False)
    event.set()
    kfd.wait(event, timeout_ms=1)
    kfd.wait(event, timeout_ms=1)
    event.reset()
    assert not kfd.wait_events([event], timeout_ms=1)


def test_a_gpu_interrupt_fires_the_event_whose_slot_it_wrote(kfd: KFD, mock: MockKFD) -> None:
    fake = _gpus(mock)[0]
    event = kfd.create_event()
    assert event.mailbox_va is not None
    mock.kernel.schedule(2 * MS, lambda: fake.write(event.mailbox_va, event.event_id.to_bytes(8, "little")))
    fake.interrupt_at(2 * MS, "TRAP", context=event.event_id)
    kfd.wait(event, timeout_ms=100)
    assert mock.kernel.now_ns == 2 * MS
    assert bytes(fake.read(event.mailbox_va, 8)) == b"\xff" * 8  # the driver acknowledged the slot


def test_an_interrupt_without_a_slot_write_fires_nothing(kfd: KFD, mock: MockKFD) -> None:
    event = kfd.create_event()
    _gpus(mock)[0].interrupt_at(MS, "END_OF_PIPE", context=event.event_id)
    assert not kfd.wait_events([event], timeout_ms=3)


def test_a_gpu_memory_fault_raises_an_error_naming_the_address(kfd: KFD, mock: MockKFD) -> None:
    event = kfd.create_event()
    gpu1 = kfd.gpus[1]
    _gpus(mock)[1].interrupt_at(MS, "MEMORY_FAULT", fault_va=0xDEAD_B123)
    with pytest.raises(KfdMemoryFault, match=r"gpu_id=0x[0-9a-f]+ at VA 0xdeadb000 \(page not present") as caught:
        kfd.wait(event, timeout_ms=100)
    assert caught.value.va == 0xDEAD_B000 and caught.value.gpu_id == gpu1.gpu_id
    assert kfd.faults == [caught.value] and mock.kernel.now_ns == MS


def test_a_queue_error_raises_the_hardware_exception_instead_of_a_timeout(kfd: KFD, mock: MockKFD) -> None:
    event = kfd.create_event()
    gpu1 = kfd.gpus[1]
    _gpus(mock)[1].interrupt_at(MS, "QUEUE_ERROR")
    with pytest.raises(KfdHwException, match=rf"gpu_id={gpu1.gpu_id:#x}: KFD_HW_EXCEPTION_GPU_HANG") as caught:
        kfd.wait(event, timeout_ms=100)  # the client's hardware-exception event is in the same WAIT_EVENTS
    assert caught.value.gpu_id == gpu1.gpu_id and mock.kernel.now_ns == MS
    assert kfd.hw_exception_event.event_type == EventType.KFD_IOC_EVENT_HW_EXCEPTION
    assert not kfd.wait_events([], timeout_ms=0)  # auto-reset: reported once


def test_wait_all_needs_every_event(kfd: KFD) -> None:
    first, second = kfd.create_event(), kfd.create_event()
    first.set()
    assert not kfd.wait_events([first, second], timeout_ms=2, wait_all=True)
    first.set()
    second.set()
    assert kfd.wait_events([first, second], timeout_ms=2, wait_all=True)


def test_wait_value_runs_the_gpus_until_the_value_lands(kfd: KFD, mock: MockKFD) -> None:
    fake = _gpus(mock)[0]
    signal = kfd.device(0).alloc(PAGE_BYTES, MemoryDomain.GTT)
    mock.kernel.schedule(3 * MS + 1, lambda: fake.write(signal.va + 8, (7).to_bytes(8, "little")))
    assert kfd.wait_value(signal, 8, 7, timeout_ms=100) == 7
    assert 3 * MS < mock.kernel.now_ns <= 4 * MS + 1_000
    with pytest.raises(DeviceTimeout, match=r"is 0x7 after 2 ms, expected 0x8"):
        kfd.wait_value(signal, 8, 8, timeout_ms=2)
    assert kfd.wait_value(signal, 8, lambda value: value > 5, timeout_ms=0) == 7


def test_clock_counters_follow_virtual_time(kfd: KFD, mock: MockKFD) -> None:
    mock.kernel.run_for(12_340)
    counters = kfd.clock_counters(kfd.device(0))
    assert counters.gpu_clock_counter == 1_234 and counters.system_clock_counter == 12_340
    assert counters.system_clock_freq == 1_000_000_000 and kfd.now_ns() == 12_340
    assert kfd.clock_counters().gpu_clock_counter == 0  # no GPU named


def test_close_releases_queues_memory_events_and_files(mock: MockKFD) -> None:
    kfd = KFD(mock.fileio)
    device = kfd.device(0)
    device.alloc(PAGE_BYTES)
    device.create_queue(QueueEngine.SDMA)
    kfd.create_event()
    kfd.close()
    kfd.close()
    process = mock.process
    assert process.queues == {} and process.events == {} and mock.fileio.files == {}
    # The event page stays with the process (amdkfd refuses to free it); nothing else does.
    assert [a.size for pdd in process.pdds.values() for a in pdd.allocations.values()] == [0x8000]
    assert all(not gpu.port.mappings for gpu in mock.gpus)


def test_a_closed_connection_says_so(mock: MockKFD) -> None:
    kfd = KFD(mock.fileio)
    device = kfd.device(0)
    kfd.close()
    assert kfd.closed
    with pytest.raises(StateError, match=r"KFD.device\(\) called, but it is closed"):
        kfd.device(0)
    with pytest.raises(StateError, match=r"KFD.ioctl\(\)"):
        device.alloc(PAGE_BYTES)


@pytest.mark.skipif(RealFileIO().exists("/dev/kfd"), reason="this machine has /dev/kfd")
def test_without_dev_kfd_the_client_reports_file_not_found() -> None:
    with pytest.raises(FileNotFoundError):
        KFD()


@pytest.mark.parametrize("request_", [None, "x", 1.5, 0x1234, 10**5000], ids=["None", "str", "float", "int", "huge"])
def test_a_raw_ioctl_of_no_kfd_request_is_invalid_argument(kfd: KFD, mock: MockKFD, request_: Any) -> None:
    before = mock.state_digest()
    with pytest.raises(InvalidArgument, match="expected a KfdIoctl request number"):
        kfd.ioctl(request_, bytearray(8))
    assert mock.state_digest() == before


def test_a_raw_ioctl_by_number_names_the_request_when_it_fails(kfd: KFD) -> None:
    with pytest.raises(OSError, match="AMDKFD_IOC_FREE_MEMORY_OF_GPU") as caught:  # used to be AttributeError: .name
        kfd.ioctl(int(KfdIoctl.AMDKFD_IOC_FREE_MEMORY_OF_GPU), kfd_ioctl_free_memory_of_gpu_args(handle=0))
    assert caught.value.errno == errno.EINVAL
