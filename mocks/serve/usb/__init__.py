"""``tinyhil serve usb``: the emulated ASM2464 served to every libusb process through umockdev (docs/serve.md).

- :mod:`~tinyhil.mocks.serve.usb.board`: the target string and ``--option KEY=VALUE`` options, as a fresh board.
- :mod:`~tinyhil.mocks.serve.usb.descriptors`: the device's sysfs entry and its GET_DESCRIPTOR answers.
- :mod:`~tinyhil.mocks.serve.usb.usbdevfs`: the usbdevfs ABI and the one errno table of emulator outcomes.
- :mod:`~tinyhil.mocks.serve.usb.server`: the usbdevfs requests, answered by the emulated board.
- :mod:`~tinyhil.mocks.serve.usb.testbed`: umockdev's testbed and the processes run under its preload.
"""

from __future__ import annotations

from collections.abc import Sequence

from tinyhil.mocks.serve.usb.board import ServedBoard, served_board
from tinyhil.mocks.serve.usb.server import UsbdevfsServer
from tinyhil.mocks.serve.usb.testbed import ServeUnavailable, UsbTestbed, umockdev_unavailable_reason
from tinyhil.registry import TargetRegistry

__all__ = [
    "ServeUnavailable",
    "ServedBoard",
    "UsbTestbed",
    "UsbdevfsServer",
    "serve_usb",
    "served_board",
    "umockdev_unavailable_reason",
]


def serve_usb(
    target: str, options: Sequence[str], command: Sequence[str], registry: TargetRegistry | None = None
) -> int:
    """Run ``command`` with the emulated board ``target`` (``options``: ``KEY=VALUE`` board options, ``registry``
    resolves the target: default the installation's) visible to libusb; returns the command's exit status.

    Raises:
        InvalidArgument: a bad target or option; ServeUnavailable: umockdev or PyGObject is missing (named).
    """
    board = served_board(target, options, registry)
    with UsbTestbed(board) as testbed:
        return testbed.run(command)
