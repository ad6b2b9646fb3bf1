"""Event ioctls and GPU interrupts through raw requests: ids, signal slots, auto-reset, memory faults, virtual waits."""

from __future__ import annotations

import ctypes
import errno
from typing import Any

import pytest

from tinyhil.mocks.kfd import MockKFD
from tinyhil.spec.kfd_events import (
    KFD_EVENT_TIMEOUT_INFINITE,
    UNSIGNALED_EVENT_SLOT,
    EventType,
    WaitResult,
    kfd_event_data,
    kfd_ioctl_create_event_args,
    kfd_ioctl_destroy_event_args,
    kfd_ioctl_reset_event_args,
    kfd_ioctl_set_event_args,
    kfd_ioctl_wait_events_args,
)
from tinyhil.spec.kfd_ioctls import KfdIoctl as K
from tinyhil.spec.kfd_memory import KFD_MMAP_TYPE_EVENTS, AllocMemFlags, kfd_ioctl_free_memory_of_gpu_args
from tinyhil.spec.kfd_process import kfd_ioctl_get_clock_counters_args

E = EventType
R = WaitResult
F = AllocMemFlags
MS = 1_000_000
VA = 0x1000_0000_0000


def _create(raw: Any, event_type: int = E.KFD_IOC_EVENT_SIGNAL, auto_reset: int = 1, page: int = 0) -> Any:
    args = kfd_ioctl_create_event_args(event_type=event_type, auto_reset=auto_reset, event_page_offset=page)
    return raw.ioctl(K.AMDKFD_IOC_CREATE_EVENT, args)


def _wait(raw: Any, ids: list[int], timeout_ms: int, wait_all: bool = False) -> tuple[Any, Any]:
    table = (kfd_event_data * max(len(ids), 1))()
    for entry, event_id in zip(table, ids, strict=False):
        entry.event_id = event_id
    args = kfd_ioctl_wait_events_args(events_ptr=ctypes.addressof(table), num_events=len(ids),
                                           wait_for_all=int(wait_all), timeout=timeout_ms)  # fmt: skip
    raw.ioctl(K.AMDKFD_IOC_WAIT_EVENTS, args)
    return args, table


@pytest.fixture
def page(raw: Any) -> Any:
    """A GTT event page on GPU 0, mapped, passed with the first signal event; returns (va, first event)."""
    gpu_id = raw.acquire(0)
    handle = raw.alloc(0, 0x8000, VA, int(F.KFD_IOC_ALLOC_MEM_FLAGS_GTT)).handle
    raw.map(handle, [gpu_id])
    return handle


def test_signal_events_count_from_1_and_others_from_4096(raw: Any) -> None:
    first, second = _create(raw), _create(raw, E.KFD_IOC_EVENT_DEBUG_EVENT)
    memory, hw = _create(raw, E.KFD_IOC_EVENT_MEMORY), _create(raw, E.KFD_IOC_EVENT_HW_EXCEPTION)
    assert [first.event_id, second.event_id, memory.event_id, hw.event_id] == [1, 2, 4096, 4097]
    assert first.event_trigger_data == 1 and first.event_slot_index == 1
    assert first.event_page_offset == KFD_MMAP_TYPE_EVENTS and memory.event_page_offset == 0
    raw.ioctl(K.AMDKFD_IOC_DESTROY_EVENT, kfd_ioctl_destroy_event_args(event_id=1))
    assert _create(raw).event_id == 1


def test_the_driver_signal_page_holds_255_events(mock: MockKFD, raw: Any) -> None:
    for _ in range(255):
        _create(raw)
    before = mock.state_digest()
    assert raw.errno(K.AMDKFD_IOC_CREATE_EVENT, kfd_ioctl_create_event_args()) == errno.ENOSPC
    assert mock.state_digest() == before


def test_set_and_reset_only_apply_to_signal_events(raw: Any) -> None:
    memory = _create(raw, E.KFD_IOC_EVENT_MEMORY).event_id
    for request, args in ((K.AMDKFD_IOC_SET_EVENT, kfd_ioctl_set_event_args), (K.AMDKFD_IOC_RESET_EVENT,
                          kfd_ioctl_reset_event_args)):  # fmt: skip
        assert raw.errno(request, args(event_id=memory)) == errno.EINVAL
    assert raw.errno(K.AMDKFD_IOC_DESTROY_EVENT, kfd_ioctl_destroy_event_args(event_id=99)) == errno.EINVAL


