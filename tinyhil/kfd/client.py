"""The reference KFD client: one process's connection to amdkfd through the file-I/O seam.

The same code runs on a machine with ``/dev/kfd`` (:class:`~tinyhil.fileio.RealFileIO`) and on MOCKKFD. Time
comes from ``GET_CLOCK_COUNTERS`` (virtual on MOCKKFD), and every wait also waits on the process's memory-exception
and hardware-exception events (one ``WAIT_EVENTS`` with them and the awaited ones, ``wait_for_all`` 0, as ROCr
waits), so a GPU memory fault surfaces as :class:`KfdMemoryFault` naming the address, and a queue amdkfd had to
reset (a hang, a wave trap) as :class:`KfdHwException` naming the GPU, instead of a timeout.

amdkfd binds the signal-event page to the process for its lifetime; open one :class:`KFD` per process.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, ParamSpec, TypeVar

from tinyhil._check import check_int
from tinyhil._state import requires_open
from tinyhil.align import ceil_div
from tinyhil.allocator import RangeAllocator
from tinyhil.errors import DeviceError, DeviceTimeout, InvalidArgument
from tinyhil.fileio import FileIO, IoctlArg, RealFileIO
from tinyhil.kfd.gpu import VA_WINDOW_BASE, VA_WINDOW_BYTES, Allocation, KfdGpu, MemoryDomain
from tinyhil.kfd.topology import KfdNode, Topology, read_topology
from tinyhil.spec.kfd_events import (
    KFD_EVENT_TIMEOUT_IMMEDIATE,
    KFD_EVENT_TIMEOUT_INFINITE,
    KFD_SIGNAL_PAGE_BYTES,
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
from tinyhil.spec.kfd_ioctls import KFD_IOCTL_MAJOR_VERSION, KfdIoctl
from tinyhil.spec.kfd_memory import kfd_ioctl_get_process_apertures_new_args, kfd_process_device_apertures
from tinyhil.spec.kfd_process import kfd_ioctl_get_clock_counters_args, kfd_ioctl_get_version_args
from tinyhil.spec.kfd_topology import KFD_DEVICE_PATH

__all__ = ["KFD", "ClockCounters", "KfdEvent", "KfdHwException", "KfdMemoryFault"]

_A = TypeVar("_A", bound=IoctlArg)
_P = ParamSpec("_P")
_R = TypeVar("_R")
_VA_ALIGNMENT: Final = 0x10000
_SLOT_BYTES: Final = 8
_NS_PER_MS: Final = 1_000_000
_E = EventType


def _kfd_request(request: Any) -> KfdIoctl:
    """``request`` as one of amdkfd's request numbers."""
    if isinstance(request, KfdIoctl):
        return request
    try:
        return KfdIoctl(request)
    except ValueError:
        shown = f"{request:#x}" if isinstance(request, int) else f"{type(request).__name__} object"
        raise InvalidArgument(f"request={shown}, expected a KfdIoctl request number") from None


class KfdMemoryFault(DeviceError):
    """A GPU accessed an address no buffer is mapped at; amdkfd reported it on the memory-exception event."""

    def __init__(self, gpu_id: int, va: int, data: kfd_hsa_memory_exception_data) -> None:
        failure = data.failure
        flags = (
            ("page not present", failure.NotPresent),
            ("read-only page", failure.ReadOnly),
            ("no-execute page", failure.NoExecute),
            ("imprecise", failure.imprecise),
        )
        reasons = [name for name, flag in flags if flag]
        super().__init__(
            f"GPU memory fault on gpu_id={gpu_id:#x} at VA {va:#x} ({', '.join(reasons) or 'no details'}): "
            "no buffer is mapped there; check the addresses in the packets and kernel arguments",
            op="memory fault",
        )
        self.gpu_id = gpu_id
        self.va = va


def _enum_name(enum: type[HwExceptionResetType] | type[HwExceptionResetCause], value: int) -> str:
    return enum(value).name if value in enum._value2member_map_ else f"{value:#x}"


