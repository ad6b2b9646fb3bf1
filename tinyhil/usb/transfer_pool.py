"""Asynchronous transfers of the USB3 transport: a pool of reusable transfers, tags, reaping and error latching.

A submission takes a transfer from the pool (allocating one with ``getTransfer`` only when none is free), keeps the
caller's payload alive, and returns a tag; tags are distinct for the life of the pool. ``wait(tag)`` pumps the event
pump until that transfer has completed, returns it to the pool, and then surfaces a latched error, if any. A tag that
is not in flight (``None``, one already reaped) has nothing to wait for: ``wait`` only surfaces a latched error, as the
USB3 class of the driver this transport mirrors does (docs/usb3-compat.md); a strict pool raises instead.

Errors latch: a failed asynchronous transfer records its ``usb1`` error (the class libusb's synchronous API would
raise for that status, with ``.transferred`` / ``.received`` set on timeouts) or a :class:`ShortTransfer`. Each
latched error is raised exactly once, by the next ``wait`` (on any tag: a pipelined protocol must stop at the first
lost transfer, not two chunks later), oldest first; the exception carries ``.tag``, the failed transfer's tag.
``clear_error()`` drops latched errors that have not surfaced yet (after a recovery such as ``clear_halt``): an
error is never raised twice and never sticks forever. After reaping, a pooled bulk transfer is set up again on an
empty buffer, so it no longer references (nor, through ctypes, locks the size of) the caller's payload.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections import deque
from collections.abc import Callable
from typing import Any, Final, cast

from tinyhil._check import check_int
from tinyhil.errors import DeviceTimeout, InvalidArgument, StateError
from tinyhil.spec.asm2464 import MAX_TIMEOUT_MS
from tinyhil.usb import typed_usb1
from tinyhil.usb.errors import ShortTransfer
from tinyhil.usb.handle import EventPump, TransferCallback, UsbHandle, UsbTransfer

__all__ = ["TransferPool"]

_COMPLETED: Final = typed_usb1.TRANSFER_COMPLETED
_ENDPOINT_IN: Final = 0x80  # bit 7 of an endpoint address: device to host
_PUMP_SLACK: Final = 16  # extra pump rounds beyond the transfer timeout (each completion may end one round early)


class _Slot:
    """One pooled transfer and, while it is in flight, its submission (reset by each submit, read until reaped).

    Its completion callback is bound once, when the transfer is allocated: no closure per submission.
    """

    __slots__ = (
        "bulk_endpoint",
        "callback",
        "done",
        "expected",
        "keepalive",
        "result",
        "setup",
        "tag",
        "timeout_ms",
        "transfer",
    )

    def __init__(self, transfer: UsbTransfer, on_complete: Callable[[_Slot, Any], object]) -> None:
        self.transfer = transfer
        self.callback: TransferCallback = functools.partial(on_complete, self)
        self.tag = 0
        self.keepalive: object = None  # the caller's payload, referenced until the transfer is reaped
        self.bulk_endpoint: int | None = None
        self.setup: tuple[int, int, int] = (0, 0, 0)  # control: bRequest, wValue, wIndex (for the description)
        self.expected = 0
        self.timeout_ms = 0
        self.result: bytearray | None = None  # control IN: filled on completion
        self.done = False

    @property
    def what(self) -> str:
        """The submission in words, for error messages (formatted only when one is raised)."""
        if self.bulk_endpoint is not None:
            if self.bulk_endpoint & _ENDPOINT_IN:
                return f"async bulk IN of {self.expected:#x} bytes from endpoint {self.bulk_endpoint:#04x}"
            return f"async bulk OUT of {self.expected:#x} bytes to endpoint {self.bulk_endpoint:#04x}"
        request, value, index = self.setup
        direction = "IN" if self.result is not None else "OUT"
        return f"async control {direction} {request:#04x} (wValue={value:#06x}, wIndex={index:#06x})"


class TransferPool:
    """Pooled asynchronous bulk OUT and control transfers over one handle (see the module docstring)."""

    def __init__(
        self,
        handle: UsbHandle,
        events: EventPump,
        *,
        max_in_flight: int | None,
        pump_interval_s: float,
        strict: bool = False,
    ) -> None:
        self._handle = handle
        self._strict = strict
        self._events = events
        self._max_in_flight = None if max_in_flight is None else check_int("max_in_flight", max_in_flight, min_value=1)
        self._pump_interval_s = pump_interval_s
        self._free: deque[_Slot] = deque()
        self._allocated: list[UsbTransfer] = []
        self._tag2slot: dict[int, _Slot] = {}
        self._latched: deque[tuple[int, BaseException]] = deque()
        self._next_tag = 1

    # --- submission ---
    def submit_bulk(self, endpoint: int, view: memoryview, keepalive: object, timeout: int) -> int:
        """Submit a bulk transfer on ``endpoint`` over ``view``: OUT sends it (not copied when writable), IN fills it
        in place (``view`` must be writable); returns its tag."""
        slot = self._take()
        tag = slot.tag
        slot.keepalive = keepalive
        slot.bulk_endpoint = endpoint
        slot.expected = len(view)
        slot.timeout_ms = timeout
        slot.result = None
        try:
            slot.transfer.setBulk(endpoint, view, slot.callback, None, timeout)
            slot.transfer.submit()
        except BaseException:
            self._unregister(slot)
            raise
        return tag

    def submit_control(
        self,
        request_type: int,
        request: int,
        value: int,
        index: int,
        data_or_len: bytes | memoryview | int,
        timeout: int,
    ) -> tuple[int, bytearray | None]:
        """Submit a control transfer (OUT with a data view, IN with a length); returns the tag and the IN buffer."""
        slot = self._take()
        tag = slot.tag
        slot.keepalive = data_or_len
        slot.bulk_endpoint = None
        slot.setup = (request, value, index)
        slot.timeout_ms = timeout
        if isinstance(data_or_len, int):
            slot.expected = data_or_len
            slot.result = result = bytearray(data_or_len)
        else:
            slot.expected = len(data_or_len)
            slot.result = result = None
        try:
            slot.transfer.setControl(request_type, request, value, index, data_or_len, slot.callback, None, timeout)
            slot.transfer.submit()
        except BaseException:
            self._unregister(slot)
            raise
        return tag, result

    def _take(self) -> _Slot:
        """A free slot, registered in flight under a new tag (registered before submit: an implementation may
        complete the transfer, and call back, inside submit())."""
        if self._max_in_flight is not None and len(self._tag2slot) >= self._max_in_flight:
            raise StateError(
                f"{len(self._tag2slot)} transfers are in flight (max_in_flight={self._max_in_flight}); "
                f"reap some with bulk_wait() before submitting more (in flight: {self.in_flight})"
            )
        if self._free:
            slot = self._free.popleft()
        else:
            transfer = self._handle.getTransfer()
            self._allocated.append(transfer)
            slot = _Slot(transfer, self._on_complete)
        slot.tag = tag = self._next_tag
        self._next_tag = tag + 1
        slot.done = False
        self._tag2slot[tag] = slot
        return slot

    def _unregister(self, slot: _Slot) -> None:
        """Undo ``_take`` after a failed setup or submit: the transfer goes back to the pool."""
        del self._tag2slot[slot.tag]
        slot.keepalive = None
        self._free.append(slot)

    def _on_complete(self, slot: _Slot, transfer: UsbTransfer) -> None:
        # Runs inside usb1's ctypes callback, where an exception would be printed and lost: never raise here.
        if slot.done or self._tag2slot.get(slot.tag) is not slot:  # a stale completion (an abandoned transfer)
            return
        slot.done = True
        try:
            # a transfer that completed whole: nothing to latch (a control IN's bytes go to its buffer)
            if transfer.getStatus() == _COMPLETED and transfer.getActualLength() == slot.expected:
                result = slot.result
                if result:
                    result[:] = memoryview(transfer.getBuffer())[: len(result)]
                return
            error = self._outcome(slot, transfer)
        except Exception as exc:  # a broken handle implementation: surface it at the next wait
            error = exc
        if error is not None:
            self._latch(slot.tag, slot.what, error)

    def _outcome(self, slot: _Slot, transfer: UsbTransfer) -> BaseException | None:
        status = transfer.getStatus()
        actual = transfer.getActualLength()
        expected = slot.expected
        if actual > expected:
            actual = expected
        result = slot.result
        if result is not None and actual:
            result[:actual] = memoryview(transfer.getBuffer())[:actual]
        if status != typed_usb1.TRANSFER_COMPLETED:
            error_cls = typed_usb1.STATUS2ERROR.get(status, typed_usb1.USBError)
            error: Any = error_cls()
            if error_cls is typed_usb1.USBErrorTimeout:  # as usb1's synchronous calls report a timeout
                error.transferred = actual
                if result is not None:
                    error.received = bytes(result[:actual])
                elif slot.bulk_endpoint is not None and slot.bulk_endpoint & _ENDPOINT_IN:
                    error.received = bytes(memoryview(transfer.getBuffer())[:actual])
            return cast(BaseException, error)
        if actual != expected:
            return ShortTransfer("bulk_wait", slot.what, expected, actual)
        return None

    def _latch(self, tag: int, what: str, error: BaseException) -> None:
        error.add_note(f"tinyhil: {what} (tag {tag}) failed")
        error.tag = tag  # type: ignore[attr-defined]
        self._latched.append((tag, error))

    # --- reaping ---
    @property
    def in_flight(self) -> tuple[int, ...]:
        """Tags submitted and not yet reaped, oldest first."""
        return tuple(self._tag2slot)

    @property
    def latched_error(self) -> BaseException | None:
        """The oldest failed transfer's error that has not surfaced yet, or ``None``."""
        return self._latched[0][1] if self._latched else None

    def clear_error(self) -> tuple[BaseException, ...]:
        """Drop every latched error that has not surfaced yet; returns them, oldest first."""
        dropped = tuple(error for _, error in self._latched)
        self._latched.clear()
        return dropped

    def wait(self, tag: object) -> None:
        """Pump events until transfer ``tag`` completes, reap it, then raise the oldest latched error (once).

        A ``tag`` not in flight (``None``, never submitted, already reaped) returns at once after the latched-error
        check; a strict pool raises :class:`InvalidArgument` for it instead.

        Raises:
            InvalidArgument: strict only: ``tag`` is not in flight.
            DeviceTimeout: the event pump never completed the transfer (a broken handle; real transfers time out).
            usb1.USBError / ShortTransfer: a latched error (``.tag`` names the failed transfer).
        """
        if type(tag) is int:
            slot = self._tag2slot.get(tag)
        else:
            slot = self._tag2slot.get(tag) if isinstance(tag, int) and not isinstance(tag, bool) else None
        if slot is None:
            if self._strict:
                state = "already reaped" if isinstance(tag, int) and 0 < tag < self._next_tag else "never submitted"
                raise InvalidArgument(
                    f"bulk_wait(tag={tag!r}): strict mode, expected a tag in flight {self.in_flight} ({state}); "
                    "without strict the wait returns at once, as on a board (docs/usb3-compat.md)"
                )
            self._surface()
            return
        if not slot.done:
            self._pump_until_done(slot)
        if slot.bulk_endpoint is None:  # a control transfer's reap
            del self._tag2slot[slot.tag]
            slot.keepalive = None
            self._free.append(slot)
        else:
            self._reap(slot)
        if self._latched:
            self._surface()

    def wait_all(self) -> None:
        """Reap every transfer in flight, oldest first (stops at the first latched error it raises)."""
        for tag in self.in_flight:
            if tag in self._tag2slot:
                self.wait(tag)
        self._surface()

    def _pump_until_done(self, slot: _Slot) -> None:
        """Pump events until ``slot`` (not done yet) is done, for at most its timeout's worth of rounds plus slack."""
        in_flight = len(self._tag2slot)
        pump, interval_s = self._events.handleEventsTimeout, self._pump_interval_s
        pumped, rounds = 0, 1  # one round completes it in the emulated sync mode; the bound is worked out after
        while pumped < rounds:
            pump(interval_s)
            pumped += 1
            if slot.done:
                return
            if pumped == 1:
                timeout_ms = slot.timeout_ms or MAX_TIMEOUT_MS  # 0 is libusb's "forever": bound it by the cap
                rounds = math.ceil(timeout_ms / 1000 / interval_s) + in_flight + _PUMP_SLACK
        raise DeviceTimeout(
            f"{slot.what} (tag {slot.tag}) did not complete after {rounds} event-pump rounds of "
            f"{interval_s}s (transfer timeout {slot.timeout_ms} ms): the event pump never "
            "delivered its completion",
            op="bulk_wait",
        )

    def _reap(self, slot: _Slot) -> None:
        del self._tag2slot[slot.tag]
        slot.keepalive = None
        if slot.bulk_endpoint is not None and slot.done:
            # usb1 references a writable payload until the transfer is set up again (and ctypes' export stops the
            # caller from resizing it): point the pooled transfer at an empty buffer so the payload is let go.
            slot.transfer.setBulk(slot.bulk_endpoint, 0)
        self._free.append(slot)

    def _surface(self) -> None:
        if self._latched:
            raise self._latched.popleft()[1]

    # --- teardown ---
    def close(self) -> None:
        """Cancel what is in flight, pump until it has completed, drop latched errors and free every transfer.

        Raises:
            DeviceTimeout: a cancelled transfer never completed (it is abandoned, not freed).
        """
        for slot in self._tag2slot.values():
            if not slot.done:
                # NotFound: it completed meanwhile; NoDevice: the device is gone and its transfers complete anyway.
                with contextlib.suppress(typed_usb1.USBErrorNotFound, typed_usb1.USBErrorNoDevice):
                    slot.transfer.cancel()
        stuck: list[DeviceTimeout] = []
        for slot in list(self._tag2slot.values()):
            try:
                if not slot.done:
                    self._pump_until_done(slot)
            except DeviceTimeout as exc:
                stuck.append(exc)
                del self._tag2slot[slot.tag]
                self._allocated.remove(slot.transfer)  # still submitted: usb1 refuses to free it
            else:
                self._reap(slot)
        self._latched.clear()
        self._free.clear()
        while self._allocated:
            self._allocated.pop().close()
        if stuck:
            raise stuck[0]