def test_waits_consume_auto_reset_events_and_time_out_in_virtual_time(mock: MockKFD, raw: Any) -> None:
    auto, manual = _create(raw).event_id, _create(raw, auto_reset=0).event_id
    for event_id in (auto, manual):
        raw.ioctl(K.AMDKFD_IOC_SET_EVENT, kfd_ioctl_set_event_args(event_id=event_id))
    assert _wait(raw, [auto, manual], 10, wait_all=True)[0].wait_result == R.KFD_IOC_WAIT_RESULT_COMPLETE
    assert mock.kernel.now_ns == 0
    assert _wait(raw, [manual], 10)[0].wait_result == R.KFD_IOC_WAIT_RESULT_COMPLETE
    assert _wait(raw, [auto], 7)[0].wait_result == R.KFD_IOC_WAIT_RESULT_TIMEOUT
    assert mock.kernel.now_ns == 7 * MS
    assert _wait(raw, [auto], 0)[0].wait_result == R.KFD_IOC_WAIT_RESULT_TIMEOUT  # an immediate wait: one poll
    assert mock.kernel.now_ns == 7 * MS + 1_000
    assert _wait(raw, [], 5)[0].wait_result == R.KFD_IOC_WAIT_RESULT_COMPLETE  # nothing to wait for


def test_a_set_during_a_wait_wakes_it_and_auto_reset_stays_clear(mock: MockKFD, raw: Any) -> None:
    event_id = _create(raw).event_id
    set_args = kfd_ioctl_set_event_args(event_id=event_id)
    mock.kernel.schedule(3 * MS, lambda: mock.dispatcher.ioctl(K.AMDKFD_IOC_SET_EVENT, set_args))
    assert _wait(raw, [event_id], 100)[0].wait_result == R.KFD_IOC_WAIT_RESULT_COMPLETE
    assert mock.kernel.now_ns == 3 * MS and not mock.process.events[event_id].signaled


def test_infinite_waits_end_when_the_gpu_signals_and_fail_when_nothing_can(mock: MockKFD, raw: Any) -> None:
    event_id = _create(raw).event_id
    set_args = kfd_ioctl_set_event_args(event_id=event_id)
    mock.kernel.schedule(50 * MS, lambda: mock.dispatcher.ioctl(K.AMDKFD_IOC_SET_EVENT, set_args))
    assert _wait(raw, [event_id], KFD_EVENT_TIMEOUT_INFINITE)[0].wait_result == R.KFD_IOC_WAIT_RESULT_COMPLETE
    with pytest.raises(OSError, match="no GPU work is pending") as caught:
        _wait(raw, [event_id], KFD_EVENT_TIMEOUT_INFINITE)
    assert caught.value.errno == errno.EDEADLK and mock.kernel.now_ns == 50 * MS


def test_wait_errors_report_fail(raw: Any) -> None:
    table = (kfd_event_data * 1)()
    table[0].event_id = 1234
    args = kfd_ioctl_wait_events_args(events_ptr=ctypes.addressof(table), num_events=1, timeout=1)
    assert raw.errno(K.AMDKFD_IOC_WAIT_EVENTS, args) == errno.EINVAL
    assert args.wait_result == R.KFD_IOC_WAIT_RESULT_FAIL
    bad_pointer = kfd_ioctl_wait_events_args(events_ptr=16, num_events=1, timeout=1)
    assert raw.errno(K.AMDKFD_IOC_WAIT_EVENTS, bad_pointer) == errno.EFAULT


def test_the_event_page_must_be_a_large_enough_gtt_buffer_given_once(mock: MockKFD, raw: Any, page: int) -> None:
    vram = raw.alloc(0, 0x8000, VA + 0x10000).handle
    small = raw.alloc(0, 0x1000, VA + 0x20000, int(F.KFD_IOC_ALLOC_MEM_FLAGS_GTT)).handle
    for handle in (vram, small, page + 77):
        before = mock.state_digest()
        assert (
            raw.errno(K.AMDKFD_IOC_CREATE_EVENT, kfd_ioctl_create_event_args(event_page_offset=handle)) == errno.EINVAL
        )
        assert mock.state_digest() == before
    _create(raw, page=page)
    assert raw.errno(K.AMDKFD_IOC_CREATE_EVENT, kfd_ioctl_create_event_args(event_page_offset=page)) == errno.EINVAL
    free = kfd_ioctl_free_memory_of_gpu_args(handle=page)
    assert raw.errno(K.AMDKFD_IOC_FREE_MEMORY_OF_GPU, free) == errno.EPERM


