"""The usbdevfs requests of every client of the served device, answered by the emulated ASM2464.

umockdev hands each ``ioctl`` on the device node to :meth:`UsbdevfsServer.handle` with a *client* (one open file
of the node) whose argument memory it reads and writes on demand (``IoctlData.resolve`` reads client memory,
``update`` changes the local copy, ``set_ptr`` points a client pointer at a local block, ``client.complete``
writes the changes back and returns ``(result, errno)`` to the caller). The server turns each request into the
emulator's own transfers (:class:`~tinyhil.emulators.asm2464.Urb` on the board's ``front``), so the board's
virtual time, fault plans and quirks apply as they do for MockUSB3 in-process.

Virtual time moves only while a client waits for a URB: a reap with nothing ready runs the board's events, in
order, until one of the client's URBs completes or nothing is due within :data:`REAP_HORIZON_NS`. A usbdevfs URB
carries no timeout (libusb times transfers out on its own clock, then discards them), so a URB that the device
never completes (a NAKing bulk, a timeout fault) stays pending until the client discards it.
"""

from __future__ import annotations

import errno
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from tinyhil.emulators.asm2464 import WAIT_CAP_NS, Urb, UsbStatus
from tinyhil.emulators.asm2464.front import CONTROL_EP, StandardRequest
from tinyhil.mocks.serve.usb.board import ServedBoard
from tinyhil.mocks.serve.usb.descriptors import DescriptorSet
from tinyhil.mocks.serve.usb.recording import ServedRecording
from tinyhil.mocks.serve.usb.usbdevfs import (
    BULK_DATA_OFFSET,
    BULK_TRANSFER,
    CTRL_DATA_OFFSET,
    CTRL_TRANSFER,
    INT32,
    POINTER,
    SERVED_CAPABILITIES,
    SETINTERFACE,
    SETUP,
    SHORT_NOT_OK_ERRNO,
    STATUS_TO_ERRNO,
    UINT32,
    UINT_BYTES,
    URB,
    URB_ACTUAL_LENGTH_OFFSET,
    URB_BUFFER_OFFSET,
    URB_STATUS_OFFSET,
    Request,
    UrbFlag,
    UrbType,
)
from tinyhil.mocks.usb.context import TransferMode
from tinyhil.spec.asm2464 import BULK_IN_EP, BULK_OUT_EP
from tinyhil.trace.records import Op

__all__ = ["REAP_HORIZON_NS", "URB_TIMEOUT_NS", "ClientState", "UsbdevfsServer"]

_log = logging.getLogger(__name__)

# How far ahead a reap runs the board's events looking for a completion (the emulator's longest wait).
REAP_HORIZON_NS: Final = WAIT_CAP_NS
# The emulator-side timeout of a URB: beyond any reap horizon, so only the client's own clock ends a stuck URB.
URB_TIMEOUT_NS: Final = 1 << 62
_NS_PER_MS: Final = 1_000_000
_INTERFACE: Final = 0  # the bridge's one interface
_STANDARD_OUT_ENDPOINT: Final = 0x02  # bmRequestType: OUT, standard, to an endpoint
_STANDARD_OUT_DEVICE: Final = 0x00
_STANDARD_OUT_INTERFACE: Final = 0x01
_FEATURE_ENDPOINT_HALT: Final = 0
_DIRECTION_IN: Final = 0x80
_BULK_ENDPOINTS: Final = (BULK_OUT_EP, BULK_IN_EP)
_SYNC_IOCTL_TIMEOUT_MS: Final = (
    5000  # what the kernel gives the control requests it sends itself (USB_CTRL_SET_TIMEOUT)
)


@dataclass(eq=False)
class _Submitted:
    """One URB a client submitted: its memory (the struct and its buffer, resolved in the server) and the emulator
    transfer that carries it."""

    urb_data: Any  # UMockdev.IoctlData of the struct usbdevfs_urb
    buffer_data: Any  # UMockdev.IoctlData of its buffer, or None for an empty one
    transfer: Urb
    data_offset: int  # where the data stage starts in the buffer (8 for control: the setup packet comes first)
    short_not_ok: bool
    address: int  # the URB's address in the client (DISCARDURB names it)
    tag: int = 0  # its tag in the recording, if any


