"""The emulators served through the operating system's own interfaces, for drivers that never import tinyhil.

- :mod:`tinyhil.mocks.serve.usb`: the emulated ASM2464 as a USB device every libusb process sees (umockdev).
- :mod:`tinyhil.mocks.serve.kfd`: MOCKKFD as ``/dev/kfd``, the render nodes and KFD sysfs (an ``LD_PRELOAD``
  interposer).
- :mod:`tinyhil.mocks.serve.command`: the served command, run as a wrapper runs it (descriptors, signals).
- :mod:`tinyhil.mocks.serve.options`: the `--option KEY=VALUE` strings both paths read.

docs/serve.md describes both and what a client can observe that differs from a board.
"""

from __future__ import annotations

from tinyhil.mocks.serve.command import FORWARDED_SIGNALS, run_command

__all__ = ["FORWARDED_SIGNALS", "run_command"]
