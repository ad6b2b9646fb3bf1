"""Typed access to the parts of ``usb1`` (PyPI ``libusb1``) that tinyhil uses.

``usb1`` ships no type information; importing it through :mod:`importlib` gives mypy an untyped module without a
``type: ignore`` whose need would depend on the mypy configuration. Every name used elsewhere is re-bound here
with its type, so the rest of the package stays strictly typed. Importing ``usb1`` loads no C library: libusb is
loaded when a context is opened.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

__all__ = [
    "STATUS2ERROR",
    "TRANSFER_CANCELLED",
    "TRANSFER_COMPLETED",
    "TRANSFER_ERROR",
    "TRANSFER_NO_DEVICE",
    "TRANSFER_OVERFLOW",
    "TRANSFER_STALL",
    "TRANSFER_TIMED_OUT",
    "USBError",
    "USBErrorIO",
    "USBErrorNoDevice",
    "USBErrorNotFound",
    "USBErrorNotSupported",
    "USBErrorOverflow",
    "USBErrorPipe",
    "USBErrorTimeout",
    "new_context",
    "usb1",
]

usb1: Any = importlib.import_module("usb1")

USBError: Final[type[Exception]] = usb1.USBError
USBErrorPipe: Final[type[Exception]] = usb1.USBErrorPipe
USBErrorTimeout: Final[type[Exception]] = usb1.USBErrorTimeout
USBErrorNoDevice: Final[type[Exception]] = usb1.USBErrorNoDevice
USBErrorOverflow: Final[type[Exception]] = usb1.USBErrorOverflow
USBErrorIO: Final[type[Exception]] = usb1.USBErrorIO
USBErrorNotFound: Final[type[Exception]] = usb1.USBErrorNotFound
USBErrorNotSupported: Final[type[Exception]] = usb1.USBErrorNotSupported

TRANSFER_COMPLETED: Final[int] = usb1.TRANSFER_COMPLETED
TRANSFER_ERROR: Final[int] = usb1.TRANSFER_ERROR
TRANSFER_TIMED_OUT: Final[int] = usb1.TRANSFER_TIMED_OUT
TRANSFER_CANCELLED: Final[int] = usb1.TRANSFER_CANCELLED
TRANSFER_STALL: Final[int] = usb1.TRANSFER_STALL
TRANSFER_NO_DEVICE: Final[int] = usb1.TRANSFER_NO_DEVICE
TRANSFER_OVERFLOW: Final[int] = usb1.TRANSFER_OVERFLOW

# How libusb's own synchronous API turns an asynchronous transfer status into an error (libusb sync.c), so an
# async transfer fails with the same usb1 exception class as the synchronous call would have.
STATUS2ERROR: Final[dict[int, type[Exception]]] = {
    TRANSFER_TIMED_OUT: USBErrorTimeout,
    TRANSFER_STALL: USBErrorPipe,
    TRANSFER_OVERFLOW: USBErrorOverflow,
    TRANSFER_NO_DEVICE: USBErrorNoDevice,
    TRANSFER_ERROR: USBErrorIO,
    TRANSFER_CANCELLED: USBErrorIO,
}


def new_context() -> Any:
    """A fresh, unopened ``usb1.USBContext``."""
    return usb1.USBContext()
