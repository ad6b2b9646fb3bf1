"""The bridge's bulk endpoints: pairing a bulk transfer with the armed operation of its direction, and moving it.

A bulk at the head of its queue pairs with the 0xF2 or 0xF0 stream arm of its direction (until then the device
NAKs); its bytes cross the wire on the virtual clock and are handed over when the last packet has moved, or, cut
short (cancel, timeout, power cycle), whole packets so far. :class:`_BulkEndpoints` is the bulk part of
:class:`~tinyhil.emulators.asm2464.front.UsbFront`, which inherits it (no call layer on the transfer path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tinyhil.emulators.asm2464.sram import Arm, ArmKind, Direction
from tinyhil.emulators.asm2464.urb import Urb, UsbStatus
from tinyhil.emulators.faults import FaultKind
from tinyhil.spec.asm2464 import BULK_IN_EP, BULK_OUT_EP

if TYPE_CHECKING:
    from tinyhil.emulators.asm2464.device import Asm2464
    from tinyhil.emulators.kernel import EventKernel

__all__: list[str] = []

_SRAM: Final = ArmKind.SRAM
_STREAM: Final = ArmKind.STREAM
_COMPLETED: Final = UsbStatus.COMPLETED
_EP_DIRECTION: Final = {BULK_OUT_EP: Direction.OUT, BULK_IN_EP: Direction.IN}
_BULK_PACKET_BYTES: Final = 1024  # USB3 bulk max packet: a transfer cut short stops on a packet boundary


class _BulkEndpoints:
    """The bulk endpoints of :class:`~tinyhil.emulators.asm2464.front.UsbFront` (its base): pairing and moving."""

    bridge: Asm2464
    kernel: EventKernel
    active: dict[int, Urb | None]

    if TYPE_CHECKING:  # defined by UsbFront

        def _ensure_deadline(self, urb: Urb, busy_until_ns: int | None = None) -> None: ...

        def _reserve_firmware(self, busy_ns: int) -> int: ...

        def _finish(self, urb: Urb, status: UsbStatus, message: str = "") -> None: ...

    def poke(self) -> None:
        """An arm, a release or a stream request happened: waiting bulk transfers may pair now."""
        active = self.active
        if active[BULK_OUT_EP] is None and active[BULK_IN_EP] is None:
            return
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

    def _bulk_moved(self, urb: Urb) -> None:
        urb._moving = None
        self._deliver(urb, urb._planned)
        if not urb._stuck:
            self._finish(urb, _COMPLETED)

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
            data = urb.payload[:moved]
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
            return
        for ep in (BULK_OUT_EP, BULK_IN_EP):
            urb = self.active[ep]
            if urb is not None and urb._arm is not None and urb._arm.kind is ArmKind.STREAM and urb._moving:
                self._interrupt(urb)
                urb._stuck = True
                urb.message = f"{urb.describe()}: its 0xF0 stream was cancelled by a new 0xF0 OUT request"
                self._ensure_deadline(urb)
