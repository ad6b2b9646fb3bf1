"""The USB device front of the bridge: endpoint queues, transfer lifecycle on the virtual clock, faults, sync path.

Every transfer is a :class:`Urb` submitted to an endpoint queue (EP0 control, EP 0x02 bulk OUT, EP 0x81 bulk IN).
It reaches its queue ``usb_latency_ns`` after submission (timing model); each queue moves one transfer at a time,
and the queues accept transfers concurrently (control requests may be sent while a bulk is in flight). The work
itself runs on the bridge's one 8051 core: EP0 service and the 0xF2 engine's DMA of a bulk transfer take turns on
it in the order they become ready, so a control request that reaches the device during an 0xF2 DMA is serviced when
that DMA ends (``firmware_free_ns``). 0xF0 streams move packet by packet and EP0 runs between their packets (a new
0xF0 OUT can cancel a stream in flight), so they do not hold the core. This is what makes a host's control round
trip between two bulk transfers cost throughput, the effect docs/copyin.md measures (batching the arm with the fence
read: 294 -> 323 MB/s). A transfer's timeout runs from its submission, as in libusb. Synchronous calls
(``transfer``) run the event kernel until the transfer is done, so the GPU model progresses while the host waits;
when nothing can interfere (no fault planned for the attempt, among others) they take an inline fast path with the
same timing (:mod:`~tinyhil.emulators.asm2464.inline`).

Bulk transfers pair with the armed operation of their direction when they reach the head of their queue; until then
they wait (the device NAKs) and time out if no matching arm comes. The payload of a bulk OUT is read when its last
packet has moved, so a host that reuses the buffer before reaping sends what the buffer holds then.

:class:`UsbFront` holds the device's USB state (present, configuration, halts), the endpoint queues, the transfer
lifecycle (submit, arrive, start, deadline, finish) and the fault plan's attempts. It is built from three parts it
owns, each in its own module, and hands them transfers: ``ep0``
(:class:`~tinyhil.emulators.asm2464.ep0.ControlEndpoint`) runs a control transfer's request once it has had its 8051
time; ``bulk`` (:class:`~tinyhil.emulators.asm2464.bulk.BulkEndpoints`) pairs a bulk transfer at the head of its
queue with an arm, moves its bytes and stops it mid-flight; ``inline``
(:class:`~tinyhil.emulators.asm2464.inline.InlinePath`) runs a synchronous transfer without events when nothing can
interfere. The parts change transfers only through the front's lifecycle steps, so each step has one home.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Final

from tinyhil.emulators.asm2464.bulk import BulkEndpoints
from tinyhil.emulators.asm2464.ep0 import ControlEndpoint, StandardRequest
from tinyhil.emulators.asm2464.inline import InlinePath
from tinyhil.emulators.asm2464.urb import Urb, UsbStatus
from tinyhil.emulators.faults import Fault, FaultKind, Operation, Transfer
from tinyhil.spec.asm2464 import CONTROL_EP, ENDPOINTS, MAX_TIMEOUT_MS

if TYPE_CHECKING:
    from tinyhil.emulators.asm2464.device import Asm2464

# CONTROL_EP (the spec's) and StandardRequest (ep0's) are re-exported: the usb1 mock imports them from here
__all__ = ["CONTROL_EP", "UNBOUNDED_WAIT_NS", "WAIT_CAP_NS", "StandardRequest", "UsbFront"]

_NS_PER_MS: Final = 1_000_000
UNBOUNDED_WAIT_NS: Final = 3600 * 1000 * _NS_PER_MS  # a libusb timeout of 0 ("forever") gives up after 1 virtual hour
# The longest a synchronous call waits for one transfer, and so the longest transfer timeout the emulated usb1 stack
# accepts (mocks/usb/request_checks.py refuses a longer one up front): every transfer ends by its own timeout within it.
WAIT_CAP_NS: Final = MAX_TIMEOUT_MS * _NS_PER_MS  # the spec's transfer timeout cap, in virtual time
_COMPLETED: Final = UsbStatus.COMPLETED
_WAIT_WHAT: Final = "a USB transfer to complete or time out"


class UsbFront:
    """The USB device side of one bridge: its state, endpoint queues and transfer lifecycle, with the parts it owns
    (``ep0``, ``bulk``, ``inline``); see the module docstring."""

    def __init__(self, bridge: Asm2464) -> None:
        self.bridge = bridge
        self.kernel = bridge.kernel
        self._operations: dict[tuple[Transfer, int | None], Operation] = {}
        self.queues: dict[int, deque[Urb]] = {ep: deque() for ep in ENDPOINTS}
        self.arriving: dict[int, set[Urb]] = {ep: set() for ep in ENDPOINTS}  # submitted, not yet at the device
        self.active: dict[int, Urb | None] = dict.fromkeys(ENDPOINTS)
        self.ep0 = ControlEndpoint(self)
        self.bulk = BulkEndpoints(self)
        self.inline = InlinePath(self)
        self.reset()

    def reset(self) -> None:
        """Power cycle: every transfer in flight ends with no-device; halts, counters and configuration reset."""
        pending = [
            urb
            for ep in ENDPOINTS
            for urb in (*self.queues[ep], self.active[ep], *self.arriving[ep])
            if urb is not None
        ]
        self.arriving = {ep: set() for ep in ENDPOINTS}
        self.queues = {ep: deque() for ep in ENDPOINTS}
        self.active = dict.fromkeys(ENDPOINTS)
        self.busy = 0  # transfers arriving or active on any endpoint (the inline path's "nothing else" check)
        self.halted: set[int] = set()
        self.counts: dict[Operation, int] = {}
        self.gone = False
        self.configuration = 1
        self.alt_setting = 0
        self.advancing: set[int] = set()  # endpoints whose queue is being advanced
        self.firmware_free_ns = 0  # when the 8051 finishes the work it has taken on (EP0 service, bulk DMA)
        for urb in pending:
            self.finish(urb, UsbStatus.NO_DEVICE, "the board was power-cycled with the transfer in flight")

    def port_reset(self) -> None:
        """A USB port reset of a present device: halts clear, configuration 1 again, the DMA engine forgets its
        arms; PCIe and memories are untouched."""
        self.halted.clear()
        self.configuration = 1
        self.bridge.engine.drop_arms()

    def state(self) -> tuple[object, ...]:
        """The USB state: device present, halts, configuration, and every transfer still in flight (a request
        that left one behind has changed the device: it will take the next arm)."""
        inflight = tuple(
            (ep, urb.describe())
            for ep in ENDPOINTS
            for urb in (*self.arriving[ep], self.active[ep], *self.queues[ep])
            if urb is not None
        )
        return self.gone, tuple(sorted(self.halted)), self.configuration, self.alt_setting, inflight

    # --- submission and waiting ---
    def submit(self, urb: Urb) -> Urb:
        """Queue ``urb`` on its endpoint; it completes on the virtual clock and then calls ``on_complete``."""
        urb.submitted_ns = self.kernel.now_ns
        latency_ns = self.bridge.timing.usb_latency_ns
        if latency_ns:
            self.arriving[urb.endpoint].add(urb)
            self.busy += 1
            urb.moving = self.kernel.schedule(latency_ns, lambda: self.arrive(urb), label="usb submission")
            self.ensure_deadline(urb, urb.submitted_ns + latency_ns)
        else:
            self.arrive(urb)
        return urb

    def arrive(self, urb: Urb) -> None:
        """The transfer reaches its endpoint (after the submission latency) and queues there."""
        urb.moving = None
        ep = urb.endpoint
        arriving = self.arriving[ep]
        if urb in arriving:
            arriving.remove(urb)
            self.busy -= 1
        if urb.status is not None:
            return
        if self.active[ep] is None and not self.queues[ep] and ep not in self.advancing:
            self.active[ep] = urb  # the endpoint is idle: start at once
            self.busy += 1
            self.start(urb)
            return
        self.queues[ep].append(urb)
        if self.active[ep] is not None:  # it waits in the queue, and its timeout runs meanwhile
            self.ensure_deadline(urb)
        self._advance(ep)

    def ensure_deadline(self, urb: Urb, busy_until_ns: int | None = None) -> None:
        """Schedule the transfer's timeout, unless it will be done (``busy_until_ns``) before the timeout.

        Deadlines are scheduled only when they can matter, so the event queue holds no dead timeouts.
        """
        deadline_ns = urb.submitted_ns + urb.timeout_ns
        if urb.deadline is not None or urb.status is not None:
            return
        if busy_until_ns is not None and busy_until_ns <= deadline_ns:
            return
        delay = max(0, deadline_ns - self.kernel.now_ns)
        urb.deadline = self.kernel.schedule(delay, lambda: self._expire(urb), label="usb timeout")

    def wait(self, urb: Urb) -> Urb:
        """Run virtual time until ``urb`` is done: by its timeout when that is at most :data:`WAIT_CAP_NS`.

        Raises:
            VirtualTimeout: ``urb.timeout_ns`` is beyond the cap and it is not done by then (the usb1 stack refuses
                such a timeout up front); ``urb`` is abandoned first, as for any exception from the events run.
        """
        if urb.status is None:
            try:
                self.kernel.run_until(lambda: urb.status is not None, WAIT_CAP_NS, what=_WAIT_WHAT)
            except BaseException as exc:
                self.abandon(urb, exc)
                raise
        return urb

    def abandon(self, urb: Urb, error: BaseException) -> None:
        """End ``urb`` because the host's call for it raised ``error``: no transfer outlives the call that raised.

        It ends ``CANCELLED`` (whole packets moved so far delivered, as a cancel has it) without its ``on_complete``:
        the caller got the exception instead. Does nothing to a transfer that is done.
        """
        if urb.status is not None:
            return
        urb.on_complete = None
        self.bulk.interrupt(urb)
        arm = urb.arm
        if arm is not None:  # claimed on the inline path and nothing moved yet: the arm stays for the next bulk
            urb.arm = None
            self.bridge.engine.give_back(arm, 0)
            self.bridge.engine.finished(arm)
        self.finish(urb, UsbStatus.CANCELLED, f"abandoned: the host's call raised {type(error).__name__}: {error}")

    def complete(self, urb: Urb) -> Urb:
        """Submit and run virtual time until ``urb`` is done (inline when nothing can interfere); no raise of its
        own (an exception from an event abandons ``urb`` and propagates)."""
        try:
            if not self.inline.run(urb):
                self.wait(self.submit(urb))
        except BaseException as exc:
            self.abandon(urb, exc)
            raise
        return urb

    def transfer(self, urb: Urb) -> Urb:
        """Submit, wait, and raise the emulator error of a failed transfer (the synchronous path).

        An exception from the events run meanwhile abandons ``urb`` (:meth:`abandon`) and propagates.
        """
        try:
            if not self.inline.run(urb):  # as complete()
                self.wait(self.submit(urb))
        except BaseException as exc:
            self.abandon(urb, exc)
            raise
        if urb.status is not _COMPLETED:
            error = urb.error()
            if error is not None:
                raise error
        return urb

    def cancel(self, urb: Urb) -> bool:
        """Cancel a pending transfer (it ends ``CANCELLED`` with what it moved so far); False if already done."""
        if urb.status is not None:
            return False
        self.bulk.interrupt(urb)
        self.finish(urb, UsbStatus.CANCELLED, "cancelled by the host")
        return True

    def _advance(self, ep: int) -> None:
        queue = self.queues[ep]
        if not queue or ep in self.advancing:
            return
        self.advancing.add(ep)
        try:
            while self.active[ep] is None and queue:
                urb = queue.popleft()
                self.active[ep] = urb
                self.busy += 1
                self.start(urb)
        finally:
            self.advancing.discard(ep)

    def operation(self, urb: Urb) -> Operation:
        key: tuple[Transfer, int | None]
        if urb.setup is not None:
            key = (Transfer.CONTROL_IN if urb.is_in else Transfer.CONTROL_OUT, urb.setup[1])
        else:
            key = (Transfer.BULK_IN if urb.is_in else Transfer.BULK_OUT, None)
        operation = self._operations.get(key)
        if operation is None:
            operation = self._operations[key] = Operation(*key)
        return operation

    def next_fault(self, operation: Operation) -> Fault | None:
        """Count one attempt of ``operation`` and return the fault the plan has for it."""
        if not self.bridge.faults.rules:
            return None
        fault = self.upcoming_fault(operation)
        self.counts[operation] = self.counts.get(operation, 0) + 1
        return fault

    def upcoming_fault(self, operation: Operation) -> Fault | None:
        """The fault the plan has for the next attempt of ``operation``, without counting the attempt."""
        return self.bridge.faults.fault_for(operation, self.counts.get(operation, 0) + 1)

    def start(self, urb: Urb) -> None:
        """``urb`` reaches the head of its queue: count the attempt, apply its fault, start or pair it."""
        urb.started_ns = self.kernel.now_ns
        if self.gone:
            self.finish(urb, UsbStatus.NO_DEVICE, "the device is gone")
            return
        fault = urb.fault = self.next_fault(self.operation(urb)) if self.bridge.faults.rules else None
        if fault is not None:
            if fault.kind is FaultKind.NO_DEVICE:
                self._unplug(f"the device is gone (fault plan: {fault!r})")
                return
            if fault.kind is FaultKind.STALL:
                if urb.setup is None:
                    self.halted.add(urb.endpoint)
                self.finish(urb, UsbStatus.STALL, f"stalled by the fault plan ({fault!r})")
                return
            if fault.kind is FaultKind.TIMEOUT or fault.kind is FaultKind.SHORT_WRITE:  # they move partial_bytes
                urb.limit = min(fault.partial_bytes, urb.length)
            urb.stuck = fault.kind is FaultKind.TIMEOUT
            if urb.stuck:
                self.ensure_deadline(urb)
        if self.bridge.wedged:
            urb.stuck = True
            urb.message = f"{urb.describe()}: the bridge is wedged by a long 0xF0 stream (reset() power-cycles it)"
            self.ensure_deadline(urb)
            return
        if urb.setup is not None:
            control_ns = self.reserve_firmware(self.bridge.timing.control_ns())
            urb.moving = self.kernel.schedule(control_ns, lambda: self.ep0.run(urb))
            self.ensure_deadline(urb, self.kernel.now_ns + control_ns)
        elif urb.endpoint in self.halted:
            self.finish(urb, UsbStatus.STALL, f"endpoint {urb.endpoint:#04x} is halted, expected clearHalt first")
        else:
            self.bulk.start(urb)

    def reserve_firmware(self, busy_ns: int) -> int:
        """Queue ``busy_ns`` of work on the 8051 behind what it already has; returns ns from now until it is done."""
        start_ns = max(self.kernel.now_ns, self.firmware_free_ns)
        self.firmware_free_ns = start_ns + busy_ns
        return self.firmware_free_ns - self.kernel.now_ns

    def _unplug(self, message: str) -> None:
        """The device leaves the bus: every transfer pending on any endpoint ends with no-device."""
        self.gone = True
        for ep in ENDPOINTS:
            for urb in (self.active[ep], *self.queues[ep], *self.arriving[ep]):
                if urb is not None:
                    self.bulk.interrupt(urb)
                    self.finish(urb, UsbStatus.NO_DEVICE, message)

    # --- control transfers ---
    def _expire(self, urb: Urb) -> None:
        urb.deadline = None
        if urb.status is not None:
            return
        self.bulk.interrupt(urb)
        message = urb.message or f"{urb.describe()} timed out after {urb.timeout_ns} ns: {self._why_waiting(urb)}"
        self.finish(urb, UsbStatus.TIMED_OUT, message)

    def _why_waiting(self, urb: Urb) -> str:
        if urb.fault is not None:
            return f"fault plan: {urb.fault!r}"
        if urb in self.arriving[urb.endpoint]:
            latency_ns = self.bridge.timing.usb_latency_ns
            return f"it had not reached the device yet (the timing model's usb_latency_ns is {latency_ns})"
        if self.bridge.wedged:
            return "the bridge is wedged by a long 0xF0 stream (reset() power-cycles it)"
        if urb.setup is not None:
            return "the device did not answer"
        return self.bulk.why_waiting(urb)

    def finish(self, urb: Urb, status: UsbStatus, message: str = "") -> None:
        """End ``urb`` now: its outcome, its events cancelled, its endpoint freed, then its ``on_complete``."""
        if urb.status is not None:
            return
        if status is _COMPLETED and urb.fault is not None and urb.fault.kind is FaultKind.BABBLE:
            # the data stage moved the bytes asked for, and the device kept sending: the host reports the overflow
            status = UsbStatus.BABBLE
            message = f"{urb.describe()}: the device sent more than {urb.length:#x} bytes (fault plan: {urb.fault!r})"
        urb.status = status
        kernel = self.kernel
        urb.completed_ns = kernel.now_ns
        if message:
            urb.message = message
        if urb.deadline is not None:
            kernel.cancel(urb.deadline)
            urb.deadline = None
        if urb.moving is not None:
            kernel.cancel(urb.moving)
            urb.moving = None
        urb.arm = None  # claimed but never moved (power cycle): the bytes are lost
        ep = urb.endpoint
        if self.active[ep] is urb:  # a transfer is in one place: active, queued or arriving
            self.active[ep] = None
            self.busy -= 1
        elif urb in self.queues[ep]:
            self.queues[ep].remove(urb)
        elif urb in self.arriving[ep]:
            self.arriving[ep].remove(urb)
            self.busy -= 1
        if urb.on_complete is not None:
            urb.on_complete(urb)
        if self.queues[ep]:
            self._advance(ep)
