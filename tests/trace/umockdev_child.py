"""The process under ``umockdev-run``: the USB+AMD device runtime on the real usb1 -> libusb stack, recorded.

``python umockdev_child.py DATA ISSUED [REVISION]`` opens the bridge the way the ``USB+AMD`` target does
(``open_usb3()`` then ``UsbAmdDevice``), on a wrapper of the real ``usb1.USBContext`` (the ``context`` that
``open_usb3`` takes) whose devices open the real handle wrapped twice: in :class:`~tinyhil.trace.RecordingHandle`,
which records every call the driver makes into ``ISSUED`` (written however the run ends), and beneath it in one that
shortens every libusb timeout to :data:`TIMEOUT_MS`, so that a request umockdev cannot match fails in a fraction of a
second instead of the driver's seconds. It copies the bytes of the file ``DATA`` in, copies them out and compares.
Exit status 0: the copy came back right; 1: it did not, or the driver raised (the reason is the last line on stderr).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

import numpy as np

from tinyhil.amdgpu.firmware import GeneratedFirmware
from tinyhil.compiler import HostCCompiler
from tinyhil.trace import RecordingHandle, TraceRecorder
from tinyhil.usb import open_usb3, typed_usb1
from tinyhil.usbgpu.over_usb import UsbAmdDevice

TIMEOUT_MS: Final = 200  # libusb timeout of every transfer under umockdev (a replay answers in well under 1 ms)
WAIT_TIMEOUT_MS: Final = 2000  # the device runtime's own waits


def _short(timeout: int) -> int:
    return TIMEOUT_MS if timeout == 0 else min(timeout, TIMEOUT_MS)  # 0 is libusb's "forever"


class _ShortTransfer:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def setBulk(self, endpoint: int, buffer_or_len: Any, callback: Any = None, user_data: Any = None,
                timeout: int = 0) -> None:  # fmt: skip
        self._inner.setBulk(endpoint, buffer_or_len, callback, user_data, _short(timeout))

    def setControl(self, request_type: int, request: int, value: int, index: int, buffer_or_len: Any,
                   callback: Any = None, user_data: Any = None, timeout: int = 0) -> None:  # fmt: skip
        self._inner.setControl(request_type, request, value, index, buffer_or_len, callback, user_data,
                               _short(timeout))  # fmt: skip

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _ShortHandle:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def controlWrite(self, request_type: int, request: int, value: int, index: int, data: Any, timeout: int = 0) -> int:
        return int(self._inner.controlWrite(request_type, request, value, index, data, _short(timeout)))

    def controlRead(self, request_type: int, request: int, value: int, index: int, length: int,
                    timeout: int = 0) -> Any:  # fmt: skip
        return self._inner.controlRead(request_type, request, value, index, length, _short(timeout))

    def bulkWrite(self, endpoint: int, data: Any, timeout: int = 0) -> int:
        return int(self._inner.bulkWrite(endpoint, data, _short(timeout)))

    def bulkRead(self, endpoint: int, length: int, timeout: int = 0) -> Any:
        return self._inner.bulkRead(endpoint, length, _short(timeout))

    def getTransfer(self, iso_packets: int = 0, short_is_error: bool = False, add_zero_packet: bool = False) -> Any:
        return _ShortTransfer(self._inner.getTransfer(iso_packets, short_is_error, add_zero_packet))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _RecordedDevice:
    def __init__(self, inner: Any, recorder: TraceRecorder) -> None:
        self._inner, self._recorder = inner, recorder

    def open(self) -> RecordingHandle:
        return RecordingHandle(_ShortHandle(self._inner.open()), self._recorder)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _RecordedContext:
    """A ``usb1.USBContext`` whose devices open recorded handles with every timeout cut to :data:`TIMEOUT_MS`.

    Not :class:`~tinyhil.trace.RecordingContext`: it reads the serial number through a second handle, and under
    umockdev 0.17 a second handle on the device gets wrong answers (a string read returns 0 bytes).
    """

    def __init__(self, inner: Any, recorder: TraceRecorder) -> None:
        self._inner, self._recorder = inner, recorder

    def open(self) -> _RecordedContext:
        self._inner.open()
        return self

    def getDeviceIterator(self, skip_on_error: bool = False) -> Any:
        for device in self._inner.getDeviceIterator(skip_on_error=skip_on_error):
            yield _RecordedDevice(device, self._recorder)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def main(argv: list[str]) -> int:
    data_path, issued_path = Path(argv[0]), Path(argv[1])
    revision = argv[2] if len(argv) > 2 else "pipelined"
    data = np.fromfile(data_path, dtype=np.uint8)
    recorder = TraceRecorder()
    status = 1
    try:
        transport = open_usb3(context=_RecordedContext(typed_usb1.new_context(), recorder))
        # The host compiler, as MOCKUSB+AMD and REPLAY+AMD have: with one, the runtime also starts its compute queue,
        # so without it (USB+AMD today) the bring-up would issue other requests than the recording holds.
        # The generated firmware MOCKUSB+AMD boots its gfx1100 with: the boot sends the images over USB.
        device = UsbAmdDevice("USB+AMD", transport, compiler=HostCCompiler(), revision=revision,
                              on_close=transport.close, wait_timeout_ms=WAIT_TIMEOUT_MS,
                              firmware=GeneratedFirmware())  # fmt: skip
        with device:
            buf = device.alloc(data.nbytes)
            device.copyin(buf, data)
            out = np.frombuffer(bytes(device.copyout(buf)), dtype=np.uint8)
        if out.nbytes != data.nbytes:
            print(f"child: copyout returned {out.nbytes:#x} bytes, expected {data.nbytes:#x}", file=sys.stderr)
        elif differ := np.flatnonzero(out != data).tolist():
            print(f"child: the copy came back wrong: {len(differ)} bytes differ, the first at {differ[0]:#x} "
                  f"(copied in {data[differ[0]]:#04x}, copied out {out[differ[0]]:#04x})", file=sys.stderr)  # fmt: skip
        else:
            status = 0
    except Exception as exc:  # any failure of the driver: reported in one line, the recording still saved
        print(f"child: {type(exc).__name__}: {exc}".replace("\n", " | "), file=sys.stderr)
    finally:
        recorder.save(issued_path)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
