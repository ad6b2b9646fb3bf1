"""The emulated ``usb1.USBContext``: device enumeration over emulated boards and the libusb event pump."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import StrEnum
from typing import Any, Final

from tinyhil.emulators.asm2464 import WAIT_CAP_NS, Asm2464, Urb
from tinyhil.emulators.kernel import EventKernel, VirtualTimeout
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.mocks.usb.device import EmulatedUsbDevice
from tinyhil.mocks.usb.transfer import EmulatedUsbTransfer

__all__ = ["EmulatedUsbContext", "TransferMode"]

_NS_PER_S: Final = 1_000_000_000
_HANDLE_EVENTS_TIMEOUT_NS: Final = 60 * _NS_PER_S  # libusb_handle_events waits up to 60 s
_MAX_TV_S: Final = WAIT_CAP_NS // _NS_PER_S


class TransferMode(StrEnum):
    """When an asynchronous transfer completes (docs/asm2464.md "Modes: sync and timed")."""

    SYNC = "sync"  # at submit (its callback still waits for the next event pump)
    TIMED = "timed"  # on the virtual clock, by the board's timing model; OUT payloads are read at completion


class EmulatedUsbContext:
    """A USB context whose bus holds the given emulated boards, one device each, each with its own state.

    All boards share one virtual clock (the first board's kernel): pass ``kernel=`` to each board, or build them
    with :func:`~tinyhil.mocks.usb.open_emulated_board`. ``handleEventsTimeout(tv)`` runs virtual time for up to
    ``tv`` seconds until a transfer completes, then fires the callbacks of every completed transfer.
    """

    def __init__(self, *boards: Asm2464, mode: TransferMode | str = TransferMode.SYNC) -> None:
        try:
            self.mode = TransferMode(mode)
        except ValueError:
            raise InvalidArgument(f"mode={mode!r}, expected one of {[m.value for m in TransferMode]}") from None
        for board in boards:
            if not isinstance(board, Asm2464):
                raise InvalidArgument(f"board {board!r}, expected an Asm2464")
        kernels = {id(board.kernel) for board in boards}
        if len(kernels) > 1:
            raise InvalidArgument("boards run on different EventKernels, expected one shared virtual clock per context")
        if len({id(board) for board in boards}) != len(boards):
            raise InvalidArgument("the same board was passed twice, expected one device per board")
        self.kernel = boards[0].kernel if boards else EventKernel()
        self._devices = [EmulatedUsbDevice(self, board, position) for position, board in enumerate(boards)]
        self._ready: list[EmulatedUsbTransfer] = []
        self._closed = False

    # --- enumeration ---
    def _check_open(self, method: str) -> None:
        if self._closed:
            raise StateError(f"EmulatedUsbContext.{method}: the context is closed, expected an open one")

    def getDeviceList(self, skip_on_access_error: bool = False, skip_on_error: bool = False) -> list[Any]:
        """One device per board still on the bus (a board whose device is gone has left it)."""
        self._check_open("getDeviceList")
        return [device for device in self._devices if not device.bridge.front.gone]

    def getDeviceIterator(self, skip_on_error: bool = False) -> Iterator[Any]:
        return iter(self.getDeviceList())

    def getByVendorIDAndProductID(
        self, vendor_id: int, product_id: int, skip_on_access_error: bool = False, skip_on_error: bool = False
    ) -> Any:
        """The first device with this VID:PID, or ``None``."""
        for device in self.getDeviceList():
            if (device.getVendorID(), device.getProductID()) == (vendor_id, product_id):
                return device
        return None

    def openByVendorIDAndProductID(
        self, vendor_id: int, product_id: int, skip_on_access_error: bool = False, skip_on_error: bool = False
    ) -> Any:
        """Open the first device with this VID:PID; ``None`` when there is none (as usb1 does)."""
        device = self.getByVendorIDAndProductID(vendor_id, product_id)
        return None if device is None else device.open()

    # --- transfers and the event pump ---
    def _submit(self, board: Asm2464, transfer: EmulatedUsbTransfer, urb: Urb) -> None:
        if self.mode is TransferMode.SYNC:
            board.front.complete(urb)
            self._ready.append(transfer)
        else:
            urb.on_complete = lambda _urb: self._ready.append(transfer)
            board.front.submit(urb)

    def handleEventsTimeout(self, tv: float | None = 0) -> None:
        """Run virtual time for at most ``tv`` seconds until a transfer completes; fire completed callbacks.

        Raises:
            InvalidArgument: ``tv`` is not a number of seconds in ``[0, WAIT_CAP_NS]`` (2 h: the longest virtual
                wait the emulator runs, as for a transfer's timeout; NaN and infinity included).
        """
        if self._closed:
            self._check_open("handleEventsTimeout")
        seconds = 0 if tv is None else tv
        # the chained comparison is false for NaN
        if not isinstance(seconds, (int, float)) or not 0 <= seconds <= _MAX_TV_S:
            raise InvalidArgument(f"tv={tv!r}, expected seconds >= 0 and <= {_MAX_TV_S} (the virtual wait cap, 2 h)")
        if not self._ready:
            # Nothing completing within tv is no error: libusb returns after the timeout.
            with contextlib.suppress(VirtualTimeout):
                self.kernel.run_until(lambda: bool(self._ready), int(seconds * _NS_PER_S), what="a USB transfer")
        ready, self._ready = self._ready, []
        for transfer in ready:
            transfer._completed()

    def handleEvents(self) -> None:
        """Pump events, waiting (virtually) up to libusb's 60 s for a transfer to complete."""
        self.handleEventsTimeout(_HANDLE_EVENTS_TIMEOUT_NS / _NS_PER_S)

    # --- lifecycle ---
    def open(self) -> EmulatedUsbContext:
        self._closed = False
        return self

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> EmulatedUsbContext:
        return self.open()

    def __exit__(self, exc_type: object, exc_val: object, exc_tb: object) -> None:
        self.close()
