"""A trace of what the served device's clients did (``--option record=PATH``), in tinyhil's trace format.

The server notes each request as the trace records a ``usb1`` handle's calls (docs/traces.md): a URB is a ``Submit``
when it is submitted and a ``Complete`` when the board completes it (its tag is the order of submission), a
synchronous ``USBDEVFS_CONTROL`` / ``USBDEVFS_BULK`` a ``Transfer``, and claiming, releasing, clearing a halt,
selecting a configuration, a reset and a discard are ``HostCall`` records; every time stamp is the board's virtual
clock. The trace is written when the server stops, as ``.hiltrace.jsonl`` or usbmon ``.pcapng`` by the file name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from tinyhil.emulators.asm2464 import Asm2464, Urb, UsbStatus
from tinyhil.mocks.replay import recording_header
from tinyhil.mocks.usb._errors import STATUS_TO_USB1
from tinyhil.trace.recorder import LIBUSB2STATUS, TraceRecorder
from tinyhil.trace.records import Complete, HostCall, Op, Submit, Transfer

__all__ = ["ServedRecording"]

_STATUS: Final = {status: LIBUSB2STATUS[code] for status, code in STATUS_TO_USB1.items()}
_USB1_ERRORS: Final = {  # the usb1 exception a synchronous call on a handle raises for each outcome
    UsbStatus.STALL: "USBErrorPipe",
    UsbStatus.TIMED_OUT: "USBErrorTimeout",
    UsbStatus.NO_DEVICE: "USBErrorNoDevice",
    UsbStatus.CANCELLED: "USBErrorInterrupted",
    UsbStatus.BABBLE: "USBErrorOverflow",
}


class ServedRecording:
    """The records of one `serve usb` session on ``bridge``, written to ``path`` by :meth:`save`."""

    def __init__(self, path: str | Path, bridge: Asm2464, target: str, options: dict[str, Any],
                 device: dict[str, Any]) -> None:  # fmt: skip
        self.path = Path(path)
        kernel = bridge.kernel
        self.recorder = TraceRecorder(lambda: kernel.now_ns, header=recording_header(target, options))
        self.recorder.note_device(device)

    def submitted(self, transfer: Urb) -> int:
        """Record the submission of ``transfer``; returns its tag."""
        recorder = self.recorder
        seq, t_ns = recorder.start()
        tag = recorder.new_tag()
        setup = transfer.setup if transfer.setup is not None else (None, None, None, None)
        payload = recorder.keep(transfer.payload) if transfer.payload is not None else b""
        recorder.fill(seq, Submit, seq, t_ns, tag, transfer.endpoint, transfer.length, payload, 0, *setup)
        return tag

    def completed(self, tag: int, transfer: Urb) -> None:
        """Record the completion of the transfer submitted under ``tag``."""
        recorder = self.recorder
        seq, t_ns = recorder.start()
        status = transfer.status
        assert status is not None
        actual = transfer.actual_length
        data = recorder.keep(memoryview(transfer.data)[:actual]) if transfer.is_in and actual else b""
        recorder.fill(seq, Complete, seq, t_ns, tag, _STATUS[status], actual, data)

    def synchronous(self, transfer: Urb, timeout_ms: int, start_ns: int) -> None:
        """Record a synchronous control or bulk ioctl that has ended (it started at ``start_ns``)."""
        recorder = self.recorder
        seq, _ = recorder.start()
        status = transfer.status
        assert status is not None
        actual = transfer.actual_length
        if transfer.is_in:
            data = recorder.keep(memoryview(transfer.data)[:actual]) if actual else b""
        else:
            data = recorder.keep(transfer.payload) if transfer.payload is not None else b""
        setup = transfer.setup if transfer.setup is not None else (None, None, None, None)
        op = Op.CONTROL if transfer.setup is not None else Op.BULK
        outcome: dict[str, Any] = {"ret": actual} if status is UsbStatus.COMPLETED else {"err": _USB1_ERRORS[status]}
        recorder.fill(seq, Transfer, seq, start_ns, recorder.clock() - start_ns, op, transfer.endpoint,
                      transfer.length, data, timeout_ms, *setup, **outcome)  # fmt: skip

    def host_call(self, op: Op, value: int | None, error: str | None = None) -> None:
        """Record a request that moves no data (claim, release, clear_halt, set_configuration, reset, cancel)."""
        recorder = self.recorder
        seq, t_ns = recorder.start()
        recorder.fill(seq, HostCall, seq, t_ns, 0, op, value, None, error)

    def save(self) -> Path:
        """Write the trace to :attr:`path`."""
        return self.recorder.save(self.path)
