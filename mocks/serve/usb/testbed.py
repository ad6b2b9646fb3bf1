"""umockdev's testbed with the served device in it, and the processes that run under its preload.

The testbed (``UMockdev.Testbed``, through GObject introspection) holds the device's sysfs entry and its node
``/dev/bus/usb/BBB/DDD``; an ``UMockdev.IoctlBase`` subclass attached to that node hands each ``ioctl`` to the
:class:`~tinyhil.mocks.serve.usb.server.UsbdevfsServer` in this process. A command runs under umockdev's preload
(``umockdev-wrapper`` sets ``LD_PRELOAD=libumockdev-preload.so.0``) with ``UMOCKDEV_DIR`` naming the testbed, so
its libusb finds the device in the fake sysfs and its ioctls reach the server over umockdev's socket.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Final

from tinyhil.errors import TinyHilError
from tinyhil.mocks.serve.command import run_command
from tinyhil.mocks.serve.usb.board import ServedBoard
from tinyhil.mocks.serve.usb.descriptors import DescriptorSet, describe_board
from tinyhil.mocks.serve.usb.recording import ServedRecording
from tinyhil.mocks.serve.usb.server import UsbdevfsServer

__all__ = ["UMOCKDEV_PACKAGES", "UMOCKDEV_WRAPPER", "ServeUnavailable", "UsbTestbed", "umockdev_unavailable_reason"]

UMOCKDEV_WRAPPER: Final = "umockdev-wrapper"
# What `tinyhil serve usb` needs, by the Debian package that has it.
UMOCKDEV_PACKAGES: Final = {
    "umockdev": "umockdev-wrapper and libumockdev-preload.so.0",
    "gir1.2-umockdev-1.0": "the UMockdev typelib (GObject introspection data)",
}
_PYGOBJECT: Final = "Python's gi module (PyGObject) in tinyhil's own environment"
_PYGOBJECT_FIX: Final = (
    "pip install 'tinyhil[serve]', which builds it against the Debian packages libgirepository1.0-dev and "
    "libcairo2-dev (Debian's python3-gi serves only the system Python)"
)


class ServeUnavailable(TinyHilError, RuntimeError):
    """``tinyhil serve`` cannot run here: a tool is missing; ``package`` names the Debian package that has it."""

    def __init__(self, what: str, package: str, fix: str | None = None) -> None:
        super().__init__(f"tinyhil serve usb needs {what}: {fix or f'install the Debian package {package}'}")
        self.package = package


def _umockdev() -> ModuleType:
    """The ``UMockdev`` introspection module.

    Raises:
        ServeUnavailable: PyGObject, the typelib or the preload wrapper is missing (the package is named).
    """
    if shutil.which(UMOCKDEV_WRAPPER) is None:
        raise ServeUnavailable(UMOCKDEV_PACKAGES["umockdev"], "umockdev")
    try:
        import gi  # type: ignore[import-untyped,import-not-found,unused-ignore]  # PyGObject ships no stubs
    except ImportError:
        raise ServeUnavailable(_PYGOBJECT, "libgirepository1.0-dev", _PYGOBJECT_FIX) from None
    try:
        gi.require_version("UMockdev", "1.0")
        from gi.repository import UMockdev  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except (ValueError, ImportError):
        raise ServeUnavailable(UMOCKDEV_PACKAGES["gir1.2-umockdev-1.0"], "gir1.2-umockdev-1.0") from None
    module: ModuleType = UMockdev
    return module


def umockdev_unavailable_reason() -> str | None:
    """``None`` when ``tinyhil serve usb`` can run here, else the one-line reason naming the package."""
    try:
        _umockdev()
    except ServeUnavailable as exc:
        return str(exc)
    return None


_handler_classes: dict[int, type[Any]] = {}


def _handler_class(umockdev: ModuleType) -> type[Any]:
    """The ``UMockdev.IoctlBase`` subclass that hands requests to a server (one GObject type per process)."""
    cached = _handler_classes.get(id(umockdev))
    if cached is not None:
        return cached

    class _UsbdevfsHandler(umockdev.IoctlBase):  # type: ignore[misc,name-defined]
        """umockdev's ioctl handler for the device node, delegating to :class:`UsbdevfsServer`."""

        def __init__(self, server: UsbdevfsServer) -> None:
            super().__init__()
            self.server = server

        def do_handle_ioctl(self, client: Any) -> bool:
            self.server.handle(client)
            return True

    _handler_classes[id(umockdev)] = _UsbdevfsHandler
    return _UsbdevfsHandler


class UsbTestbed:
    """A umockdev testbed serving ``board``: build it, run commands under it (:meth:`run`, :meth:`env`), close it.

    Raises:
        ServeUnavailable: umockdev, its typelib or PyGObject is missing (on construction).
    """

    def __init__(self, board: ServedBoard) -> None:
        umockdev = _umockdev()
        self.board = board
        self.descriptors: DescriptorSet = describe_board(board.bridge, board.target)
        self.recording: ServedRecording | None = None
        if board.record is not None:
            self.recording = ServedRecording(board.record, board.bridge, board.target, board.options,
                                             self.descriptors.device)  # fmt: skip
        self.server = UsbdevfsServer(board, self.descriptors, self.recording)
        self._testbed = umockdev.Testbed.new()
        self._testbed.add_from_string(self.descriptors.description)
        sysfs_path = self.descriptors.sysfs_path
        for name, text in self.descriptors.string_attributes().items():
            # the kernel ends a sysfs string attribute with a newline, and readers (lsusb) strip the last byte
            self._testbed.set_attribute(sysfs_path, name, text + "\n")
        self._handler = _handler_class(umockdev)(self.server)
        self._testbed.attach_ioctl(self.descriptors.devnode, self._handler)
        self.root = str(self._testbed.get_root_dir())

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a command needs to see the device (``UMOCKDEV_DIR``), over ``base`` (default ours)."""
        return {**(os.environ if base is None else base), "UMOCKDEV_DIR": self.root}

    def argv(self, command: Sequence[str]) -> list[str]:
        """``command`` under umockdev's preload."""
        return [UMOCKDEV_WRAPPER, *command]

    def run(self, command: Sequence[str], **popen: Any) -> int:
        """Run ``command`` under the preload until it exits, as :func:`~tinyhil.mocks.serve.command.run_command` runs
        it; its exit status (128 + N when killed by signal N)."""
        return run_command(self.argv(command), self.env(popen.pop("env", None)), **popen)

    def close(self) -> None:
        """Detach the handler, remove the testbed's directory and write the recording (``record=``), if any; closing
        twice does nothing."""
        if self._testbed is None:
            return
        self._testbed.detach_ioctl(self.descriptors.devnode)
        self._testbed = None
        shutil.rmtree(self.root, ignore_errors=True)
        if self.recording is not None:
            self.recording.save()

    def __enter__(self) -> UsbTestbed:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
