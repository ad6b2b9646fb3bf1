"""The usbdevfs ABI the served device speaks: request numbers, struct layouts, URB types, flags, capabilities, and
the one table of errnos an emulator outcome becomes (docs/serve.md, "The usbdevfs ioctls").

Layouts are those of ``linux/usbdevice_fs.h`` on a 64-bit little-endian host (x86-64, arm64): pointers are 8
bytes and 8-byte aligned. Request numbers use asm-generic's ``_IOC`` encoding (:mod:`tinyhil.spec.linux_ioctl`);
their direction bits are the header's own (``SUBMITURB`` is ``_IOR`` although the kernel reads the URB).
"""

from __future__ import annotations

import errno
import struct
from enum import IntEnum, IntFlag
from typing import Final

from tinyhil.emulators.asm2464 import UsbStatus
from tinyhil.spec.linux_ioctl import IocDir, ioc

__all__ = [
    "BULK_DATA_OFFSET",
    "BULK_TRANSFER",
    "CTRL_DATA_OFFSET",
    "CTRL_TRANSFER",
    "INT32",
    "POINTER",
    "SERVED_CAPABILITIES",
    "SETINTERFACE",
    "SETUP",
    "SHORT_NOT_OK_ERRNO",
    "STATUS_TO_ERRNO",
    "UINT32",
    "UINT_BYTES",
    "URB",
    "URB_ACTUAL_LENGTH_OFFSET",
    "URB_BUFFER_OFFSET",
    "URB_STATUS_OFFSET",
    "USBDEVFS_TYPE",
    "Capability",
    "Request",
    "UrbFlag",
    "UrbType",
]

USBDEVFS_TYPE: Final = ord("U")  # the ioctl type byte of every usbdevfs request

# struct usbdevfs_ctrltransfer { __u8 bRequestType, bRequest; __u16 wValue, wIndex, wLength; __u32 timeout (ms);
#                                void *data; }: 24 bytes, the pointer at offset 16.
CTRL_TRANSFER: Final = struct.Struct("<BBHHHI4xQ")
CTRL_DATA_OFFSET: Final = 16
# struct usbdevfs_bulktransfer { unsigned int ep, len, timeout (ms); void *data; }: 24 bytes, the pointer at 16.
BULK_TRANSFER: Final = struct.Struct("<III4xQ")
BULK_DATA_OFFSET: Final = 16
# struct usbdevfs_urb { unsigned char type, endpoint; int status; unsigned int flags; void *buffer;
#   int buffer_length, actual_length, start_frame; union { int number_of_packets; unsigned int stream_id; };
#   int error_count; unsigned int signr; void *usercontext; struct usbdevfs_iso_packet_desc iso_frame_desc[]; }
# 56 bytes without iso frames.
URB: Final = struct.Struct("<BBxxiI4xQiiiIiIQ")
URB_STATUS_OFFSET: Final = 4
URB_BUFFER_OFFSET: Final = 16
URB_ACTUAL_LENGTH_OFFSET: Final = 28
INT32: Final = struct.Struct("<i")
UINT32: Final = struct.Struct("<I")
POINTER: Final = struct.Struct("<Q")  # REAPURB's argument: where the kernel stores the reaped URB's address
# A control URB's buffer starts with the 8-byte setup packet (bmRequestType, bRequest, wValue, wIndex, wLength).
SETUP: Final = struct.Struct("<BBHHH")
UINT_BYTES: Final = UINT32.size
# struct usbdevfs_setinterface { unsigned int interface, altsetting; }
SETINTERFACE: Final = struct.Struct("<II")