class KfdHwException(DeviceError):
    """amdkfd reported a hardware exception on ``gpu_id``: a queue failed (hung, or stopped by a wave trap) and was
    reset. Fields are the event's ``kfd_hsa_hw_exception_data`` (docs/mockkfd.md "Events, faults and time")."""

    def __init__(self, gpu_id: int, data: kfd_hsa_hw_exception_data) -> None:
        self.gpu_id = gpu_id
        self.reset_type, self.reset_cause, self.memory_lost = data.reset_type, data.reset_cause, bool(data.memory_lost)
        super().__init__(
            f"GPU hardware exception on gpu_id={gpu_id:#x}: {_enum_name(HwExceptionResetCause, data.reset_cause)}, "
            f"{_enum_name(HwExceptionResetType, data.reset_type)}, memory {'lost' if self.memory_lost else 'kept'}; "
            "amdkfd reset the failed queue: replace it to go on",
            op="hw exception",
        )


@dataclass(frozen=True, slots=True)
class ClockCounters:
    """``GET_CLOCK_COUNTERS``: the GPU counter (100 MHz on AMD GPUs) and CPU / system nanosecond clocks."""

    gpu_clock_counter: int
    cpu_clock_counter: int
    system_clock_counter: int
    system_clock_freq: int


@dataclass(eq=False)
class KfdEvent:
    """A KFD event. Signal events own a slot in the event page at GPU VA ``mailbox_va``: the GPU writes the slot
    (any value but all-ones), then raises an interrupt with ``event_id`` to fire the event."""

    kfd: KFD
    event_id: int
    event_type: int
    auto_reset: bool
    mailbox_va: int | None = None
    destroyed: bool = False

    def set(self) -> None:
        self.kfd.ioctl(KfdIoctl.AMDKFD_IOC_SET_EVENT, kfd_ioctl_set_event_args(event_id=self.event_id))

    def reset(self) -> None:
        self.kfd.ioctl(KfdIoctl.AMDKFD_IOC_RESET_EVENT, kfd_ioctl_reset_event_args(event_id=self.event_id))

    def destroy(self) -> None:
        if not self.destroyed:
            self.kfd.ioctl(KfdIoctl.AMDKFD_IOC_DESTROY_EVENT, kfd_ioctl_destroy_event_args(event_id=self.event_id))
            self.destroyed = True


