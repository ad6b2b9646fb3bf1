"""The bridge's bulk endpoints: pairing a bulk transfer with the armed operation of its direction, and moving it.

A bulk at the head of its queue pairs with the 0xF2 or 0xF0 stream arm of its direction (until then the device
NAKs); its bytes cross the wire on the virtual clock and are handed over when the last packet has moved, or, cut
short (cancel, timeout, power cycle), whole packets so far. :class:`BulkEndpoints` is the ``bulk`` part of
:class:`~tinyhil.emulators.asm2464.front.UsbFront`, which owns it and hands it each bulk transfer that reaches the
head of its queue (:meth:`BulkEndpoints.start`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tinyhil.emulators.asm2464.sram import Arm, ArmKind, Direction
from tinyhil.emulators.asm2464.urb import Urb, UsbStatus
from tinyhil.emulators.faults import FaultKind
from tinyhil.spec.asm2464 import BULK_IN_EP, BULK_OUT_EP

if TYPE_CHECKING:
    from tinyhil.emulators.asm2464.front import UsbFront

__all__ = ["BulkEndpoints"]

_SRAM: Final = ArmKind.SRAM
_STREAM: Final = ArmKind.STREAM
_COMPLETED: Final = UsbStatus.COMPLETED
_EP_DIRECTION: Final = {BULK_OUT_EP: Direction.OUT, BULK_IN_EP: Direction.IN}
_BULK_PACKET_BYTES: Final = 1024  # USB3 bulk max packet: a transfer cut short stops on a packet boundary


class BulkEndpoints:
    """The bulk endpoints (0x02 OUT, 0x81 IN) of a :class:`~tinyhil.emulators.asm2464.front.UsbFront`: pairing a
    transfer at the head of its queue with the arm of its direction, and moving its bytes."""

    def __init__(self, front: UsbFront) -> None:
        self.front = front
        self.bridge = front.bridge
        self.kernel = front.kernel

    def poke(self) -> None:
        """An arm, a release or a stream request happened: waiting bulk transfers may pair now."""
        active = self.front.active
        if active[BULK_OUT_EP] is None and active[BULK_IN_EP] is None:
            return
        for ep in (BULK_OUT_EP, BULK_IN_EP):
            urb = active[ep]
            if urb is not None and urb.status is None and urb.arm is None and not urb.stuck:
                self.start(urb)

    def pairing(self, urb: Urb) -> tuple[Arm, int] | None:
        """The arm a bulk pairs with now and its time on the wire, or ``None`` (the device NAKs)."""
        bridge = self.bridge
        arm = bridge.engine.ready(_EP_DIRECTION[urb.endpoint], urb.length)
        if arm is None:
            return None
        moved = urb.length if urb.limit is None else urb.limit
        timing = bridge.timing
        if arm.kind is _SRAM:
            return arm, timing.bulk_in_ns(moved) if urb.is_in else timing.bulk_out_ns(moved)
        if urb.is_in and not bridge.tlp.stream_readable(arm):
            return None
        return arm, timing.stream_ns(moved)

    def claim(self, urb: Urb, arm: Arm) -> None:
        """``urb`` takes ``arm`` (it frees for the next arm) and starts moving now."""
        self.bridge.engine.claim(arm)
        urb.arm = arm
        urb.started_ns = self.kernel.now_ns
        urb.planned = urb.length if urb.limit is None else urb.limit

    def start(self, urb: Urb) -> None:
        """A bulk at the head of its queue: pair it and schedule its move, or NAK until an arm or its deadline."""
        front = self.front
        paired = self.pairing(urb)
        if paired is None:
            front.ensure_deadline(urb)
            return  # NAK until an arm pairs or the deadline passes
        arm, wire_ns = paired
        self.claim(urb, arm)
        if arm.kind is ArmKind.SRAM:  # the 0xF2 DMA starts when the 8051 gets to it
            done_ns = front.reserve_firmware(wire_ns)
            urb.started_ns = self.kernel.now_ns + done_ns - wire_ns
            wire_ns = done_ns
        urb.moving = self.kernel.schedule(wire_ns, lambda: self.moved(urb))
        front.ensure_deadline(urb, self.kernel.now_ns + wire_ns)

    def moved(self, urb: Urb) -> None:
        """The last packet of a paired bulk has crossed the wire: deliver its bytes and end it (unless stuck)."""
        urb.moving = None
        self._deliver(urb, urb.planned)
        if not urb.stuck:
            self.front.finish(urb, _COMPLETED)

    def _deliver(self, urb: Urb, moved: int) -> None:
        """``moved`` bytes of a paired bulk have crossed the wire: hand them over and free the arm."""
        arm = urb.arm
        assert arm is not None
        urb.arm = None
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
            data = urb.payload[:moved]
            if arm.kind is _STREAM:
                bridge.tlp.stream_write(arm, offset, data, bridge.timing.stream_packet_bytes)
            elif urb.fault is not None and urb.fault.kind is FaultKind.DROP:
                engine.finished(arm)  # the wire moved the bytes; the engine lost them (fault plan)
            else:
                bridge.land(arm, offset, data, whole_transfer=offset == 0 and moved == arm.nbytes)
        urb.actual_length = moved
        engine.give_back(arm, moved)
        if urb.is_in:
            engine.finished(arm)

    def interrupt(self, urb: Urb) -> None:
        """Stop a transfer mid-flight (the front's cancel, timeout, abandon, unplug): a control transfer just stops;
        of a paired bulk, whole packets moved so far are delivered and the rest never moves."""
        if urb.moving is None:
            return
        self.kernel.cancel(urb.moving)
        urb.moving = None
        if urb.setup is not None or urb.arm is None:
            return
        elapsed = self.kernel.now_ns - urb.started_ns
        timing = self.bridge.timing
        if urb.arm.kind is ArmKind.STREAM:
            moved = timing.stream_packets_done(elapsed) * timing.stream_packet_bytes
        else:
            rate = timing.bulk_in_bytes_per_s if urb.is_in else timing.bulk_out_bytes_per_s
            moved = max(0, elapsed - timing.bulk_setup_ns) * rate // 1_000_000_000 // _BULK_PACKET_BYTES
            moved *= _BULK_PACKET_BYTES
        self._deliver(urb, min(moved, urb.planned))

    def cancel_streams(self) -> None:
        """A new 0xF0 OUT cancels a stream in flight: what moved stays, the transfer then times out."""
        active = self.front.active
        if active[BULK_OUT_EP] is None and active[BULK_IN_EP] is None:
            return
        for ep in (BULK_OUT_EP, BULK_IN_EP):
            urb = active[ep]
            if urb is not None and urb.arm is not None and urb.arm.kind is ArmKind.STREAM and urb.moving:
                self.interrupt(urb)
                urb.stuck = True
                urb.message = f"{urb.describe()}: its 0xF0 stream was cancelled by a new 0xF0 OUT request"
                self.front.ensure_deadline(urb)

    def why_waiting(self, urb: Urb) -> str:
        """Why a bulk transfer that reached the device has not moved: the state of the arm of its direction."""
        direction = _EP_DIRECTION.get(urb.endpoint)
        if direction is None:
            return "the device did not answer"
        arm = self.bridge.engine.arms[direction]
        if arm is None:
            return f"no armed operation, expected an 0xF2 or 0xF0 stream arm of exactly {urb.length} bytes first"
        if arm.remaining != urb.length:
            return f"the armed operation expects exactly {arm.remaining} bytes, got {urb.length}"
        if arm.kind is ArmKind.SRAM and urb.is_in:
            return "copyout not released: the GPU never wrote the completion-queue entry at PCIe 0x822000 + 12"
        return "the stream's PCIe range has no completer (unsupported request)"
