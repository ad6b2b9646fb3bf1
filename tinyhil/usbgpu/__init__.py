"""The AMD GPU behind a USB bridge, host side: the copyin/copyout protocol (spec/copyin.md).

- :mod:`tinyhil.usbgpu.copy`: ``UsbCopy`` (three protocol revisions, copyout), ``CopyRevision``, ``DrainError``.
- :mod:`tinyhil.usbgpu.program`: the SDMA program of a copyin, stamped from packet-builder templates.
- :mod:`tinyhil.usbgpu.runtime`: ``UsbAmdDevice``, the device runtime of ``MOCKUSB+AMD`` and ``USB+AMD``.
"""

from __future__ import annotations

from tinyhil.usbgpu.copy import CopyRevision, DrainError, UsbCopy
from tinyhil.usbgpu.program import ChunkPlan, chunk_packets, copyin_program
from tinyhil.usbgpu.runtime import USB_CAPABILITIES, UsbAmdDevice

__all__ = [
    "USB_CAPABILITIES",
    "ChunkPlan",
    "CopyRevision",
    "DrainError",
    "UsbAmdDevice",
    "UsbCopy",
    "chunk_packets",
    "copyin_program",
]
