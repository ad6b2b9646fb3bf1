"""The USB handle seam: the subset of ``usb1``'s API that tinyhil's USB transport uses.

Three small protocols, each satisfied by ``usb1`` itself (``USBDeviceHandle``, ``USBTransfer``, ``USBContext``) and
by any drop-in (the emulated handle over the ASM2464 model, a replay handle, a recording wrapper). Method names,
parameter names and defaults are ``usb1``'s, so a driver written against the seam runs unchanged on all of them.

Contract beyond the signatures (what ``usb1`` does and every implementation must do):

- Errors are ``usb1``'s exception classes: a stall raises ``usb1.USBErrorPipe``, a timeout ``usb1.USBErrorTimeout``
  with ``.transferred`` (writes) or ``.received`` (reads) set, a vanished device ``usb1.USBErrorNoDevice``, a
  device that sent more than a read asked for (babble) ``usb1.USBErrorOverflow``.
- ``controlRead`` / ``bulkRead`` return the received bytes (a ``bytearray``); ``controlWrite`` / ``bulkWrite``
  return the number of bytes sent (fewer than asked is a short write, not an exception).
- A transfer from ``getTransfer`` is set up with ``setBulk`` / ``setControl`` (giving a ``callback`` and
  ``user_data``), then ``submit``-ted; its callback runs, with the transfer as argument, from inside ``submit`` or
  from inside the event pump's ``handleEventsTimeout``; after the callback, ``getStatus`` is one of the
  ``usb1.TRANSFER_*`` constants and ``getActualLength`` / ``getBuffer`` describe the data stage. A completed
  transfer may be set up and submitted again.
- A writable bulk OUT buffer (``bytearray``, writable ``memoryview``) is not copied: it is read when the transfer
  moves the data, so the caller keeps it alive and unchanged until the transfer completes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

__all__ = ["EventPump", "UsbHandle", "UsbSyncIO", "UsbTransfer"]

# Method names are usb1's camelCase on purpose: the spelling is the contract.

TransferCallback = Callable[[Any], object]


@runtime_checkable
class UsbTransfer(Protocol):
    """An asynchronous transfer (``usb1.USBTransfer`` subset)."""

    def setBulk(
        self,
        endpoint: int,
        buffer_or_len: Any,
        callback: TransferCallback | None = None,
        user_data: Any = None,
        timeout: int = 0,
    ) -> None:
        """Set up a bulk transfer: ``buffer_or_len`` is the OUT payload or the IN length; ``timeout`` in ms."""

    def setControl(
        self,
        request_type: int,
        request: int,
        value: int,
        index: int,
        buffer_or_len: Any,
        callback: TransferCallback | None = None,
        user_data: Any = None,
        timeout: int = 0,
    ) -> None:
        """Set up a control transfer: ``buffer_or_len`` is the OUT data stage or the IN length; ``timeout`` in ms."""

    def submit(self) -> None:
        """Start the transfer; raises a ``usb1`` error if it cannot be submitted."""

    def cancel(self) -> None:
        """Ask for cancellation; completion (status ``TRANSFER_CANCELLED``) still comes through the callback."""

    def getStatus(self) -> int:
        """The ``usb1.TRANSFER_*`` status of the completed transfer."""

    def getActualLength(self) -> int:
        """Bytes moved by the completed transfer."""

    def getBuffer(self) -> Any:
        """The data-stage buffer (for IN transfers: the received bytes, ``getActualLength()`` of them valid)."""

    def close(self) -> None:
        """Free the transfer; it must not be submitted."""


@runtime_checkable
class UsbSyncIO(Protocol):
    """Synchronous transfers on an open device. Timeouts are in milliseconds; 0 waits forever."""

    def controlWrite(self, request_type: int, request: int, value: int, index: int, data: Any, timeout: int = 0) -> int:
        """Synchronous control OUT; returns the number of data-stage bytes sent."""

    def controlRead(
        self, request_type: int, request: int, value: int, index: int, length: int, timeout: int = 0
    ) -> Any:
        """Synchronous control IN; returns the received bytes."""

    def bulkWrite(self, endpoint: int, data: Any, timeout: int = 0) -> int:
        """Synchronous bulk OUT; returns the number of bytes sent."""

    def bulkRead(self, endpoint: int, length: int, timeout: int = 0) -> Any:
        """Synchronous bulk IN; returns the received bytes."""

    def clearHalt(self, endpoint: int) -> None:
        """CLEAR_FEATURE(ENDPOINT_HALT) on ``endpoint``."""


@runtime_checkable
class UsbHandle(UsbSyncIO, Protocol):
    """An open USB device (``usb1.USBDeviceHandle`` subset): synchronous I/O plus ownership and async transfers."""

    def claimInterface(self, interface: int) -> object:
        """Claim ``interface`` for this process."""

    def releaseInterface(self, interface: int) -> None:
        """Release a claimed interface."""

    def resetDevice(self) -> None:
        """USB port reset of the device."""

    def getTransfer(
        self, iso_packets: int = 0, short_is_error: bool = False, add_zero_packet: bool = False
    ) -> UsbTransfer:
        """A new asynchronous transfer bound to this handle."""

    def close(self) -> None:
        """Close the handle."""


@runtime_checkable
class EventPump(Protocol):
    """What completes asynchronous transfers (``usb1.USBContext`` subset)."""

    def handleEventsTimeout(self, tv: float = 0) -> None:
        """Run completion callbacks of finished transfers, waiting at most ``tv`` seconds for one to finish."""