@pytest.mark.parametrize(("kind", "context"), [("TRAP", 0xF000_0002), ("END_OF_PIPE", 2)])
def test_gpu_interrupts_fire_events_whose_slot_was_written(
    mock: MockKFD, raw: Any, page: int, kind: str, context: int
) -> None:
    fake = mock.gpus[0].port
    first, second = _create(raw, page=page).event_id, _create(raw).event_id
    assert second == 2
    fake.interrupt(kind, context=context)  # slot untouched: nothing fires
    assert _wait(raw, [second], 1)[0].wait_result == R.KFD_IOC_WAIT_RESULT_TIMEOUT
    fake.write(VA + 8 * second, (second).to_bytes(8, "little"))
    fake.interrupt_at(2 * MS, kind, context=context)  # TRAP ids keep 28 bits, so 0xF000_0002 names event 2
    assert _wait(raw, [first, second], 50)[0].wait_result == R.KFD_IOC_WAIT_RESULT_COMPLETE
    assert int.from_bytes(fake.read(VA + 8 * second, 8), "little") == UNSIGNALED_EVENT_SLOT
    assert mock.kernel.now_ns == 1 * MS + 2 * MS


def test_an_interrupt_with_a_stale_id_finds_written_slots_by_scanning(mock: MockKFD, raw: Any, page: int) -> None:
    fake = mock.gpus[0].port
    event_id = _create(raw, page=page).event_id
    fake.write(VA + 8 * event_id, (1).to_bytes(8, "little"))
    fake.interrupt("END_OF_PIPE", context=999)
    assert _wait(raw, [event_id], 0)[0].wait_result == R.KFD_IOC_WAIT_RESULT_COMPLETE


def test_a_memory_fault_sets_memory_events_with_the_faulting_page(mock: MockKFD, raw: Any) -> None:
    memory = _create(raw, E.KFD_IOC_EVENT_MEMORY).event_id
    signal = _create(raw).event_id
    mock.gpus[1].port.interrupt_at(4 * MS, "MEMORY_FAULT", fault_va=0x1234_5678)
    args, table = _wait(raw, [signal, memory], 100)
    assert args.wait_result == R.KFD_IOC_WAIT_RESULT_COMPLETE and mock.kernel.now_ns == 4 * MS
    data = table[1].memory_exception_data
    assert (data.va, data.gpu_id, data.ErrorType) == (0x1234_5000, raw.gpu_id(1), 0)
    assert (data.failure.NotPresent, data.failure.ReadOnly, data.failure.NoExecute, data.failure.imprecise) == (
        1,
        0,
        0,
        1,
    )
    assert table[0].memory_exception_data.va == 0  # only memory events carry data
    assert mock.faults == [(raw.gpu_id(1), 0x1234_5678)] and mock.unhandled_faults == []


def test_a_queue_error_fires_the_hardware_exception_events(mock: MockKFD, raw: Any) -> None:
    hardware = _create(raw, E.KFD_IOC_EVENT_HW_EXCEPTION, auto_reset=0).event_id
    signal = _create(raw).event_id
    mock.gpus[0].port.interrupt_at(3 * MS, "QUEUE_ERROR")
    args, _ = _wait(raw, [signal, hardware], 100)
    assert args.wait_result == R.KFD_IOC_WAIT_RESULT_COMPLETE and mock.kernel.now_ns == 3 * MS
    assert _wait(raw, [signal], 0)[0].wait_result == R.KFD_IOC_WAIT_RESULT_TIMEOUT  # the signal event did not fire
    assert [gpu_id for gpu_id, _ in mock.queue_errors] == [raw.gpu_id(0)]


def test_a_fault_nobody_listens_for_is_kept_as_unhandled(mock: MockKFD, raw: Any) -> None:
    mock.gpus[0].port.interrupt("MEMORY_FAULT", fault_va=0x42)
    mock.gpus[0].port.interrupt("PERFCOUNTER")  # unknown kinds are logged and ignored
    assert mock.unhandled_faults == [(raw.gpu_id(0), 0x42)]


def test_interrupts_before_any_process_are_dropped(mock: MockKFD) -> None:
    mock.gpus[0].port.interrupt("MEMORY_FAULT", fault_va=0x42)
    assert not mock.has_process and mock.faults == []


def test_clock_counters(mock: MockKFD, raw: Any) -> None:
    mock.kernel.run_for(5_000)
    args = kfd_ioctl_get_clock_counters_args(gpu_id=raw.gpu_id(1))
    raw.ioctl(K.AMDKFD_IOC_GET_CLOCK_COUNTERS, args)
    assert (args.gpu_clock_counter, args.cpu_clock_counter, args.system_clock_counter, args.system_clock_freq) == (
        500, 5_000, 5_000, 1_000_000_000)  # fmt: skip
