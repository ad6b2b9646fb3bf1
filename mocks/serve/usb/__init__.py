"""``tinyhil serve usb``: the emulated ASM2464 served to every libusb process through umockdev (docs/serve.md)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["serve_usb"]


def serve_usb(target: str, options: Sequence[str], command: Sequence[str]) -> int:
    """Run ``command`` with the emulated board ``target`` (``options``: ``KEY=VALUE`` target options) visible to
    libusb; returns the command's exit status."""
    raise NotImplementedError("tinyhil serve usb is not built yet")