class Request(IntEnum):
    """The usbdevfs requests the server answers (``linux/usbdevice_fs.h``)."""

    USBDEVFS_CONTROL = ioc(IocDir.IOC_READ | IocDir.IOC_WRITE, USBDEVFS_TYPE, 0, CTRL_TRANSFER.size)
    USBDEVFS_BULK = ioc(IocDir.IOC_READ | IocDir.IOC_WRITE, USBDEVFS_TYPE, 2, BULK_TRANSFER.size)
    USBDEVFS_SETINTERFACE = ioc(IocDir.IOC_READ, USBDEVFS_TYPE, 4, SETINTERFACE.size)
    USBDEVFS_SETCONFIGURATION = ioc(IocDir.IOC_READ, USBDEVFS_TYPE, 5, UINT_BYTES)
    USBDEVFS_SUBMITURB = ioc(IocDir.IOC_READ, USBDEVFS_TYPE, 10, URB.size)
    USBDEVFS_DISCARDURB = ioc(IocDir.IOC_NONE, USBDEVFS_TYPE, 11, 0)
    USBDEVFS_REAPURB = ioc(IocDir.IOC_WRITE, USBDEVFS_TYPE, 12, POINTER.size)
    USBDEVFS_REAPURBNDELAY = ioc(IocDir.IOC_WRITE, USBDEVFS_TYPE, 13, POINTER.size)
    USBDEVFS_CLAIMINTERFACE = ioc(IocDir.IOC_READ, USBDEVFS_TYPE, 15, UINT_BYTES)
    USBDEVFS_RELEASEINTERFACE = ioc(IocDir.IOC_READ, USBDEVFS_TYPE, 16, UINT_BYTES)
    USBDEVFS_RESET = ioc(IocDir.IOC_NONE, USBDEVFS_TYPE, 20, 0)
    USBDEVFS_CLEAR_HALT = ioc(IocDir.IOC_READ, USBDEVFS_TYPE, 21, UINT_BYTES)
    USBDEVFS_GET_CAPABILITIES = ioc(IocDir.IOC_READ, USBDEVFS_TYPE, 26, UINT_BYTES)
    USBDEVFS_ALLOC_STREAMS = ioc(IocDir.IOC_READ, USBDEVFS_TYPE, 28, 2 * UINT_BYTES)
    USBDEVFS_FREE_STREAMS = ioc(IocDir.IOC_READ, USBDEVFS_TYPE, 29, 2 * UINT_BYTES)


class UrbType(IntEnum):
    """``usbdevfs_urb.type``."""

    USBDEVFS_URB_TYPE_ISO = 0
    USBDEVFS_URB_TYPE_INTERRUPT = 1
    USBDEVFS_URB_TYPE_CONTROL = 2
    USBDEVFS_URB_TYPE_BULK = 3


class UrbFlag(IntFlag):
    """``usbdevfs_urb.flags``."""

    USBDEVFS_URB_SHORT_NOT_OK = 0x01
    USBDEVFS_URB_ISO_ASAP = 0x02
    USBDEVFS_URB_BULK_CONTINUATION = 0x04
    USBDEVFS_URB_ZERO_PACKET = 0x40
    USBDEVFS_URB_NO_INTERRUPT = 0x80


class Capability(IntFlag):
    """``USBDEVFS_GET_CAPABILITIES`` bits (``USBDEVFS_CAP_*``)."""

    USBDEVFS_CAP_ZERO_PACKET = 0x01
    USBDEVFS_CAP_BULK_CONTINUATION = 0x02
    USBDEVFS_CAP_NO_PACKET_SIZE_LIM = 0x04
    USBDEVFS_CAP_BULK_SCATTER_GATHER = 0x08
    USBDEVFS_CAP_REAP_AFTER_DISCONNECT = 0x10


# What the served device advertises: no packet-size limit and scatter-gather, so libusb sends one transfer as one
# URB (it splits transfers into 16 KB URBs otherwise) and each libusb transfer is one emulator transfer, as in
# MockUSB3; URBs can be reaped after a disconnect, as from an xHCI.
SERVED_CAPABILITIES: Final = (
    Capability.USBDEVFS_CAP_ZERO_PACKET
    | Capability.USBDEVFS_CAP_BULK_CONTINUATION
    | Capability.USBDEVFS_CAP_NO_PACKET_SIZE_LIM
    | Capability.USBDEVFS_CAP_BULK_SCATTER_GATHER
    | Capability.USBDEVFS_CAP_REAP_AFTER_DISCONNECT
)

# The one table of how an emulated transfer's outcome reaches a usbdevfs client: the errno of a synchronous
# ioctl (CONTROL, BULK) and, negated, a reaped URB's ``status``. These are the values the kernel's usbdevfs and
# xHCI driver return: a stall is EPIPE, a transfer that exceeded its ioctl timeout ETIMEDOUT, a device that left
# the bus ENODEV, a discarded URB ENOENT, a babble (the device sent more than the IN transfer asked for) EOVERFLOW.
STATUS_TO_ERRNO: Final = {
    UsbStatus.COMPLETED: 0,
    UsbStatus.STALL: errno.EPIPE,
    UsbStatus.TIMED_OUT: errno.ETIMEDOUT,
    UsbStatus.NO_DEVICE: errno.ENODEV,
    UsbStatus.CANCELLED: errno.ENOENT,
    UsbStatus.BABBLE: errno.EOVERFLOW,
}
SHORT_NOT_OK_ERRNO: Final = errno.EREMOTEIO  # a short IN with USBDEVFS_URB_SHORT_NOT_OK completes with this status
