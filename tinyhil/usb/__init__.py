"""The USB side of tinyhil: the handle seam, the USB3 transport to an ASM2464 bridge and the real libusb backend.

- :mod:`tinyhil.usb.handle`: ``UsbHandle``, ``UsbSyncIO``, ``UsbTransfer``, ``EventPump`` (the ``usb1`` subset).
- :mod:`tinyhil.usb.transport`: ``Usb3Transport`` (sync and pooled async transfers, state guard).
- :mod:`tinyhil.usb.bridge_io`: ``BridgeIO``, ``AsyncBridgeIO`` (the transport API drivers depend on) and
  ``check_timeout_ms``, the one check of a timeout.
- :mod:`tinyhil.usb.transfer_pool`: ``TransferPool`` (tags, reaping, error latching).
- :mod:`tinyhil.usb.backend`: ``open_usb3``, ``list_bridges``, ``probe_usb3`` over ``usb1`` and the system libusb.
- :mod:`tinyhil.usb.bot`: Bulk-Only Transport framing (CBW, CSW) for ``Usb3Transport.send_batch``.
- :mod:`tinyhil.usb.errors`: ``BridgeUnavailable``, ``ShortTransfer``.
- :mod:`tinyhil.usb.typed_usb1`: the parts of ``usb1`` tinyhil uses (its errors, transfer statuses, a context),
  typed.
"""

from __future__ import annotations

from tinyhil.usb.backend import NO_BRIDGE_REASON, BridgeInfo, list_bridges, open_usb3, probe_usb3
from tinyhil.usb.bridge_io import MAX_TIMEOUT_MS, AsyncBridgeIO, BridgeIO, check_timeout_ms
from tinyhil.usb.errors import BridgeUnavailable, ShortTransfer
from tinyhil.usb.handle import EventPump, UsbHandle, UsbSyncIO, UsbTransfer
from tinyhil.usb.state import TransportState, requires_open
from tinyhil.usb.transfer_pool import TransferPool
from tinyhil.usb.transport import Usb3Transport

__all__ = [
    "MAX_TIMEOUT_MS",
    "NO_BRIDGE_REASON",
    "AsyncBridgeIO",
    "BridgeIO",
    "BridgeInfo",
    "BridgeUnavailable",
    "EventPump",
    "ShortTransfer",
    "TransferPool",
    "TransportState",
    "Usb3Transport",
    "UsbHandle",
    "UsbSyncIO",
    "UsbTransfer",
    "check_timeout_ms",
    "list_bridges",
    "open_usb3",
    "probe_usb3",
    "requires_open",
]
