"""The emulators served through the operating system's own interfaces, for drivers that never import tinyhil.

- :mod:`tinyhil.mocks.serve.usb`: the emulated ASM2464 as a USB device every libusb process sees (umockdev).
- :mod:`tinyhil.mocks.serve.kfd`: MOCKKFD as ``/dev/kfd``, the render nodes and KFD sysfs (an ``LD_PRELOAD``
  interposer).

docs/serve.md describes both and what a client can observe that differs from a board.
"""

from __future__ import annotations

__all__: list[str] = []
