"""The AMD GPU behind a USB bridge, host side: the copyin/copyout protocol (docs/copyin.md).

- :mod:`tinyhil.usbgpu.copy`: ``UsbCopy`` (three protocol revisions, copyout), ``CopyRevision``, ``DrainError``,
  ``chunk_plans``.
- :mod:`tinyhil.usbgpu.program`: the SDMA program of a copyin, stamped from packet-builder templates.
- :mod:`tinyhil.usbgpu.usb_gpu`: ``UsbGpu``, the protocol of what the copy protocol needs of the GPU driver.
- :mod:`tinyhil.usbgpu.gfx1100_gpu`: ``Gfx1100UsbGpu`` and ``open_usb_gpu``, the gfx1100 driver (docs/gfx1100.md),
  built from the IP blocks of :mod:`tinyhil.usbgpu.gfx1100` (SOC, GMC, IH, PSP, SMU, MEC, SDMA, in boot order).
- :mod:`tinyhil.usbgpu.over_usb`: ``UsbAmdDevice``, the device runtime of ``MOCKUSB+AMD`` and ``USB+AMD``.
"""

from __future__ import annotations

from tinyhil.usbgpu.copy import CopyRevision, DrainError, UsbCopy, chunk_plans
from tinyhil.usbgpu.over_usb import USB_AMD_CAPABILITIES, USB_CAPABILITIES, UsbAmdDevice
from tinyhil.usbgpu.program import ChunkPlan, chunk_packets, copyin_program
from tinyhil.usbgpu.usb_gpu import UsbGpu

__all__ = [
    "USB_AMD_CAPABILITIES",
    "USB_CAPABILITIES",
    "ChunkPlan",
    "CopyRevision",
    "DrainError",
    "UsbAmdDevice",
    "UsbCopy",
    "UsbGpu",
    "chunk_packets",
    "chunk_plans",
    "copyin_program",
]
