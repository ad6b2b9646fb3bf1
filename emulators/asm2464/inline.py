"""The synchronous fast path of the bridge's USB front: a transfer runs inline when nothing can interfere.

A synchronous call (``UsbFront.transfer`` / ``complete``) with nothing else in flight on any endpoint, a healthy
device, an idle 8051, a transfer that fits its timeout and no fault planned for this attempt runs the transfer's
time on the clock here (other events due meanwhile fire, GPU included) and then completes it, instead of
scheduling its arrival and completion as events. It counts the attempt where the queued path does (when the
transfer starts, after the submission latency), claims the arm with the same step and ends the transfer with the
same completion; only events due at the very same nanosecond may order differently. An attempt the fault plan
has a fault for takes the queued path, which counts it and applies the fault; a plan whose rules never match
leaves the fast path on. ``tests/emulators/asm2464/test_front_paths.py`` holds the two paths equal.
:class:`_InlinePath` is the fast-path part of :class:`~tinyhil.emulators.asm2464.front.UsbFront`, which inherits it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tinyhil.emulators.asm2464.sram import Arm, ArmKind
from tinyhil.emulators.asm2464.urb import Urb

if TYPE_CHECKING:
    from collections import deque

    from tinyhil.emulators.asm2464.device import Asm2464
    from tinyhil.emulators.faults import Fault, Operation
    from tinyhil.emulators.kernel import EventKernel

__all__: list[str] = []

_SRAM: Final = ArmKind.SRAM


class _InlinePath:
    """The synchronous fast path of :class:`~tinyhil.emulators.asm2464.front.UsbFront` (its base)."""

    bridge: Asm2464
    kernel: EventKernel
    queues: dict[int, deque[Urb]]
    active: dict[int, Urb | None]
    _arriving: dict[int, set[Urb]]
    _advancing: set[int]
    _busy: int
    halted: set[int]
    counts: dict[Operation, int]
    gone: bool
    firmware_free_ns: int

    if TYPE_CHECKING:  # defined by UsbFront and its bases

        def _operation(self, urb: Urb) -> Operation: ...

        def _start(self, urb: Urb) -> None: ...

        def next_fault(self, operation: Operation) -> Fault | None: ...

        def upcoming_fault(self, operation: Operation) -> Fault | None: ...

        def _arrive(self, urb: Urb) -> None: ...

        def wait(self, urb: Urb) -> Urb: ...

        def _pairing(self, urb: Urb) -> tuple[Arm, int] | None: ...

        def _claim(self, urb: Urb, arm: Arm) -> None: ...

        def _bulk_moved(self, urb: Urb) -> None: ...

        def _run_control(self, urb: Urb) -> None: ...

    def _run_inline(self, urb: Urb) -> bool:
        """Run ``urb`` on the fast path (see the module docstring); False: take the queued path instead."""
        ep = urb.endpoint
        bridge = self.bridge
        kernel = self.kernel
        if self._busy or self.queues[ep] or self.gone or bridge.wedged:
            return False  # other transfers may take the 8051 first: the queued path orders them exactly
        if ep in self.halted or ep in self._advancing or self.firmware_free_ns > kernel.now_ns:
            return False
        if bridge.faults.rules and self.upcoming_fault(self._operation(urb)) is not None:
            return False  # the queued path counts the attempt and applies its fault
        timing = bridge.timing
        latency_ns = timing.usb_latency_ns
        paired = None
        if urb.setup is not None:
            cost_ns = timing.control_ns()
        else:
            paired = self._pairing(urb)
            if paired is None:
                return self._arrive_inline(urb, latency_ns)
            cost_ns = paired[1]
        if latency_ns + cost_ns > urb.timeout_ns:
            return False  # it times out: the queued path cuts it off at its deadline
        urb.submitted_ns = kernel.now_ns
        self.active[ep] = urb
        self._busy += 1
        events_run = kernel.events_run
        kernel.run_for(latency_ns)
        if urb.status is None:  # else an event power-cycled the board meanwhile
            self._start_inline(urb, paired, cost_ns, events_run != kernel.events_run)
        return True

    def _start_inline(self, urb: Urb, paired: tuple[Arm, int] | None, cost_ns: int, moved_on: bool) -> None:
        """``urb`` has reached the device: count the attempt, take the arm (bulk) and the 8051, run its time, end it.

        ``moved_on``: events ran on the way, so the arms may have changed. Changed arms, or a fault for the attempt,
        hand it to the queued path's start (which counts the attempt) instead."""
        kernel = self.kernel
        urb._started_ns = kernel.now_ns
        operation = self._operation(urb) if self.bridge.faults.rules else None
        if (paired is not None and moved_on and self._pairing(urb) != paired) or (
            operation is not None and self.upcoming_fault(operation) is not None
        ):
            self._start(urb)
            self.wait(urb)
            return
        if operation is not None:
            self.next_fault(operation)  # count the attempt (it has no fault), as the queued path's start does
        holds_core = True  # EP0 service and 0xF2 DMA run on the 8051; a stream moves between EP0 requests
        if paired is not None:
            arm = paired[0]
            self._claim(urb, arm)
            holds_core = arm.kind is _SRAM
        if holds_core:  # the 8051 has had nothing else to do since the entry check
            self.firmware_free_ns = kernel.now_ns + cost_ns
        kernel.run_for(cost_ns)
        if urb.status is None:
            if paired is not None:
                self._bulk_moved(urb)
            else:
                self._run_control(urb)

    def _arrive_inline(self, urb: Urb, latency_ns: int) -> bool:
        """A bulk with nothing to pair yet (a bulk IN before the GPU's release) when nothing else is in flight: the
        submission latency runs here, then it arrives and waits as a submitted one would, with no arrival event to
        schedule (only events due at that very nanosecond may order differently). False: take the queued path."""
        if not latency_ns or latency_ns > urb.timeout_ns:
            return False  # no latency: it arrives before any event runs; a longer one: it times out on the way
        urb.submitted_ns = self.kernel.now_ns
        self._arriving[urb.endpoint].add(urb)
        self._busy += 1
        self.kernel.run_for(latency_ns)
        self._arrive(urb)
        self.wait(urb)
        return True
