"""The USB device front of the bridge: endpoint queues, transfer lifecycle on the virtual clock, faults, EP0.

Every transfer is a :class:`Urb` submitted to an endpoint queue (EP0 control, EP 0x02 bulk OUT, EP 0x81 bulk IN).
It reaches its queue ``usb_latency_ns`` after submission (timing model); each queue moves one transfer at a time,
and the queues accept transfers concurrently (control requests may be sent while a bulk is in flight). The work
itself runs on the bridge's one 8051 core: EP0 service and the 0xF2 engine's DMA of a bulk transfer take turns on
it in the order they become ready, so a control request that reaches the device during an 0xF2 DMA is serviced when
that DMA ends (``firmware_free_ns``). 0xF0 streams move packet by packet and EP0 runs between their packets (a new
0xF0 OUT can cancel a stream in flight), so they do not hold the core. This is what makes a host's control round
trip between two bulk transfers cost throughput, the effect spec/copyin.md measures (batching the arm with the fence
read: 294 -> 323 MB/s). A transfer's timeout runs from its submission, as in libusb. Synchronous calls
(``transfer``) run the event kernel until the transfer is done, so the GPU model progresses while the host waits;
when nothing can interfere they take an inline fast path with the same timing.

Bulk transfers pair with the armed operation of their direction when they reach the head of their queue; until then
they wait (the device NAKs) and time out if no matching arm comes. The payload of a bulk OUT is read when its last
packet has moved, so a host that reuses the buffer before reaping sends what the buffer holds then.
"""

from __future__ import annotations

from collections import deque
from enum import IntEnum
from typing import TYPE_CHECKING, Final

from tinyhil.emulators.asm2464.errors import UsbStall
from tinyhil.emulators.asm2464.sram import Arm, ArmKind, Direction
from tinyhil.emulators.asm2464.urb import Urb, UsbStatus
from tinyhil.emulators.faults import Fault, FaultKind, Operation, Transfer
from tinyhil.spec.asm24 import BULK_IN_EP, BULK_OUT_EP

if TYPE_CHECKING:
    from tinyhil.emulators.asm2464.device import Asm2464

__all__ = ["CONTROL_EP", "UNBOUNDED_WAIT_NS", "WAIT_CAP_NS", "StandardRequest", "UsbFront"]

CONTROL_EP: Final = 0x00
UNBOUNDED_WAIT_NS: Final = 3600 * 1_000_000_000  # a libusb timeout of 0 ("forever") gives up after 1 virtual hour
# The longest a synchronous call waits for one transfer, and so the longest transfer timeout the emulated usb1 stack
# accepts (mocks/usb/_requests.py refuses a longer one up front): every transfer ends by its own timeout within it.
WAIT_CAP_NS: Final = 2 * UNBOUNDED_WAIT_NS
_DIRECTION_IN: Final = 0x80
# hot: module constants, an Enum class attribute lookup goes through the metaclass
_SRAM: Final = ArmKind.SRAM
_STREAM: Final = ArmKind.STREAM
_COMPLETED: Final = UsbStatus.COMPLETED
_ENDPOINTS: Final = (CONTROL_EP, BULK_OUT_EP, BULK_IN_EP)
_EP_DIRECTION: Final = {BULK_OUT_EP: Direction.OUT, BULK_IN_EP: Direction.IN}
_BULK_PACKET_BYTES: Final = 1024  # USB3 bulk max packet: a transfer cut short stops on a packet boundary
_TYPE_MASK: Final = 0x60  # bmRequestType bits 6:5: 0 standard, 1 class, 2 vendor
_RECIPIENT_MASK: Final = 0x1F
_RECIPIENT_DEVICE, _RECIPIENT_INTERFACE, _RECIPIENT_ENDPOINT = 0, 1, 2
_FEATURE_ENDPOINT_HALT: Final = 0
_CONFIGURATIONS: Final = (0, 1)  # unconfigured, and configuration 1 (spec/asm24.md "Identity and link")
_WAIT_WHAT: Final = "a USB transfer to complete or time out"


