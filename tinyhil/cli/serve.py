"""``tinyhil serve usb|kfd [--target T] [--option KEY=VALUE] -- COMMAND...``: run COMMAND, a driver that never
imports tinyhil, against an emulated board served through the operating system's own interfaces.

``serve usb`` presents the emulated ASM2464 as a USB device to every libusb process (umockdev's testbed and a
usbdevfs ioctl handler in this process); ``serve kfd`` presents MOCKKFD as ``/dev/kfd``, the render nodes and KFD
sysfs (an ``LD_PRELOAD`` interposer forwarding to this process). The exit status is COMMAND's own. docs/serve.md
says what each path serves and what a client can observe that differs from a board.
"""

from __future__ import annotations

import argparse
from typing import Any, Final

from tinyhil.cli.usage import EXIT_USAGE, add_command_group, add_subcommand, description
from tinyhil.registry import TargetRegistry

__all__ = ["add_serve_command"]

DEFAULT_USB_TARGET: Final = "MOCKUSB+AMD"
DEFAULT_KFD_TARGET: Final = "MOCKKFD+AMD"


def _serve_usb(args: argparse.Namespace, registry: TargetRegistry) -> int:
    from tinyhil.mocks.serve.usb import serve_usb

    return serve_usb(args.target, args.option or (), args.served_command, registry)


def _serve_kfd(args: argparse.Namespace, registry: TargetRegistry) -> int:
    from tinyhil.mocks.serve.kfd import serve_kfd

    return serve_kfd(args.target, args.option or (), args.served_command)


def _add_common(parser: Any, default_target: str) -> None:
    parser.add_argument("--target", default=default_target, metavar="T",
                        help=f"the emulated target to serve (default {default_target})")  # fmt: skip
    parser.add_argument("--option", action="append", metavar="KEY=VALUE",
                        help="a target option (fault plan, quirks, timing mode, VRAM size; repeatable)")  # fmt: skip
    parser.add_argument("served_command", nargs="+", metavar="-- COMMAND", help="the program to run and its arguments")


def add_serve_command(commands: Any) -> None:
    """Add ``serve usb`` and ``serve kfd`` to the ``tinyhil`` parser's subcommands."""
    serve = add_command_group(commands, "serve", "serve an emulated board to a driver that never imports tinyhil",
                              EXIT_USAGE, details=description(__doc__), dest="serve_command",
                              metavar="{usb,kfd}")  # fmt: skip
    usb = add_subcommand(serve, "usb", "run COMMAND with the emulated ASM2464 visible to libusb (umockdev)",
                         EXIT_USAGE)  # fmt: skip
    _add_common(usb, DEFAULT_USB_TARGET)
    usb.set_defaults(handler=_serve_usb)
    kfd = add_subcommand(serve, "kfd", "run COMMAND with MOCKKFD as its /dev/kfd (LD_PRELOAD interposer)", EXIT_USAGE)
    _add_common(kfd, DEFAULT_KFD_TARGET)
    kfd.set_defaults(handler=_serve_kfd)