@dataclass(eq=False)
class ClientState:
    """What one open file of the device node holds: its URBs in flight and completed (reap order)."""

    inflight: dict[int, _Submitted] = field(default_factory=dict)
    done: deque[_Submitted] = field(default_factory=deque)
    claimed: set[int] = field(default_factory=set)


class UsbdevfsServer:
    """Answers the usbdevfs ioctls of the device node's clients from one emulated board (see the module docstring).

    ``handle(client)`` is called from umockdev's worker thread, one request at a time; every request is completed
    before it returns, with the errno the kernel would give (:data:`~.usbdevfs.STATUS_TO_ERRNO`).
    """

    def __init__(
        self, board: ServedBoard, descriptors: DescriptorSet, recording: ServedRecording | None = None
    ) -> None:
        self.board = board
        self.recording = recording
        self.bridge = board.bridge
        self.descriptors = descriptors
        self.clients: dict[Any, ClientState] = {}
        self.requests_served = 0
        self._handlers: dict[int, Callable[[Any, ClientState], tuple[int, int]]] = {
            Request.USBDEVFS_SUBMITURB: self._op_submiturb,
            Request.USBDEVFS_REAPURBNDELAY: self._op_reapurbndelay,
            Request.USBDEVFS_REAPURB: self._op_reapurb,
            Request.USBDEVFS_DISCARDURB: self._op_discardurb,
            Request.USBDEVFS_CONTROL: self._op_control,
            Request.USBDEVFS_BULK: self._op_bulk,
            Request.USBDEVFS_CLAIMINTERFACE: self._op_claiminterface,
            Request.USBDEVFS_RELEASEINTERFACE: self._op_releaseinterface,
            Request.USBDEVFS_SETCONFIGURATION: self._op_setconfiguration,
            Request.USBDEVFS_SETINTERFACE: self._op_setinterface,
            Request.USBDEVFS_GET_CAPABILITIES: self._op_get_capabilities,
            Request.USBDEVFS_CLEAR_HALT: self._op_clear_halt,
            Request.USBDEVFS_RESET: self._op_reset,
            Request.USBDEVFS_ALLOC_STREAMS: self._op_streams,
            Request.USBDEVFS_FREE_STREAMS: self._op_streams,
        }

    # --- the entry points umockdev calls ---
    def handle(self, client: Any) -> None:
        """Answer the client's current ioctl and complete it (never raises: a failure is an errno and a log line)."""
        request = client.get_request()
        state = self.clients.get(client)
        if state is None:  # a new open file of the node
            self._forget_closed()
            state = self.clients[client] = ClientState()
        handler = self._handlers.get(request)
        self.requests_served += 1
        if handler is None:
            _log.info("usbdevfs request %#x is not served, answering ENOTTY", request)
            client.complete(-1, errno.ENOTTY)
            return
        try:
            result, error = handler(client, state)
        except Exception:  # the client must get an answer, never a hang: the diagnosis goes to the log
            _log.exception("usbdevfs request %s failed in the server, answering EIO", Request(request).name)
            result, error = -1, errno.EIO
        client.complete(result, error)

    def _forget_closed(self) -> None:
        """Let go of the clients that have closed the node (umockdev 0.17 announces no closing: each client's
        ``connected`` says it), so their URBs in flight do not hold the endpoints."""
        for client in [client for client in self.clients if not client.get_connected()]:
            self.vanished(client)

    def vanished(self, client: Any) -> None:
        """The client closed the node: its URBs in flight are cancelled, as the kernel kills them on close."""
        state = self.clients.pop(client, None)
        if state is None:
            return
        for submitted in list(state.inflight.values()):
            self.bridge.front.cancel(submitted.transfer)

    # --- URBs ---
    def _op_submiturb(self, client: Any, state: ClientState) -> tuple[int, int]:
        urb_data = client.get_arg().resolve(0, URB.size)
        (kind, endpoint, _status, flags, _buffer, length, _actual, _frame, _packets, _errors, _signr,
         _context) = URB.unpack(bytes(urb_data.retrieve()))  # fmt: skip
        if length < 0:
            return -1, errno.EINVAL
        buffer_data = urb_data.resolve(URB_BUFFER_OFFSET, length) if length else None
        reads_buffer = kind == UrbType.USBDEVFS_URB_TYPE_CONTROL or endpoint != BULK_IN_EP  # a bulk IN only fills it
        buffer = memoryview(b"")
        if reads_buffer and buffer_data is not None:
            buffer = memoryview(bytes(buffer_data.retrieve()))
        if kind == UrbType.USBDEVFS_URB_TYPE_CONTROL:
            if length < SETUP.size:
                return -1, errno.EINVAL
            request_type, request, value, index, wlength = SETUP.unpack(buffer[: SETUP.size])
            if SETUP.size + wlength > length:
                return -1, errno.EINVAL
            transfer = self._control_urb(request_type, request, value, index, wlength, buffer[SETUP.size :])
            data_offset = SETUP.size
        elif kind == UrbType.USBDEVFS_URB_TYPE_BULK:
            if endpoint not in _BULK_ENDPOINTS:
                return -1, errno.ENOENT  # no such endpoint in the active configuration
            is_in = endpoint == BULK_IN_EP
            transfer = Urb(endpoint, length, URB_TIMEOUT_NS, payload=None if is_in else buffer)
            data_offset = 0
        else:
            _log.info("URB type %d on endpoint %#04x: the bridge has only control and bulk endpoints", kind, endpoint)
            return -1, errno.EINVAL
        submitted = _Submitted(urb_data, buffer_data, transfer, data_offset,
                               bool(flags & UrbFlag.USBDEVFS_URB_SHORT_NOT_OK), urb_data.client_addr)  # fmt: skip
        if self.bridge.front.gone:
            return -1, errno.ENODEV
        state.inflight[submitted.address] = submitted
        self._start(submitted, state)
        return 0, 0

    def _control_urb(self, request_type: int, request: int, value: int, index: int, wlength: int,
                     data_stage: memoryview) -> Urb:  # fmt: skip
        setup = (request_type, request, value, index)
        descriptor = self.descriptors.answer(request_type, request, value, index, wlength)
        if descriptor is not None:  # GET_DESCRIPTOR: answered from the descriptors, on no virtual time
            transfer = Urb(CONTROL_EP, wlength, URB_TIMEOUT_NS, setup)
            transfer.data = descriptor
            transfer.actual_length = len(descriptor)
            transfer.status = UsbStatus.COMPLETED
            return transfer
        is_in = bool(request_type & _DIRECTION_IN)
        payload = None if is_in else data_stage[:wlength]
        return Urb(CONTROL_EP, wlength, URB_TIMEOUT_NS, setup, payload)

    def _start(self, submitted: _Submitted, state: ClientState) -> None:
        """Put the transfer on the board: completed at once in sync mode, on the virtual clock in timed mode."""
        transfer = submitted.transfer
        recording = self.recording
        if recording is not None:
            submitted.tag = recording.submitted(transfer)

        def completed(_urb: Urb) -> None:
            if recording is not None:
                recording.completed(submitted.tag, transfer)
            if state.inflight.pop(submitted.address, None) is submitted:
                state.done.append(submitted)

        if transfer.status is not None:  # answered without the board (a descriptor read)
            completed(transfer)
            return
        transfer.on_complete = completed
        self.bridge.front.submit(transfer)
        if self.board.mode is TransferMode.SYNC:  # done at submit, unless the device never completes it
            self._run_events(lambda: transfer.status is not None)

    def _run_events(self, done: Callable[[], bool]) -> None:
        """Run the board's events in order until ``done()`` or none is due within :data:`REAP_HORIZON_NS`; the
        clock never jumps past the last event run."""
        kernel = self.bridge.kernel
        limit = kernel.now_ns + REAP_HORIZON_NS
        while not done() and kernel.step(limit):
            pass

    def _reap(self, client: Any, state: ClientState, *, wait: bool) -> tuple[int, int]:
        if not state.done and state.inflight:
            self._run_events(lambda: bool(state.done))
        if not state.done:
            if self.bridge.front.gone and not state.inflight:
                return -1, errno.ENODEV
            # blocking REAPURB: nothing can complete in virtual time, and the client's own ioctls (serialised on
            # this file) are all that could change that, so the wait ends as a signal would end it
            return -1, errno.EINTR if wait else errno.EAGAIN
        submitted = state.done.popleft()
        self._write_back(submitted)
        target = client.get_arg().resolve(0, POINTER.size)
        target.set_ptr(0, submitted.urb_data)
        return 0, 0

    def _write_back(self, submitted: _Submitted) -> None:
        """Write the outcome into the client's URB (status, actual_length) and IN data into its buffer."""
        transfer = submitted.transfer
        status = transfer.status
        assert status is not None  # only completed transfers are reaped
        error = STATUS_TO_ERRNO[status]
        actual = transfer.actual_length
        if transfer.is_in and actual and submitted.buffer_data is not None:
            submitted.buffer_data.update(submitted.data_offset, bytes(transfer.data[:actual]))
        if not error and transfer.is_in and submitted.short_not_ok and actual < transfer.length:
            error = SHORT_NOT_OK_ERRNO
        submitted.urb_data.update(URB_STATUS_OFFSET, INT32.pack(-error))
        submitted.urb_data.update(URB_ACTUAL_LENGTH_OFFSET, INT32.pack(actual))

    def _op_reapurbndelay(self, client: Any, state: ClientState) -> tuple[int, int]:
        return self._reap(client, state, wait=False)

    def _op_reapurb(self, client: Any, state: ClientState) -> tuple[int, int]:
        return self._reap(client, state, wait=True)

    def _op_discardurb(self, client: Any, state: ClientState) -> tuple[int, int]:
        address = POINTER.unpack(bytes(client.get_arg().retrieve()))[0]
        submitted = state.inflight.get(address)
        if submitted is None:  # unknown, or completed already (it waits to be reaped): the kernel says EINVAL
            return -1, errno.EINVAL
        if self.recording is not None:
            self.recording.host_call(Op.CANCEL, submitted.tag)
        self.bridge.front.cancel(submitted.transfer)
        return 0, 0

    # --- synchronous transfers (the kernel waits for them, with the ioctl's own timeout) ---
    def _sync(self, transfer: Urb, timeout_ms: int, *, record: bool = True) -> tuple[int, int]:
        start_ns = self.bridge.kernel.now_ns
        if transfer.status is None:
            self.bridge.front.complete(transfer)
        status = transfer.status
        assert status is not None
        if record and self.recording is not None:
            self.recording.synchronous(transfer, timeout_ms, start_ns)
        if status is UsbStatus.COMPLETED:
            return transfer.actual_length, 0
        return -1, STATUS_TO_ERRNO[status]

    def _op_control(self, client: Any, state: ClientState) -> tuple[int, int]:
        arg = client.get_arg().resolve(0, CTRL_TRANSFER.size)
        request_type, request, value, index, wlength, timeout_ms, _data = CTRL_TRANSFER.unpack(bytes(arg.retrieve()))
        data = arg.resolve(CTRL_DATA_OFFSET, wlength) if wlength else None
        stage = memoryview(bytes(data.retrieve())) if data is not None else memoryview(b"")
        transfer = self._control_urb(request_type, request, value, index, wlength, stage)
        transfer.timeout_ns = _timeout_ns(timeout_ms)
        result = self._sync(transfer, timeout_ms)
        if result[0] > 0 and transfer.is_in and data is not None:
            data.update(0, bytes(transfer.data[: result[0]]))
        return result

    def _op_bulk(self, client: Any, state: ClientState) -> tuple[int, int]:
        arg = client.get_arg().resolve(0, BULK_TRANSFER.size)
        endpoint, length, timeout_ms, _data = BULK_TRANSFER.unpack(bytes(arg.retrieve()))
        if endpoint not in _BULK_ENDPOINTS:
            return -1, errno.ENOENT
        data = arg.resolve(BULK_DATA_OFFSET, length) if length else None
        is_in = endpoint == BULK_IN_EP
        payload = None if is_in or data is None else memoryview(bytes(data.retrieve()))
        transfer = Urb(endpoint, length, _timeout_ns(timeout_ms), payload=payload)
        result = self._sync(transfer, timeout_ms)
        if result[0] > 0 and is_in and data is not None:
            data.update(0, bytes(transfer.data[: result[0]]))
        return result

    def _standard_out(self, op: Op, setup: tuple[int, int, int, int], value: int) -> tuple[int, int]:
        """A standard request the kernel sends on the client's behalf (SET_CONFIGURATION, CLEAR_FEATURE), recorded
        as the host call ``op`` of ``value``."""
        transfer = Urb(CONTROL_EP, 0, _timeout_ns(_SYNC_IOCTL_TIMEOUT_MS), setup)
        result, error = self._sync(transfer, _SYNC_IOCTL_TIMEOUT_MS, record=False)
        self._host_call(op, value, error)
        return (0, 0) if error == 0 else (result, error)

    def _host_call(self, op: Op, value: int | None, error: int) -> None:
        if self.recording is not None:
            self.recording.host_call(op, value, errno.errorcode.get(error) if error else None)

    # --- device and interface state ---
    def _uint_arg(self, client: Any) -> int:
        return int(UINT32.unpack(bytes(client.get_arg().resolve(0, UINT_BYTES).retrieve()))[0])

    def _op_claiminterface(self, client: Any, state: ClientState) -> tuple[int, int]:
        interface = self._uint_arg(client)
        result = (-1, errno.ENOENT) if interface != _INTERFACE else (0, 0)
        if not result[1]:
            state.claimed.add(interface)
        self._host_call(Op.CLAIM, interface, result[1])
        return result

    def _op_releaseinterface(self, client: Any, state: ClientState) -> tuple[int, int]:
        interface = self._uint_arg(client)
        result = (-1, errno.EINVAL) if interface not in state.claimed else (0, 0)
        state.claimed.discard(interface)
        self._host_call(Op.RELEASE, interface, result[1])
        return result

    def _op_setconfiguration(self, client: Any, state: ClientState) -> tuple[int, int]:
        configuration = self._uint_arg(client)
        setup = (_STANDARD_OUT_DEVICE, StandardRequest.SET_CONFIGURATION, configuration, 0)
        return self._standard_out(Op.SET_CONFIGURATION, setup, configuration)

    def _op_setinterface(self, client: Any, state: ClientState) -> tuple[int, int]:
        interface, alt_setting = SETINTERFACE.unpack(bytes(client.get_arg().resolve(0, SETINTERFACE.size).retrieve()))
        if interface != _INTERFACE:
            return -1, errno.EINVAL  # the kernel finds no such interface
        setup = (_STANDARD_OUT_INTERFACE, StandardRequest.SET_INTERFACE, alt_setting, interface)
        result, error = self._sync(Urb(CONTROL_EP, 0, _timeout_ns(_SYNC_IOCTL_TIMEOUT_MS), setup),
                                   _SYNC_IOCTL_TIMEOUT_MS, record=False)  # fmt: skip
        return (0, 0) if error == 0 else (result, error)

    def _op_clear_halt(self, client: Any, state: ClientState) -> tuple[int, int]:
        endpoint = self._uint_arg(client)
        setup = (_STANDARD_OUT_ENDPOINT, StandardRequest.CLEAR_FEATURE, _FEATURE_ENDPOINT_HALT, endpoint)
        return self._standard_out(Op.CLEAR_HALT, setup, endpoint)

    def _op_get_capabilities(self, client: Any, state: ClientState) -> tuple[int, int]:
        client.get_arg().resolve(0, UINT_BYTES).update(0, UINT32.pack(SERVED_CAPABILITIES))
        return 0, 0

    def _op_reset(self, client: Any, state: ClientState) -> tuple[int, int]:
        front = self.bridge.front
        result = (-1, errno.ENODEV) if front.gone else (0, 0)
        if not result[1]:
            front.port_reset()
        self._host_call(Op.RESET, None, result[1])
        return result

    def _op_streams(self, client: Any, state: ClientState) -> tuple[int, int]:
        _log.info("bulk streams requested: the bridge's endpoints have none (no SuperSpeed stream support)")
        return -1, errno.EINVAL


def _timeout_ns(timeout_ms: int) -> int:
    """A synchronous ioctl's timeout in ns: ``timeout_ms``, at most the emulator's longest wait (2 virtual hours),
    which is also what 0 (wait without end) gets."""
    return min(timeout_ms * _NS_PER_MS, WAIT_CAP_NS) if timeout_ms else WAIT_CAP_NS
