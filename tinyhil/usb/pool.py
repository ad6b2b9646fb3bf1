"""Asynchronous transfers of the USB3 transport: a pool of reusable transfers, tags, reaping and error latching.

A submission takes a transfer from the pool (allocating one with ``getTransfer`` only when none is free), keeps the
caller's payload alive, and returns a tag; tags are distinct for the life of the pool. ``wait(tag)`` pumps the event
pump until that transfer has completed, returns it to the pool, and then surfaces a latched error, if any.

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
from dataclasses import dataclass
from typing import Any, Final, cast

from tinyhil._check import check_int
from tinyhil.errors import DeviceTimeout, InvalidArgument, StateError
from tinyhil.usb import _usb1
from tinyhil.usb.errors import ShortTransfer
from tinyhil.usb.seam import EventPump, TransferCallback, UsbHandle, UsbTransfer

__all__ = ["TransferPool"]

_PUMP_SLACK: Final = 16  # extra pump rounds beyond the transfer timeout (each completion may end one round early)


@dataclass(slots=True)
class _Pending:
    """One submitted transfer until it is reaped."""

    tag: int
    what: str
    transfer: UsbTransfer
    keepalive: object  # the caller's payload, referenced until the transfer is reaped
    bulk_endpoint: int | None
    expected: int
    timeout_ms: int
    result: bytearray | None  # control IN: filled on completion
    done: bool = False


class TransferPool:
    """Pooled asynchronous bulk OUT and control transfers over one handle (see the module docstring)."""

    def __init__(self, handle: UsbHandle, events: EventPump, *, max_in_flight: int, pump_interval_s: float) -> None:
        self._handle = handle
        self._events = events
        self._max_in_flight = check_int("max_in_flight", max_in_flight, min_value=1)
        self._pump_interval_s = pump_interval_s
        self._free: deque[UsbTransfer] = deque()
        self._allocated: list[UsbTransfer] = []
        self._tag2pending: dict[int, _Pending] = {}
        self._latched: deque[tuple[int, BaseException]] = deque()
        self._next_tag = 1

    # --- submission ---
    def submit_bulk(self, endpoint: int, view: memoryview, keepalive: object, timeout: int) -> int:
        """Submit a bulk OUT of ``view`` (not copied when writable); returns its tag."""
        pending = self._take(f"async bulk OUT of {len(view):#x} bytes to endpoint {endpoint:#04x}", keepalive, timeout)
        pending.expected = len(view)
        pending.bulk_endpoint = endpoint
        return self._submit(pending, lambda t, cb: t.setBulk(endpoint, view, cb, None, timeout))

    def submit_control(
        self, request_type: int, request: int, value: int, index: int, data_or_len: memoryview | int, timeout: int
    ) -> tuple[int, bytearray | None]:
        """Submit a control transfer (OUT with a data view, IN with a length); returns the tag and the IN buffer."""
        direction = "IN" if isinstance(data_or_len, int) else "OUT"
        what = f"async control {direction} {request:#04x} (wValue={value:#06x}, wIndex={index:#06x})"
        pending = self._take(what, data_or_len, timeout)
        if isinstance(data_or_len, int):
            pending.expected = data_or_len
            pending.result = bytearray(data_or_len)
        else:
            pending.expected = len(data_or_len)
        tag = self._submit(
            pending, lambda t, cb: t.setControl(request_type, request, value, index, data_or_len, cb, None, timeout)
        )
        return tag, pending.result

    def _take(self, what: str, keepalive: object, timeout: int) -> _Pending:
        if len(self._tag2pending) >= self._max_in_flight:
            raise StateError(
                f"{len(self._tag2pending)} transfers are in flight (max_in_flight={self._max_in_flight}); "
                f"reap some with bulk_wait() before submitting more (in flight: {self.in_flight})"
            )
        if self._free:
            transfer = self._free.popleft()
        else:
            transfer = self._handle.getTransfer()
            self._allocated.append(transfer)
        tag = self._next_tag
        self._next_tag += 1
        return _Pending(tag, what, transfer, keepalive, None, 0, timeout, None)

    def _submit(self, pending: _Pending, setup: Callable[[UsbTransfer, TransferCallback], object]) -> int:
        # Registered before submit: an implementation may complete the transfer (and call back) inside submit().
        self._tag2pending[pending.tag] = pending
        try:
            setup(pending.transfer, functools.partial(self._on_complete, pending.tag))
            pending.transfer.submit()
        except BaseException:
            del self._tag2pending[pending.tag]
            self._free.append(pending.transfer)
            raise
        return pending.tag

    def _on_complete(self, tag: int, transfer: UsbTransfer) -> None:
        # Runs inside usb1's ctypes callback, where an exception would be printed and lost: never raise here.
        pending = self._tag2pending.get(tag)
        if pending is None or pending.done:
            return
        pending.done = True
        try:
            error = self._outcome(pending, transfer)
        except Exception as exc:  # a broken handle implementation: surface it at the next wait
            error = exc
        if error is not None:
            self._latch(tag, pending.what, error)

    def _outcome(self, pending: _Pending, transfer: UsbTransfer) -> BaseException | None:
        status = transfer.getStatus()
        actual = min(transfer.getActualLength(), pending.expected)
        if pending.result is not None and actual:
            pending.result[:actual] = memoryview(transfer.getBuffer())[:actual]
        if status != _usb1.TRANSFER_COMPLETED:
            error_cls = _usb1.STATUS2ERROR.get(status, _usb1.USBError)
            error: Any = error_cls()
            if error_cls is _usb1.USBErrorTimeout:  # as usb1's synchronous calls report a timeout
                error.transferred = actual
                if pending.result is not None:
                    error.received = bytes(pending.result[:actual])
            return cast(BaseException, error)
        if actual != pending.expected:
            return ShortTransfer("bulk_wait", pending.what, pending.expected, actual)
        return None

    def _latch(self, tag: int, what: str, error: BaseException) -> None:
        error.add_note(f"tinyhil: {what} (tag {tag}) failed")
        error.tag = tag  # type: ignore[attr-defined]
        self._latched.append((tag, error))

    # --- reaping ---
    @property
    def in_flight(self) -> tuple[int, ...]:
        """Tags submitted and not yet reaped, oldest first."""
        return tuple(self._tag2pending)

    @property
    def latched_error(self) -> BaseException | None:
        """The oldest failed transfer's error that has not surfaced yet, or ``None``."""
        return self._latched[0][1] if self._latched else None

    def clear_error(self) -> tuple[BaseException, ...]:
        """Drop every latched error that has not surfaced yet; returns them, oldest first."""
        dropped = tuple(error for _, error in self._latched)
        self._latched.clear()
        return dropped

    def wait(self, tag: int) -> None:
        """Pump events until transfer ``tag`` completes, reap it, then raise the oldest latched error (once).

        Raises:
            InvalidArgument: ``tag`` is not in flight (never submitted, or already reaped).
            DeviceTimeout: the event pump never completed the transfer (a broken handle; real transfers time out).
            usb1.USBError / ShortTransfer: a latched error (``.tag`` names the failed transfer).
        """
        pending = self._tag2pending.get(tag) if isinstance(tag, int) and not isinstance(tag, bool) else None
        if pending is None:
            state = "already reaped" if isinstance(tag, int) and 0 < tag < self._next_tag else "never submitted"
            raise InvalidArgument(f"tag={tag!r}, expected a tag in flight {self.in_flight} ({state})")
        self._pump_until_done(pending)
        self._reap(pending)
        self._surface()

    def wait_all(self) -> None:
        """Reap every transfer in flight, oldest first (stops at the first latched error it raises)."""
        for tag in self.in_flight:
            if tag in self._tag2pending:
                self.wait(tag)
        self._surface()

    def _pump_until_done(self, pending: _Pending) -> None:
        rounds = math.ceil(pending.timeout_ms / 1000 / self._pump_interval_s) + len(self._tag2pending) + _PUMP_SLACK
        for _ in range(rounds):
            if pending.done:
                return
            self._events.handleEventsTimeout(self._pump_interval_s)
        if not pending.done:
            raise DeviceTimeout(
                f"{pending.what} (tag {pending.tag}) did not complete after {rounds} event-pump rounds of "
                f"{self._pump_interval_s}s (transfer timeout {pending.timeout_ms} ms): the event pump never "
                "delivered its completion",
                op="bulk_wait",
            )

    def _reap(self, pending: _Pending) -> None:
        del self._tag2pending[pending.tag]
        pending.keepalive = None
        if pending.bulk_endpoint is not None and pending.done:
            # usb1 references a writable payload until the transfer is set up again (and ctypes' export stops the
            # caller from resizing it): point the pooled transfer at an empty buffer so the payload is let go.
            pending.transfer.setBulk(pending.bulk_endpoint, 0)
        self._free.append(pending.transfer)

    def _surface(self) -> None:
        if self._latched:
            raise self._latched.popleft()[1]

    # --- teardown ---
    def close(self) -> None:
        """Cancel what is in flight, pump until it has completed, drop latched errors and free every transfer.

        Raises:
            DeviceTimeout: a cancelled transfer never completed (it is abandoned, not freed).
        """
        for pending in self._tag2pending.values():
            if not pending.done:
                # NotFound: it completed meanwhile; NoDevice: the device is gone and its transfers complete anyway.
                with contextlib.suppress(_usb1.USBErrorNotFound, _usb1.USBErrorNoDevice):
                    pending.transfer.cancel()
        stuck: list[DeviceTimeout] = []
        for pending in list(self._tag2pending.values()):
            try:
                self._pump_until_done(pending)
            except DeviceTimeout as exc:
                stuck.append(exc)
                del self._tag2pending[pending.tag]
                self._allocated.remove(pending.transfer)  # still submitted: usb1 refuses to free it
            else:
                self._reap(pending)
        self._latched.clear()
        self._free.clear()
        while self._allocated:
            self._allocated.pop().close()
        if stuck:
            raise stuck[0]
