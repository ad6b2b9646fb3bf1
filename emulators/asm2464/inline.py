"""The synchronous fast path of the bridge's USB front: a transfer runs inline when nothing can interfere.

A synchronous call (``UsbFront.transfer`` / ``complete``) with nothing else in flight on any endpoint, a healthy
device, an idle 8051, a transfer that fits its timeout and no fault planned for this attempt runs the transfer's
time on the clock here (other events due meanwhile fire, GPU included) and then completes it, instead of
scheduling its arrival and completion as events. It counts the attempt where the queued path does (when the
transfer starts, after the submission latency), claims the arm with the same step and ends the transfer with the
same completion; only events due at the very same nanosecond may order differently. An attempt the fault plan
has a fault for takes the queued path, which counts it and applies the fault; a plan whose rules never match
leaves the fast path on. ``tests/emulators/asm2464/test_front_paths.py`` holds the two paths equal.
:class:`InlinePath` is the ``inline`` part of :class:`~tinyhil.emulators.asm2464.front.UsbFront`, which owns it and
offers it every synchronous transfer first; it starts, moves and ends transfers with the front's own steps and its
endpoints' (``front.ep0``, ``front.bulk``), so only the scheduling differs between the two paths.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tinyhil.emulators.asm2464.sram import Arm, ArmKind
from tinyhil.emulators.asm2464.urb import Urb

if TYPE_CHECKING:
    from tinyhil.emulators.asm2464.front import UsbFront

__all__ = ["InlinePath"]

_SRAM: Final = ArmKind.SRAM


class InlinePath:
    """The synchronous fast path of a :class:`~tinyhil.emulators.asm2464.front.UsbFront` (see the module docstring)."""

    def __init__(self, front: UsbFront) -> None:
        self.front = front
        self.bridge = front.bridge
        self.kernel = front.kernel

    def run(self, urb: Urb) -> bool:
        """Run ``urb`` on the fast path (see the module docstring); False: take the queued path instead."""
        ep = urb.endpoint
        front = self.front
        bridge = self.bridge
        kernel = self.kernel
        if front.busy or front.queues[ep] or front.gone or bridge.wedged:
            return False  # other transfers may take the 8051 first: the queued path orders them exactly
        if ep in front.halted or ep in front.advancing or front.firmware_free_ns > kernel.now_ns:
            return False
        if bridge.faults.rules and front.upcoming_fault(front.operation(urb)) is not None:
            return False  # the queued path counts the attempt and applies its fault
        timing = bridge.timing
        latency_ns = timing.usb_latency_ns
        paired = None
        if urb.setup is not None:
            cost_ns = timing.control_ns()
        else:
            paired = front.bulk.pairing(urb)
            if paired is None:
                return self._arrive(urb, latency_ns)
            cost_ns = paired[1]
        if latency_ns + cost_ns > urb.timeout_ns:
            return False  # it times out: the queued path cuts it off at its deadline
        urb.submitted_ns = kernel.now_ns
        front.active[ep] = urb
        front.busy += 1
        events_run = kernel.events_run
        kernel.run_for(latency_ns)
        if urb.status is None:  # else an event power-cycled the board meanwhile
            self._start(urb, paired, cost_ns, events_run != kernel.events_run)
        return True

    def _start(self, urb: Urb, paired: tuple[Arm, int] | None, cost_ns: int, moved_on: bool) -> None:
        """``urb`` has reached the device: count the attempt, take the arm (bulk) and the 8051, run its time, end it.

        ``moved_on``: events ran on the way, so the arms may have changed. Changed arms, or a fault for the attempt,
        hand it to the queued path's start (which counts the attempt) instead."""
        front = self.front
        kernel = self.kernel
        urb.started_ns = kernel.now_ns
        operation = front.operation(urb) if self.bridge.faults.rules else None
        if (paired is not None and moved_on and front.bulk.pairing(urb) != paired) or (
            operation is not None and front.upcoming_fault(operation) is not None
        ):
            front.start(urb)
            front.wait(urb)
            return
        if operation is not None:
            front.next_fault(operation)  # count the attempt (it has no fault), as the queued path's start does
        holds_core = True  # EP0 service and 0xF2 DMA run on the 8051; a stream moves between EP0 requests
        if paired is not None:
            arm = paired[0]
            front.bulk.claim(urb, arm)
            holds_core = arm.kind is _SRAM
        if holds_core:  # the 8051 has had nothing else to do since the entry check
            front.firmware_free_ns = kernel.now_ns + cost_ns
        kernel.run_for(cost_ns)
        if urb.status is None:
            if paired is not None:
                front.bulk.moved(urb)
            else:
                front.ep0.run(urb)

    def _arrive(self, urb: Urb, latency_ns: int) -> bool:
        """A bulk with nothing to pair yet (a bulk IN before the GPU's release) when nothing else is in flight: the
        submission latency runs here, then it arrives and waits as a submitted one would, with no arrival event to
        schedule (only events due at that very nanosecond may order differently). False: take the queued path."""
        if not latency_ns or latency_ns > urb.timeout_ns:
            return False  # no latency: it arrives before any event runs; a longer one: it times out on the way
        front = self.front
        urb.submitted_ns = self.kernel.now_ns
        front.arriving[urb.endpoint].add(urb)
        front.busy += 1
        self.kernel.run_for(latency_ns)
        front.arrive(urb)
        front.wait(urb)
        return True