class StandardRequest(IntEnum):
    """USB 2.0 chapter 9 standard requests the front answers."""

    GET_STATUS = 0x00
    CLEAR_FEATURE = 0x01
    GET_CONFIGURATION = 0x08
    SET_CONFIGURATION = 0x09
    SET_INTERFACE = 0x0B


class UsbFront:
    """Endpoint queues and EP0 of one bridge; see the module docstring for the lifecycle."""

    def __init__(self, bridge: Asm2464) -> None:
        self.bridge = bridge
        self.kernel = bridge.kernel
        self._operations: dict[tuple[Transfer, int | None], Operation] = {}
        self.queues: dict[int, deque[Urb]] = {ep: deque() for ep in _ENDPOINTS}
        self._arriving: dict[int, set[Urb]] = {ep: set() for ep in _ENDPOINTS}
        self.active: dict[int, Urb | None] = dict.fromkeys(_ENDPOINTS)
        self.reset()

    def reset(self) -> None:
        """Power cycle: every transfer in flight ends with no-device; halts, counters and configuration reset."""
        pending = [
            urb
            for ep in _ENDPOINTS
            for urb in (*self.queues[ep], self.active[ep], *self._arriving[ep])
            if urb is not None
        ]
        self._arriving = {ep: set() for ep in _ENDPOINTS}
        self.queues = {ep: deque() for ep in _ENDPOINTS}
        self.active = dict.fromkeys(_ENDPOINTS)
        self._busy = 0  # transfers arriving or active on any endpoint (hot: the inline path's "nothing else" check)
        self.halted: set[int] = set()
        self.counts: dict[Operation, int] = {}
        self.gone = False
        self.configuration = 1
        self.alt_setting = 0
        self._advancing: set[int] = set()
        self.firmware_free_ns = 0  # when the 8051 finishes the work it has taken on (EP0 service, bulk DMA)
        for urb in pending:
            self._finish(urb, UsbStatus.NO_DEVICE, "the board was power-cycled with the transfer in flight")

    def state(self) -> tuple[object, ...]:
        """The USB state: device present, halts, configuration, and every transfer still in flight (a request
        that left one behind has changed the device: it will take the next arm)."""
        inflight = tuple(
            (ep, urb.describe())
            for ep in _ENDPOINTS
            for urb in (*self._arriving[ep], self.active[ep], *self.queues[ep])
            if urb is not None
        )
        return self.gone, tuple(sorted(self.halted)), self.configuration, self.alt_setting, inflight

    # --- submission and waiting ---
    def submit(self, urb: Urb) -> Urb:
        """Queue ``urb`` on its endpoint; it completes on the virtual clock and then calls ``on_complete``."""
        urb.submitted_ns = self.kernel.now_ns
        latency_ns = self.bridge.timing.usb_latency_ns
        if latency_ns:
            self._arriving[urb.endpoint].add(urb)
            self._busy += 1
            urb._moving = self.kernel.schedule(latency_ns, lambda: self._arrive(urb), label="usb submission")
            self._ensure_deadline(urb, urb.submitted_ns + latency_ns)
        else:
            self._arrive(urb)
        return urb

    def _arrive(self, urb: Urb) -> None:
        """The transfer reaches its endpoint (after the submission latency) and queues there."""
        urb._moving = None
        ep = urb.endpoint
        arriving = self._arriving[ep]
        if urb in arriving:
            arriving.remove(urb)
            self._busy -= 1
        if urb.status is not None:
            return
        if self.active[ep] is None and not self.queues[ep] and ep not in self._advancing:
            self.active[ep] = urb  # the endpoint is idle: start at once
            self._busy += 1
            self._start(urb)
            return
        self.queues[ep].append(urb)
        if self.active[ep] is not None:  # it waits in the queue, and its timeout runs meanwhile
            self._ensure_deadline(urb)
        self._advance(ep)

    def _ensure_deadline(self, urb: Urb, busy_until_ns: int | None = None) -> None:
        """Schedule the transfer's timeout, unless it will be done (``busy_until_ns``) before the timeout.

        Deadlines are scheduled only when they can matter, so the event queue holds no dead timeouts.
        """
        deadline_ns = urb.submitted_ns + urb.timeout_ns
        if urb._deadline is not None or urb.status is not None:
            return
        if busy_until_ns is not None and busy_until_ns <= deadline_ns:
            return
        delay = max(0, deadline_ns - self.kernel.now_ns)
        urb._deadline = self.kernel.schedule(delay, lambda: self._expire(urb), label="usb timeout")

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
        self._interrupt(urb)
        arm = urb._arm
        if arm is not None:  # claimed on the inline path and nothing moved yet: the arm stays for the next bulk
            urb._arm = None
            self.bridge.engine.give_back(arm, 0)
            self.bridge.engine.finished(arm)
        self._finish(urb, UsbStatus.CANCELLED, f"abandoned: the host's call raised {type(error).__name__}: {error}")

    def complete(self, urb: Urb) -> Urb:
        """Submit and run virtual time until ``urb`` is done (inline when nothing can interfere); no raise of its
        own (an exception from an event abandons ``urb`` and propagates)."""
        try:
            if not self._run_inline(urb):
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
            if not self._run_inline(urb):  # complete(), inlined: every synchronous transfer
                self.wait(self.submit(urb))
        except BaseException as exc:
            self.abandon(urb, exc)
            raise
        if urb.status is not _COMPLETED:
            error = urb.error()
            if error is not None:
                raise error
        return urb

    def _run_inline(self, urb: Urb) -> bool:
        """The synchronous fast path, taken when nothing can interfere: an idle endpoint, no fault plan, a healthy
        device, and (bulk) a matching arm, all within the timeout. The clock runs for the transfer's time (other
        events due meanwhile fire, GPU included), then it completes, exactly as the queued path would; only events
        due at the very same nanosecond may order differently. Returns False where the queued path is needed."""
        ep = urb.endpoint
        bridge = self.bridge
        if self._busy or self.queues[ep] or bridge.faults.rules or self.gone or bridge.wedged:
            return False  # other transfers may take the 8051 first: the queued path orders them exactly
        if ep in self.halted or ep in self._advancing:
            return False
        kernel = self.kernel
        now_ns = kernel.now_ns
        if self.firmware_free_ns > now_ns:
            return False
        latency_ns = bridge.timing.usb_latency_ns
        setup = urb.setup
        if setup is not None:
            paired = None
            cost_ns = bridge.timing.control_ns()
        else:
            paired = self._pairing(urb)
            if paired is None:
                return self._arrive_inline(urb, now_ns, latency_ns)
            cost_ns = paired[1]
        if latency_ns + cost_ns > urb.timeout_ns:
            return False
        urb.submitted_ns = now_ns
        self.active[ep] = urb
        self._busy += 1
        events_run = kernel.events_run
        kernel.run_for(latency_ns)
        if urb.status is not None:  # an event power-cycled the board meanwhile
            return True
        now_ns += latency_ns  # run_for leaves the clock at exactly the end of the span
        urb._started_ns = now_ns
        holds_core = True  # EP0 service and 0xF2 DMA run on the 8051; a stream moves between EP0 requests
        if setup is None:
            if kernel.events_run != events_run:  # events ran meanwhile: the arms may have changed
                paired = self._pairing(urb)
            if paired is None:  # cannot happen while the host waits here, but stay exact: take the queued path
                self._start(urb)
                self.wait(urb)
                return True
            arm = paired[0]
            bridge.engine.claim(arm)
            urb._arm = arm
            urb._planned = urb.length if urb._limit is None else urb._limit
            holds_core = arm.kind is _SRAM
        if holds_core:
            self.firmware_free_ns = now_ns + cost_ns
        kernel.run_for(cost_ns)
        if urb.status is None:
            if setup is None:
                self._bulk_moved(urb, now_ns + cost_ns)
            else:
                self._run_control(urb, now_ns + cost_ns)
        return True

    def _arrive_inline(self, urb: Urb, now_ns: int, latency_ns: int) -> bool:
        """A bulk with nothing to pair yet (a bulk IN before the GPU's release) when nothing else is in flight: the
        submission latency runs here, then it arrives and waits as a submitted one would, with no arrival event to
        schedule (only events due at that very nanosecond may order differently). False: take the queued path."""
        if not latency_ns or latency_ns > urb.timeout_ns:
            return False  # no latency: it arrives before any event runs; a longer one: it times out on the way
        urb.submitted_ns = now_ns
        self._arriving[urb.endpoint].add(urb)
        self._busy += 1
        self.kernel.run_for(latency_ns)
        self._arrive(urb)
        self.wait(urb)
        return True

    def cancel(self, urb: Urb) -> bool:
        """Cancel a pending transfer (it ends ``CANCELLED`` with what it moved so far); False if already done."""
        if urb.status is not None:
            return False
        self._interrupt(urb)
        self._finish(urb, UsbStatus.CANCELLED, "cancelled by the host")
        return True

    def _advance(self, ep: int) -> None:
        queue = self.queues[ep]
        if not queue or ep in self._advancing:
            return
        self._advancing.add(ep)
        try:
            while self.active[ep] is None and queue:
                urb = queue.popleft()
                self.active[ep] = urb
                self._busy += 1
                self._start(urb)
        finally:
            self._advancing.discard(ep)

    def _operation(self, urb: Urb) -> Operation:
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
        plan = self.bridge.faults
        if not plan.rules:
            return None
        count = self.counts[operation] = self.counts.get(operation, 0) + 1
        return plan.fault_for(operation, count)

    def _start(self, urb: Urb) -> None:
        urb._started_ns = self.kernel.now_ns
        if self.gone:
            self._finish(urb, UsbStatus.NO_DEVICE, "the device is gone")
            return
        fault = urb._fault = self.next_fault(self._operation(urb)) if self.bridge.faults.rules else None
        if fault is not None:
            if fault.kind is FaultKind.NO_DEVICE:
                self._unplug(f"the device is gone (fault plan: {fault!r})")
                return
            if fault.kind is FaultKind.STALL:
                if urb.setup is None:
                    self.halted.add(urb.endpoint)
                self._finish(urb, UsbStatus.STALL, f"stalled by the fault plan ({fault!r})")
                return
            if fault.kind is not FaultKind.DROP:  # a dropped transfer moves every byte; they just never land
                urb._limit = min(fault.partial_bytes, urb.length)
            urb._stuck = fault.kind is FaultKind.TIMEOUT
            if urb._stuck:
                self._ensure_deadline(urb)
        if self.bridge.wedged:
            urb._stuck = True
            urb.message = f"{urb.describe()}: the bridge is wedged by a long 0xF0 stream (reset() power-cycles it)"
            self._ensure_deadline(urb)
            return
        if urb.setup is not None:
            control_ns = self._reserve_firmware(self.bridge.timing.control_ns())
            urb._moving = self.kernel.schedule(control_ns, lambda: self._run_control(urb))
            self._ensure_deadline(urb, self.kernel.now_ns + control_ns)
        elif urb.endpoint in self.halted:
            self._finish(urb, UsbStatus.STALL, f"endpoint {urb.endpoint:#04x} is halted, expected clearHalt first")
        else:
            self._try_bulk(urb)

    def _reserve_firmware(self, busy_ns: int) -> int:
        """Queue ``busy_ns`` of work on the 8051 behind what it already has; returns ns from now until it is done."""
        start_ns = max(self.kernel.now_ns, self.firmware_free_ns)
        self.firmware_free_ns = start_ns + busy_ns
        return self.firmware_free_ns - self.kernel.now_ns

    def _unplug(self, message: str) -> None:
        """The device leaves the bus: every transfer pending on any endpoint ends with no-device."""
        self.gone = True
        for ep in _ENDPOINTS:
            for urb in (self.active[ep], *self.queues[ep], *self._arriving[ep]):
                if urb is not None:
                    self._interrupt(urb)
                    self._finish(urb, UsbStatus.NO_DEVICE, message)

    # --- control transfers ---
    def _run_control(self, urb: Urb, now_ns: int | None = None) -> None:
        urb._moving = None
        setup = urb.setup
        assert setup is not None
        bridge = self.bridge
        if bridge.wedged:
            urb._stuck = True
            self._ensure_deadline(urb)
            return
        request_type, request, value, index = setup
        if urb._stuck and not urb.is_in:  # a timed-out control OUT never reaches the firmware
            urb.actual_length = urb._limit or 0
            return
        payload = urb.payload
        data = payload.tobytes() if payload else b""
        try:
            if request_type & _TYPE_MASK:
                result = bridge.vendor_request(request_type, request, value, index, data, urb.length)
            else:
                result = self._standard_request(request_type, request, value, index, data, urb.length)
        except UsbStall as stall:
            self._finish(urb, UsbStatus.STALL, str(stall))
            return
        if urb.is_in:
            urb.data = result if urb._limit is None else result[: urb._limit]
            urb.actual_length = len(urb.data)
        else:
            urb.actual_length = len(data)
        if not urb._stuck:
            self._finish(urb, _COMPLETED, "", now_ns)

    def _standard_request(
        self, request_type: int, request: int, value: int, index: int, data: bytes, length: int
    ) -> bytes:
        """EP0 standard requests; CLEAR_FEATURE(HALT), SET_CONFIGURATION and SET_INTERFACE reset the engine."""
        recipient = request_type & _RECIPIENT_MASK
        is_in = bool(request_type & _DIRECTION_IN)
        setup = (is_in, request, recipient)
        if data:
            pass  # no standard request the bridge answers has an OUT data stage
        elif setup == (False, StandardRequest.CLEAR_FEATURE, _RECIPIENT_ENDPOINT) and value == _FEATURE_ENDPOINT_HALT:
            if index in _ENDPOINTS:
                self.halted.discard(index)
                self.bridge.engine.drop_arms()
                return b""
        elif setup == (False, StandardRequest.SET_CONFIGURATION, _RECIPIENT_DEVICE):
            if value in _CONFIGURATIONS and index == 0:
                self.configuration = value
                self.bridge.engine.drop_arms()
                return b""
        elif setup == (False, StandardRequest.SET_INTERFACE, _RECIPIENT_INTERFACE):
            if (value, index) == (0, 0):
                self.alt_setting = value
                self.bridge.engine.drop_arms()
                return b""
        elif setup == (True, StandardRequest.GET_CONFIGURATION, _RECIPIENT_DEVICE):
            return bytes([self.configuration])[:length]
        elif is_in and request == StandardRequest.GET_STATUS:
            halted = recipient == _RECIPIENT_ENDPOINT and index in self.halted
            return int(halted).to_bytes(2, "little")[:length]
        raise UsbStall(
            f"standard request bmRequestType={request_type:#04x} bRequest={request:#04x} wValue={value:#x} "
            f"wIndex={index:#x} with {len(data)} data bytes: not supported with these arguments"
        )

    # --- bulk transfers ---
    def poke(self) -> None:
        """An arm, a release or a stream request happened: waiting bulk transfers may pair now."""
        active = self.active
        if active[BULK_OUT_EP] is None and active[BULK_IN_EP] is None:
            return  # hot: every arm and 0xF0 request, mostly with no bulk waiting
        for ep in (BULK_OUT_EP, BULK_IN_EP):
            urb = active[ep]
            if urb is not None and urb.status is None and urb._arm is None and not urb._stuck:
                self._try_bulk(urb)

    def _pairing(self, urb: Urb) -> tuple[Arm, int] | None:
        """The arm a bulk pairs with now and its time on the wire, or ``None`` (the device NAKs)."""
        bridge = self.bridge
        arm = bridge.engine.ready(_EP_DIRECTION[urb.endpoint], urb.length)
        if arm is None:
            return None
        moved = urb.length if urb._limit is None else urb._limit
        timing = bridge.timing
        if arm.kind is _SRAM:
            return arm, timing.bulk_in_ns(moved) if urb.is_in else timing.bulk_out_ns(moved)
        if urb.is_in and not bridge.tlp.stream_readable(arm):
            return None
        return arm, timing.stream_ns(moved)

    def _claim(self, urb: Urb, arm: Arm) -> None:
        self.bridge.engine.claim(arm)
        urb._arm = arm
        urb._started_ns = self.kernel.now_ns
        urb._planned = urb.length if urb._limit is None else urb._limit

    def _try_bulk(self, urb: Urb) -> None:
        paired = self._pairing(urb)
        if paired is None:
            self._ensure_deadline(urb)
            return  # NAK until an arm pairs or the deadline passes
        arm, wire_ns = paired
        self._claim(urb, arm)
        if arm.kind is ArmKind.SRAM:  # the 0xF2 DMA starts when the 8051 gets to it
            done_ns = self._reserve_firmware(wire_ns)
            urb._started_ns = self.kernel.now_ns + done_ns - wire_ns
            wire_ns = done_ns
        urb._moving = self.kernel.schedule(wire_ns, lambda: self._bulk_moved(urb))
        self._ensure_deadline(urb, self.kernel.now_ns + wire_ns)

    def _bulk_moved(self, urb: Urb, now_ns: int | None = None) -> None:
        urb._moving = None
        self._deliver(urb, urb._planned)
        if not urb._stuck:
            self._finish(urb, _COMPLETED, "", now_ns)

    def _deliver(self, urb: Urb, moved: int) -> None:
        """``moved`` bytes of a paired bulk have crossed the wire: hand them over and free the arm."""
        arm = urb._arm
        assert arm is not None
        urb._arm = None
        bridge = self.bridge
        engine = bridge.engine
        offset = arm.done
        if urb.is_in:
            into = urb.into
            if arm.kind is _SRAM:
                urb.data = engine.read_in(arm, moved, into)
            elif into is None:
                urb.data = bridge.tlp.stream_read(arm, offset, moved)
            else:  # the host's buffer: the bytes go there, data views them
                view = memoryview(into)[:moved]
                view[:] = bridge.tlp.stream_read(arm, offset, moved)
                urb.data = view
        else:
            assert urb.payload is not None
            data = urb.payload[:moved]  # hot: a memoryview slice, no numpy array per bulk
            if arm.kind is _STREAM:
                bridge.tlp.stream_write(arm, offset, data, bridge.timing.stream_packet_bytes)
            elif urb._fault is not None and urb._fault.kind is FaultKind.DROP:
                engine.finished(arm)  # the wire moved the bytes; the engine lost them (fault plan)
            else:
                bridge.land(arm, offset, data, whole_transfer=offset == 0 and moved == arm.nbytes)
        urb.actual_length = moved
        engine.give_back(arm, moved)
        if urb.is_in:
            engine.finished(arm)

    def _interrupt(self, urb: Urb) -> None:
        """Stop a transfer mid-flight: whole packets moved so far are delivered, the rest never moves."""
        if urb._moving is None:
            return
        self.kernel.cancel(urb._moving)
        urb._moving = None
        if urb.setup is not None or urb._arm is None:
            return
        elapsed = self.kernel.now_ns - urb._started_ns
        timing = self.bridge.timing
        if urb._arm.kind is ArmKind.STREAM:
            moved = timing.stream_packets_done(elapsed) * timing.stream_packet_bytes
        else:
            rate = timing.bulk_in_bytes_per_s if urb.is_in else timing.bulk_out_bytes_per_s
            moved = max(0, elapsed - timing.bulk_setup_ns) * rate // 1_000_000_000 // _BULK_PACKET_BYTES
            moved *= _BULK_PACKET_BYTES
        self._deliver(urb, min(moved, urb._planned))

    def cancel_streams(self) -> None:
        """A new 0xF0 OUT cancels a stream in flight: what moved stays, the transfer then times out."""
        if self.active[BULK_OUT_EP] is None and self.active[BULK_IN_EP] is None:
            return  # hot: every 0xF0 OUT, mostly with no bulk in flight
        for ep in (BULK_OUT_EP, BULK_IN_EP):
            urb = self.active[ep]
            if urb is not None and urb._arm is not None and urb._arm.kind is ArmKind.STREAM and urb._moving:
                self._interrupt(urb)
                urb._stuck = True
                urb.message = f"{urb.describe()}: its 0xF0 stream was cancelled by a new 0xF0 OUT request"
                self._ensure_deadline(urb)

    def _expire(self, urb: Urb) -> None:
        urb._deadline = None
        if urb.status is not None:
            return
        self._interrupt(urb)
        message = urb.message or f"{urb.describe()} timed out after {urb.timeout_ns} ns: {self._why_waiting(urb)}"
        self._finish(urb, UsbStatus.TIMED_OUT, message)

    def _why_waiting(self, urb: Urb) -> str:
        if urb._fault is not None:
            return f"fault plan: {urb._fault!r}"
        if urb in self._arriving[urb.endpoint]:
            latency_ns = self.bridge.timing.usb_latency_ns
            return f"it had not reached the device yet (the timing model's usb_latency_ns is {latency_ns})"
        if self.bridge.wedged:
            return "the bridge is wedged by a long 0xF0 stream (reset() power-cycles it)"
        if urb.setup is not None or urb.endpoint not in _EP_DIRECTION:
            return "the device did not answer"
        arm = self.bridge.engine.arms[_EP_DIRECTION[urb.endpoint]]
        if arm is None:
            return f"no armed operation, expected an 0xF2 or 0xF0 stream arm of exactly {urb.length} bytes first"
        if arm.remaining != urb.length:
            return f"the armed operation expects exactly {arm.remaining} bytes, got {urb.length}"
        if arm.kind is ArmKind.SRAM and urb.is_in:
            return "copyout not released: the GPU never wrote the completion-queue entry at PCIe 0x822000 + 12"
        return "the stream's PCIe range has no completer (unsupported request)"

    def _finish(self, urb: Urb, status: UsbStatus, message: str = "", now_ns: int | None = None) -> None:
        """End ``urb`` (at ``now_ns``, which the inline path knows without asking the kernel's property)."""
        if urb.status is not None:
            return
        urb.status = status
        kernel = self.kernel
        urb.completed_ns = kernel.now_ns if now_ns is None else now_ns
        if message:
            urb.message = message
        if urb._deadline is not None:
            kernel.cancel(urb._deadline)
            urb._deadline = None
        if urb._moving is not None:
            kernel.cancel(urb._moving)
            urb._moving = None
        urb._arm = None  # claimed but never moved (power cycle): the bytes are lost
        ep = urb.endpoint
        if self.active[ep] is urb:  # a transfer is in one place: active, queued or arriving
            self.active[ep] = None
            self._busy -= 1
        elif urb in self.queues[ep]:
            self.queues[ep].remove(urb)
        elif urb in self._arriving[ep]:
            self._arriving[ep].remove(urb)
            self._busy -= 1
        if urb.on_complete is not None:
            urb.on_complete(urb)
        if self.queues[ep]:
            self._advance(ep)
