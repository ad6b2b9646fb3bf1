"""Event ioctls and GPU interrupts: signal events, memory-exception events, and waits in virtual time.

As in ``kfd_events.c``: signal events (ids 1..) own a u64 slot in the signal page (the client's GTT event page, or
a page of the driver's own); a TRAP / END_OF_PIPE (RELEASE_MEM) interrupt carries an event id in its context, and
fires that signal event only if its slot no longer holds ``UNSIGNALED_EVENT_SLOT`` (the GPU wrote the slot first),
acknowledging the slot. A QUEUE_ERROR is logged, kept in ``MockKFD.queue_errors`` and fires every hardware-exception
event (what amdkfd signals after the reset that recovers a failed queue). Other
events get ids from 4096. A GPU memory fault sets every memory event with the faulting page's address (the kernel
reports the page, ``va & ~0xfff``, and marks it ``imprecise``); with no memory event the fault is logged and kept
in ``MockKFD.unhandled_faults``. The kernel would also send SIGSEGV to the process, which the mock does not.

WAIT_EVENTS runs the shared event kernel in virtual time: ``timeout`` milliseconds become virtual nanoseconds (an
immediate wait still advances one poll quantum, so a polling client always makes progress), and an infinite wait
that nothing can ever satisfy fails with ``EDEADLK`` instead of hanging.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
from typing import TYPE_CHECKING, Any, Final

from tinyhil.align import round_down
from tinyhil.emulators.kernel import MAX_EVENTS_PER_WAIT, NoProgress, VirtualTimeout
from tinyhil.mocks.kfd._errno import LOG, fail
from tinyhil.mocks.kfd.gpu_port import InterruptKind
from tinyhil.mocks.kfd.state import Event, GpuDevice, MemKind, Waiter, lowest_free
from tinyhil.spec.amdgpu import PAGE_BYTES
from tinyhil.spec.kfd_events import (
    EVENT_ID_BITS_END_OF_PIPE,
    EVENT_ID_BITS_SDMA_TRAP,
    KFD_EVENT_TIMEOUT_INFINITE,
    KFD_FIRST_NONSIGNAL_EVENT_ID,
    KFD_SIGNAL_EVENT_LIMIT,
    KFD_SIGNAL_PAGE_BYTES,
    UNSIGNALED_EVENT_SLOT,
    EventType,
    HwExceptionResetCause,
    HwExceptionResetType,
    WaitResult,
    kfd_event_data,
    kfd_hsa_hw_exception_data,
    kfd_hsa_memory_exception_data,
    kfd_ioctl_create_event_args,
    kfd_ioctl_destroy_event_args,
    kfd_ioctl_reset_event_args,
    kfd_ioctl_set_event_args,
    kfd_ioctl_wait_events_args,
)
from tinyhil.spec.kfd_memory import KFD_MMAP_TYPE_EVENTS, handle_gpu_id, handle_idr

if TYPE_CHECKING:
    from tinyhil.mocks.kfd.device import MockKFD

__all__ = ["IMMEDIATE_POLL_NS", "EventIoctls"]

IMMEDIATE_POLL_NS: Final = 1_000
_NS_PER_MS: Final = 1_000_000
_SLOT_BYTES: Final = 8
_DRIVER_PAGE_SLOTS: Final = 256  # "oldest user mode expects 256 event slots"
_EVENT_DATA_BYTES: Final = ctypes.sizeof(kfd_event_data)
_WAITER_BYTES: Final = 56  # sizeof(struct kfd_event_waiter) on x86-64
_KMALLOC_MAX_BYTES: Final = 4 << 20
_E = EventType
_SIGNAL_TYPES: Final = (_E.KFD_IOC_EVENT_SIGNAL, _E.KFD_IOC_EVENT_DEBUG_EVENT)
_EXCEPTION_TYPES: Final = (_E.KFD_IOC_EVENT_MEMORY, _E.KFD_IOC_EVENT_HW_EXCEPTION)  # events that carry data
_R = WaitResult


class EventIoctls:
    """The event half of the ioctl table, and the interrupt handler the GPUs call."""

    def __init__(self, kfd: MockKFD) -> None:
        self.kfd = kfd

    # --- signal page -----------------------------------------------------------------------------------------------
    def _slot(self, event_id: int) -> int:
        page = self.kfd.process.signal_page
        start = event_id * _SLOT_BYTES
        if page is None or start + _SLOT_BYTES > len(page):
            return UNSIGNALED_EVENT_SLOT
        return int.from_bytes(page[start : start + _SLOT_BYTES], "little")

    def _set_slot(self, event_id: int, value: int) -> None:
        page = self.kfd.process.signal_page
        if page is not None:
            page[event_id * _SLOT_BYTES : (event_id + 1) * _SLOT_BYTES] = value.to_bytes(_SLOT_BYTES, "little")

    def _kmap_event_page(self, what: str, handle: int) -> None:
        process = self.kfd.process
        if process.signal_page is not None:
            fail(errno.EINVAL, f"{what}: event_page_offset={handle:#x} but the event page is already set")
        pdd = self.kfd.memory.pdd(handle_gpu_id(handle), what)
        self.kfd.memory.bind(pdd, what)
        allocation = pdd.allocations.get(handle_idr(handle))
        if allocation is None or allocation.kind is not MemKind.GTT:
            fail(errno.EINVAL, f"{what}: event_page_offset={handle:#x} is not the handle of a GTT allocation")
        if allocation.size < KFD_SIGNAL_PAGE_BYTES:
            fail(errno.EINVAL, f"{what}: event page of {allocation.size:#x} bytes, needs {KFD_SIGNAL_PAGE_BYTES:#x}")
        allocation.backing[:KFD_SIGNAL_PAGE_BYTES] = b"\xff" * KFD_SIGNAL_PAGE_BYTES
        process.signal_page = allocation.backing
        process.signal_mapped_size = allocation.size
        process.signal_handle = handle

    # --- create / destroy / set / reset ------------------------------------------------------------------------------
    def _op_create_event(self, args: kfd_ioctl_create_event_args) -> None:
        what = "AMDKFD_IOC_CREATE_EVENT"
        if args.event_page_offset:
            self._kmap_event_page(what, args.event_page_offset)
        process = self.kfd.process
        args.event_page_offset = 0
        if args.event_type in _SIGNAL_TYPES:
            if process.signal_mapped_size and process.signal_event_count == process.signal_mapped_size // _SLOT_BYTES:
                fail(errno.ENOSPC, f"{what}: all {process.signal_event_count - 1} signal event slots are in use")
            if process.signal_page is None:
                process.signal_page = memoryview(self.kfd.host_memory(KFD_SIGNAL_PAGE_BYTES))
                process.signal_page[:] = b"\xff" * KFD_SIGNAL_PAGE_BYTES
                process.signal_mapped_size = _DRIVER_PAGE_SLOTS * _SLOT_BYTES
            slots = min(process.signal_mapped_size // _SLOT_BYTES, KFD_SIGNAL_EVENT_LIMIT)
            event_id = lowest_free(process.events, 1, slots)
            if event_id is None:
                fail(errno.ENOSPC, f"{what}: no free signal event slot below {slots}")
            self._set_slot(event_id, UNSIGNALED_EVENT_SLOT)
            process.signal_event_count += 1
            args.event_page_offset = KFD_MMAP_TYPE_EVENTS
            args.event_slot_index = event_id
        else:
            event_id = self._free_other_id()
        process.events[event_id] = Event(event_id, args.event_type, args.auto_reset != 0)
        args.event_id = args.event_trigger_data = event_id

    def _free_other_id(self) -> int:
        taken = [event_id for event_id in self.kfd.process.events if event_id >= KFD_FIRST_NONSIGNAL_EVENT_ID]
        event_id = lowest_free(set(taken), KFD_FIRST_NONSIGNAL_EVENT_ID, KFD_FIRST_NONSIGNAL_EVENT_ID + len(taken) + 1)
        assert event_id is not None  # len(taken) + 1 candidates, len(taken) of them taken
        return event_id

    def _event(self, what: str, event_id: int) -> Event:
        event = self.kfd.process.events.get(event_id)
        if event is None:
            fail(errno.EINVAL, f"{what}: event_id={event_id} names no event of this process")
        return event

    def _op_destroy_event(self, args: kfd_ioctl_destroy_event_args) -> None:
        event = self._event("AMDKFD_IOC_DESTROY_EVENT", args.event_id)
        for waiter in event.waiters:
            waiter.event = None
        if event.type in _SIGNAL_TYPES:
            self.kfd.process.signal_event_count -= 1
        del self.kfd.process.events[event.event_id]

    def _cpu_signalable(self, what: str, event_id: int) -> Event:
        event = self._event(what, event_id)
        if event.type != _E.KFD_IOC_EVENT_SIGNAL:
            fail(
                errno.EINVAL,
                f"{what}: event_id={event_id} has type {event.type}; only signal events are set by the CPU",
            )
        return event

    def _op_set_event(self, args: kfd_ioctl_set_event_args) -> None:
        self.set_event(self._cpu_signalable("AMDKFD_IOC_SET_EVENT", args.event_id))

    def _op_reset_event(self, args: kfd_ioctl_reset_event_args) -> None:
        self._cpu_signalable("AMDKFD_IOC_RESET_EVENT", args.event_id).signaled = False

    @staticmethod
    def set_event(event: Event) -> None:
        """``set_event``: an auto-reset event stays unsignalled when it wakes a waiter."""
        event.signaled = not event.auto_reset or not event.waiters
        for waiter in event.waiters:
            waiter.activated = True

    # --- wait ----------------------------------------------------------------------------------------------------
    def _op_wait_events(self, args: kfd_ioctl_wait_events_args) -> None:
        waiters: list[Waiter] = []
        try:
            self._wait(args, waiters)
        except OSError:
            args.wait_result = _R.KFD_IOC_WAIT_RESULT_FAIL
            raise
        finally:
            for waiter in waiters:
                if waiter.event is not None and waiter in waiter.event.waiters:
                    waiter.event.waiters.remove(waiter)
        if args.wait_result == _R.KFD_IOC_WAIT_RESULT_FAIL:
            fail(errno.EIO, "AMDKFD_IOC_WAIT_EVENTS: an awaited event was destroyed")

    def _wait(self, args: kfd_ioctl_wait_events_args, waiters: list[Waiter]) -> None:
        what = "AMDKFD_IOC_WAIT_EVENTS"
        if args.num_events * _WAITER_BYTES > _KMALLOC_MAX_BYTES:
            fail(errno.ENOMEM, f"{what}: num_events={args.num_events} is too many to wait on")
        for index in range(args.num_events):
            raw = self.kfd.user.read(f"{what} events_ptr[{index}]", args.events_ptr + index * _EVENT_DATA_BYTES,
                                     _EVENT_DATA_BYTES)  # fmt: skip
            event = self._event(what, kfd_event_data.from_buffer_copy(raw).event_id)
            waiter = Waiter(event, event.signaled)
            event.signaled = event.signaled and not event.auto_reset
            if not waiter.activated:
                event.waiters.append(waiter)
            waiters.append(waiter)
        wait_all = args.wait_for_all != 0

        def result() -> int:
            return self._condition(wait_all, waiters)

        if result() == _R.KFD_IOC_WAIT_RESULT_TIMEOUT:
            self._run(what, args.timeout, lambda: result() != _R.KFD_IOC_WAIT_RESULT_TIMEOUT)
        args.wait_result = result()
        if args.wait_result == _R.KFD_IOC_WAIT_RESULT_COMPLETE:
            for index, waiter in enumerate(waiters):  # copy_signaled_event_data: memory and HW exception data
                fired = waiter.event
                if waiter.activated and fired is not None and fired.type in _EXCEPTION_TYPES and fired.exception_data:
                    address = args.events_ptr + index * _EVENT_DATA_BYTES
                    self.kfd.user.write(f"{what} events_ptr[{index}]", address, fired.exception_data)

    @staticmethod
    def _condition(wait_all: bool, waiters: list[Waiter]) -> int:
        """``test_event_condition``."""
        activated = 0
        for waiter in waiters:
            if waiter.event is None:
                return _R.KFD_IOC_WAIT_RESULT_FAIL
            if waiter.activated:
                if not wait_all:
                    return _R.KFD_IOC_WAIT_RESULT_COMPLETE
                activated += 1
        return _R.KFD_IOC_WAIT_RESULT_COMPLETE if activated == len(waiters) else _R.KFD_IOC_WAIT_RESULT_TIMEOUT

    def _run(self, what: str, timeout_ms: int, done: Any) -> None:
        kernel = self.kfd.kernel
        if timeout_ms != KFD_EVENT_TIMEOUT_INFINITE:
            timeout_ns = max(timeout_ms * _NS_PER_MS, IMMEDIATE_POLL_NS)
            with contextlib.suppress(VirtualTimeout):
                kernel.run_until(done, timeout_ns, what=f"{what} ({timeout_ms} ms)")
            return
        stuck_at, stuck_events = kernel.now_ns, 0
        while not done():
            if not kernel.step():
                fail(errno.EDEADLK, f"{what}: infinite wait, but no GPU work is pending and no event can fire")
            stuck_events = stuck_events + 1 if kernel.now_ns == stuck_at else 0
            stuck_at = kernel.now_ns
            if stuck_events > MAX_EVENTS_PER_WAIT:
                raise NoProgress(f"{what}: {stuck_events} events ran at {stuck_at} ns without an event firing")

    # --- interrupts ----------------------------------------------------------------------------------------------
    def interrupt(self, gpu: GpuDevice, interrupt: Any) -> None:
        """Route one GPU interrupt (``on_interrupt``); kinds are matched by name (see :class:`~.port.Interrupt`)."""
        kind = getattr(getattr(interrupt, "kind", None), "name", repr(getattr(interrupt, "kind", None)))
        if not self.kfd.has_process:
            LOG.debug("interrupt %s from gpu_id=%#x with no KFD process: dropped", kind, gpu.gpu_id)
        elif kind == InterruptKind.MEMORY_FAULT.name:
            self.vm_fault(gpu, int(getattr(interrupt, "fault_va", 0) or 0))
        elif kind == InterruptKind.TRAP.name:
            self.signal_interrupt(int(getattr(interrupt, "context", 0)), EVENT_ID_BITS_SDMA_TRAP)
        elif kind == InterruptKind.END_OF_PIPE.name:
            self.signal_interrupt(int(getattr(interrupt, "context", 0)), EVENT_ID_BITS_END_OF_PIPE)
        elif kind == InterruptKind.QUEUE_ERROR.name:
            # amdkfd learns of a hung or failed queue only through the reset that recovers it, which fires the
            # hardware-exception events; the mock also records the reason.
            message = str(getattr(interrupt, "message", ""))
            LOG.warning("queue error on gpu_id=%#x: %s", gpu.gpu_id, message)
            self.kfd.queue_errors.append((gpu.gpu_id, message))
            self.hw_exception(gpu)
        else:
            LOG.info("interrupt of kind %s from gpu_id=%#x is not handled by MOCKKFD", kind, gpu.gpu_id)

    def signal_interrupt(self, context_id: int, valid_bits: int) -> None:
        """``kfd_signal_event_interrupt``: fire the signal event the context id names, if its slot was written."""
        if self.kfd.process.signal_page is None:
            return
        event = self._signaled_by_partial_id(context_id & ((1 << valid_bits) - 1), valid_bits)
        if event is not None:
            self._set_from_interrupt(event)
            return
        for event_id, candidate in sorted(self.kfd.process.events.items()):
            if event_id < KFD_SIGNAL_EVENT_LIMIT and self._slot(event_id) != UNSIGNALED_EVENT_SLOT:
                self._set_from_interrupt(candidate)

    def _signaled_by_partial_id(self, event_id: int, bits: int) -> Event | None:
        events = self.kfd.process.events
        if bits > 31 or (1 << bits) >= KFD_SIGNAL_EVENT_LIMIT:
            if event_id >= KFD_SIGNAL_EVENT_LIMIT or self._slot(event_id) == UNSIGNALED_EVENT_SLOT:
                return None
            return events.get(event_id)
        for candidate in range(event_id, KFD_SIGNAL_EVENT_LIMIT, 1 << bits):
            if self._slot(candidate) != UNSIGNALED_EVENT_SLOT and candidate in events:
                return events[candidate]
        return None

    def _set_from_interrupt(self, event: Event) -> None:
        if event.type in _SIGNAL_TYPES:
            self._set_slot(event.event_id, UNSIGNALED_EVENT_SLOT)
            self.set_event(event)

    def hw_exception(self, gpu: GpuDevice) -> None:
        """``kfd_signal_reset_event``, as after the reset that recovers a failed queue: every hardware-exception
        event fires, carrying ``kfd_hsa_hw_exception_data`` (gpu_id, reset_cause GPU_HANG). The mock resets only
        the failed queue, so it reports a per-engine reset with memory kept (amdkfd's whole-GPU reset reports
        WHOLE_GPU_RESET and memory_lost 1)."""
        data = kfd_hsa_hw_exception_data(
            reset_type=HwExceptionResetType.KFD_HW_EXCEPTION_PER_ENGINE_RESET,
            reset_cause=HwExceptionResetCause.KFD_HW_EXCEPTION_GPU_HANG, memory_lost=0, gpu_id=gpu.gpu_id,
        )  # fmt: skip
        for _, event in sorted(self.kfd.process.events.items()):
            if event.type == _E.KFD_IOC_EVENT_HW_EXCEPTION:
                event.exception_data = bytes(data)
                self.set_event(event)

    def vm_fault(self, gpu: GpuDevice, va: int) -> None:
        """``kfd_signal_vm_fault_event``: every memory event fires carrying the faulting page."""
        data = kfd_hsa_memory_exception_data(va=round_down(va, PAGE_BYTES), gpu_id=gpu.gpu_id, ErrorType=0)
        data.failure.NotPresent, data.failure.imprecise = 1, 1
        self.kfd.faults.append((gpu.gpu_id, va))
        memory_events = [
            event
            for event_id, event in sorted(self.kfd.process.events.items())
            if event_id >= KFD_FIRST_NONSIGNAL_EVENT_ID and event.type == _E.KFD_IOC_EVENT_MEMORY
        ]
        for event in memory_events:
            self.set_event(event)
            event.exception_data = bytes(data)
        if not memory_events:
            LOG.warning("GPU memory fault at %#x on gpu_id=%#x and no memory event to report it", va, gpu.gpu_id)
            self.kfd.unhandled_faults.append((gpu.gpu_id, va))
