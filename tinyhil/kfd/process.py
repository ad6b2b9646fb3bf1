"""The process seam: what one GPU of a KFD process needs from the process that opened ``/dev/kfd``.

:class:`~tinyhil.kfd.gpu.KfdGpu` depends on this protocol, not on the client; :class:`~tinyhil.kfd.client.KFD`
satisfies it.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from tinyhil.allocator import RangeAllocator
from tinyhil.fileio import FileIO, IoctlArg
from tinyhil.spec.kfd_ioctls import KfdIoctl

__all__ = ["KfdProcess"]

_A = TypeVar("_A", bound=IoctlArg)


class KfdProcess(Protocol):
    """An open ``/dev/kfd``: its file descriptor and file-I/O seam, its GPU VA window, and its ioctls."""

    @property
    def fileio(self) -> FileIO:
        """The file-I/O seam the process opened ``/dev/kfd`` through (render nodes are opened through it too)."""
        ...

    @property
    def fd(self) -> int:
        """The ``/dev/kfd`` file descriptor (doorbells are mapped from it)."""
        ...

    @property
    def va_space(self) -> RangeAllocator:
        """The GPU VA window that VRAM and GTT buffers of every GPU of the process are placed in."""
        ...

    def ioctl(self, request: KfdIoctl, args: _A) -> _A:
        """Issue ``request`` on ``/dev/kfd``; ``args`` is filled in place and returned."""
        ...