class KFD:
    """Open ``/dev/kfd`` through ``fileio`` (default: this machine), check the interface version, read the topology.

    Raises:
        FileNotFoundError: no ``/dev/kfd`` (no amdkfd on this machine).
        DeviceError: an interface major version other than 1, or GPU apertures that exclude the client's VA window.
    """

    def __init__(self, fileio: FileIO | None = None) -> None:
        self.fileio: FileIO = RealFileIO() if fileio is None else fileio
        self.fd = self.fileio.open(KFD_DEVICE_PATH, os.O_RDWR)
        self.devices: dict[int, KfdGpu] = {}
        self.events: list[KfdEvent] = []
        self.faults: list[KfdMemoryFault] = []
        self._event_page: Allocation | None = None
        try:
            version = self.ioctl(KfdIoctl.AMDKFD_IOC_GET_VERSION, kfd_ioctl_get_version_args())
            self.version = (version.major_version, version.minor_version)
            if version.major_version != KFD_IOCTL_MAJOR_VERSION:
                raise DeviceError(f"amdkfd speaks interface {self.version}, this client needs major version 1")
            self.topology: Topology = read_topology(self.fileio)
            self._check_apertures()
            self.va_space = RangeAllocator(VA_WINDOW_BASE, VA_WINDOW_BYTES, _VA_ALIGNMENT)
            self.memory_event = self._create_event(_E.KFD_IOC_EVENT_MEMORY, auto_reset=True)
            self.hw_exception_event = self._create_event(_E.KFD_IOC_EVENT_HW_EXCEPTION, auto_reset=True)
        except BaseException:
            self.fileio.close(self.fd)
            raise

    @requires_open
    def ioctl(self, request: KfdIoctl, args: _A) -> _A:
        """Issue ``request`` on /dev/kfd; ``args`` is filled in place and returned.

        Raises:
            InvalidArgument: ``request`` is not one of amdkfd's request numbers (a :class:`KfdIoctl`).
            OSError: the kernel's errno, with the request named in the message.
        """
        request = _kfd_request(request)
        try:
            self.fileio.ioctl(self.fd, request, args)
        except OSError as exc:
            if exc.strerror and request.name in exc.strerror:
                raise
            raise OSError(exc.errno, f"{request.name} failed: {exc.strerror}") from exc
        return args

    def _check_apertures(self) -> None:
        count = self.ioctl(KfdIoctl.AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, kfd_ioctl_get_process_apertures_new_args())
        table = (kfd_process_device_apertures * max(count.num_of_nodes, 1))()
        args = kfd_ioctl_get_process_apertures_new_args(
            kfd_process_device_apertures_ptr=ctypes.addressof(table), num_of_nodes=count.num_of_nodes
        )
        self.ioctl(KfdIoctl.AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, args)
        for aperture in table[: args.num_of_nodes]:
            base, limit = aperture.gpuvm_base, aperture.gpuvm_limit
            if not base <= VA_WINDOW_BASE <= VA_WINDOW_BASE + VA_WINDOW_BYTES - 1 <= limit:
                raise DeviceError(
                    f"gpu_id={aperture.gpu_id:#x} maps VAs {base:#x}..{limit:#x}, which excludes the client's "
                    f"window at {VA_WINDOW_BASE:#x}+{VA_WINDOW_BYTES:#x}"
                )

    # --- devices -------------------------------------------------------------------------------------------------
    @property
    def gpus(self) -> tuple[KfdNode, ...]:
        return self.topology.gpus

    @requires_open
    def device(self, index: int = 0) -> KfdGpu:
        """GPU ``index`` of the topology (0-based), its render node opened and VM acquired on first use."""
        check_int("index", index, min_value=0)
        if index >= len(self.gpus):
            raise InvalidArgument(f"index={index}, expected < {len(self.gpus)} (the GPUs: {list(self.gpus)})")
        node = self.gpus[index]
        if node.gpu_id not in self.devices:
            device = KfdGpu(self, node)
            self.devices[node.gpu_id] = device
            if self._event_page is not None:
                self._event_page.device.map(self._event_page, [device])
        return self.devices[node.gpu_id]

    @requires_open
    def clock_counters(self, device: KfdGpu | None = None) -> ClockCounters:
        gpu_id = 0 if device is None else device.gpu_id
        args = self.ioctl(KfdIoctl.AMDKFD_IOC_GET_CLOCK_COUNTERS, kfd_ioctl_get_clock_counters_args(gpu_id=gpu_id))
        return ClockCounters(args.gpu_clock_counter, args.cpu_clock_counter, args.system_clock_counter,
                             args.system_clock_freq)  # fmt: skip

    @requires_open
    def now_ns(self) -> int:
        """The system clock in nanoseconds as amdkfd reports it (virtual time on MOCKKFD)."""
        counters = self.clock_counters()
        return counters.system_clock_counter * 1_000_000_000 // max(counters.system_clock_freq, 1)

    # --- events --------------------------------------------------------------------------------------------------
    def _create_event(self, event_type: int, *, auto_reset: bool, page_handle: int = 0) -> KfdEvent:
        args = kfd_ioctl_create_event_args(event_type=event_type, auto_reset=int(auto_reset),
                                             event_page_offset=page_handle)  # fmt: skip
        self.ioctl(KfdIoctl.AMDKFD_IOC_CREATE_EVENT, args)
        event = KfdEvent(self, args.event_id, event_type, auto_reset)
        if event_type == _E.KFD_IOC_EVENT_SIGNAL and self._event_page is not None:
            event.mailbox_va = self._event_page.va + args.event_slot_index * _SLOT_BYTES
        self.events.append(event)
        return event

    @requires_open
    def create_event(self, *, auto_reset: bool = True) -> KfdEvent:
        """A signal event; the first one allocates the GTT event page (on GPU 0, mapped on every open GPU)."""
        handle = 0
        if self._event_page is None:
            owner = next(iter(self.devices.values()), None) or self.device(0)
            self._event_page = owner.alloc(KFD_SIGNAL_PAGE_BYTES, MemoryDomain.GTT, map_to=list(self.devices.values()))
            handle = self._event_page.handle
        return self._create_event(_E.KFD_IOC_EVENT_SIGNAL, auto_reset=auto_reset, page_handle=handle)

    def _wait_raw(self, events: Sequence[KfdEvent], timeout_ms: int, wait_all: bool) -> bool:
        table = (kfd_event_data * max(len(events), 1))()
        for entry, event in zip(table, events, strict=False):
            entry.event_id = event.event_id
        args = kfd_ioctl_wait_events_args(events_ptr=ctypes.addressof(table), num_events=len(events),
                                            wait_for_all=int(wait_all), timeout=timeout_ms)  # fmt: skip
        self.ioctl(KfdIoctl.AMDKFD_IOC_WAIT_EVENTS, args)
        for entry, event in zip(table, events, strict=False):
            data = entry.memory_exception_data
            if event is self.memory_event and data.gpu_id:
                fault = KfdMemoryFault(data.gpu_id, data.va, data)
                self.faults.append(fault)
                raise fault
            hw = entry.hw_exception_data  # copied back by amdkfd since Linux 6.8 (kfd_ioctl 1.15)
            if event is self.hw_exception_event and hw.gpu_id:
                raise KfdHwException(hw.gpu_id, hw)
        return args.wait_result == WaitResult.KFD_IOC_WAIT_RESULT_COMPLETE

    @requires_open
    def wait_events(self, events: Sequence[KfdEvent], *, timeout_ms: int, wait_all: bool = False) -> bool:
        """Wait until any (or all) of ``events`` fire; return whether they did within ``timeout_ms``.

        Raises:
            KfdMemoryFault: a GPU memory fault was reported meanwhile.
            KfdHwException: amdkfd reset a failed queue meanwhile.
        """
        check_int("timeout_ms", timeout_ms, min_value=0, max_value=KFD_EVENT_TIMEOUT_INFINITE)
        exceptions = [self.memory_event, self.hw_exception_event]
        if not wait_all:
            return self._wait_raw([*events, *exceptions], timeout_ms, wait_all=False)
        complete = self._wait_raw(events, timeout_ms, wait_all=True)
        self._wait_raw(exceptions, KFD_EVENT_TIMEOUT_IMMEDIATE, wait_all=False)
        return complete

    @requires_open
    def wait(self, events: KfdEvent | Sequence[KfdEvent], *, timeout_ms: int, wait_all: bool = False) -> None:
        """:meth:`wait_events`, raising :class:`~tinyhil.errors.DeviceTimeout` when the time runs out."""
        targets = [events] if isinstance(events, KfdEvent) else list(events)
        if not self.wait_events(targets, timeout_ms=timeout_ms, wait_all=wait_all):
            ids = [event.event_id for event in targets]
            raise DeviceTimeout(f"timed out waiting {timeout_ms} ms for {'all' if wait_all else 'any'} of events {ids}")

    @requires_open
    def wait_value(
        self,
        allocation: Allocation,
        offset: int,
        until: int | Callable[[int], bool],
        *,
        timeout_ms: int,
        events: Sequence[KfdEvent] = (),
        poll_ms: int = 1,
    ) -> int:
        """Wait until the u64 at ``offset`` of ``allocation`` equals ``until`` (or satisfies it); return it.

        Between reads it waits on ``events`` and the memory event for up to ``poll_ms`` (on MOCKKFD that is virtual
        time, during which the GPUs run). Raises:
            DeviceTimeout: the value never got there, with the last value seen and the one expected.
            KfdMemoryFault: a GPU memory fault was reported meanwhile.
            KfdHwException: amdkfd reset a failed queue meanwhile.
        """
        check_int("poll_ms", poll_ms, min_value=1)
        matches = until if callable(until) else (lambda value: value == until)
        deadline = self.now_ns() + check_int("timeout_ms", timeout_ms, min_value=0) * _NS_PER_MS
        while True:
            value = int.from_bytes(allocation.read(offset, _SLOT_BYTES), "little")
            if matches(value):
                return value
            remaining_ns = deadline - self.now_ns()
            if remaining_ns <= 0:
                expected = f"{until:#x}" if isinstance(until, int) else "a value satisfying the condition"
                raise DeviceTimeout(f"u64 at VA {allocation.va + offset:#x} is {value:#x} after {timeout_ms} ms, "
                                    f"expected {expected}")  # fmt: skip
            self.wait_events(events, timeout_ms=min(poll_ms, ceil_div(remaining_ns, _NS_PER_MS)))

    # --- lifetime ------------------------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self.fd < 0

    def close(self) -> None:
        """Destroy events and queues, free memory, close render nodes and /dev/kfd (idempotent)."""
        if self.closed:
            return
        for event in self.events:
            event.destroy()
        page = self._event_page
        if page is not None:  # the kernel keeps the event page until the process exits; FREE would be EPERM
            page.device.unmap(page)
            page.device.allocations.remove(page)
            page.freed = True
        for device in self.devices.values():
            device.close()
        self.fileio.close(self.fd)
        self.fd = -1

    def __enter__(self) -> KFD:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KFD({self.version[0]}.{self.version[1]}, GPUs {[node.arch for node in self.gpus]})"
