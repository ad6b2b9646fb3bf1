"""The file-I/O seam: how a KFD client reaches ``/dev/kfd``, the DRM render nodes and sysfs.

One real implementation (:class:`tinyhil.fileio.RealFileIO`: ``os``, ``fcntl.ioctl``, ``mmap(2)``) and any number of
emulated ones (MOCKKFD's virtual ``/dev/kfd``). Errors cross this seam as :class:`OSError` carrying the errno the
Linux kernel would return (``FileNotFoundError`` for a missing path, ``EINVAL``, ``ENOTTY``, ``EFAULT``, ...). The
only other exceptions are those Python's own calls raise before any system call, for an argument of the wrong
type: ``TypeError`` for an ``fd``, ``request``, ``length``, ``offset`` or ``flags`` that is not an int, a path that
is not a str, bytes or os.PathLike, or ``munmap`` of something ``mmap`` did not return, and ``ValueError`` for a
path with a NUL byte. :mod:`tinyhil.fileio.arguments` holds these rules, and every implementation applies them.
"""

from __future__ import annotations

import ctypes
from typing import Protocol, TypeAlias, runtime_checkable

from tinyhil.fileio.buffers import MappedBuffer

__all__ = ["FileIO", "IoctlArg"]

# What ioctl fills in place: a ctypes structure (or array), or a bytearray holding the argument bytes.
IoctlArg: TypeAlias = ctypes.Structure | ctypes.Union | ctypes.Array[ctypes.c_char] | bytearray


@runtime_checkable
class FileIO(Protocol):
    """File descriptors, ioctls, mmaps and path reads, the subset of the OS a KFD client uses."""

    def open(self, path: str, flags: int) -> int:
        """Open ``path`` with ``os.O_*`` ``flags``; return a file descriptor.

        Raises:
            FileNotFoundError: no such file (``open("/dev/kfd")`` on a machine without amdkfd).
        """
        ...

    def close(self, fd: int) -> None:
        """Close ``fd``. Mappings made from it stay valid until :meth:`munmap` (as with ``close(2)``)."""
        ...

    def ioctl(self, fd: int, request: int, buf: IoctlArg) -> int:
        """Issue ``request`` on ``fd`` with the argument bytes of ``buf``, which the call fills in place.

        ``request`` reaches the kernel as its 32-bit ``unsigned int cmd``. ``buf`` is the user memory the kernel
        copies from and to (:func:`~tinyhil.fileio.arguments.user_memory`): a copy the request encodes past its
        end, into a read-only one, or from something that is no buffer (``None``) faults with ``EFAULT``.

        Returns the ioctl's non-negative result. Raises:
            OSError: with the kernel's errno; output fields the kernel copies back even on failure (``n_success``,
                ``wait_result``) are filled before the error is raised.
        """
        ...

    def mmap(self, fd: int, length: int, offset: int) -> MappedBuffer:
        """Map ``length`` bytes of ``fd`` at byte ``offset`` (page aligned; may exceed 2**63) shared, read-write.

        The result supports slice reads and writes (``buf[a:b] = data``, indexed as :class:`mmap.mmap` is) and the
        buffer protocol. Raises:
            OSError: ``EINVAL`` for a length below 1 or an offset that is not a page-aligned 64-bit value, ``EBADF``
                for a descriptor that is not open, or what the kernel (or the driver) answers.
        """
        ...

    def munmap(self, buf: MappedBuffer) -> None:
        """Unmap a buffer :meth:`mmap` returned; using it afterwards raises ``ValueError``."""
        ...

    def read(self, path: str) -> bytes:
        """The whole content of the file at ``path`` (sysfs attributes are short text files)."""
        ...

    def listdir(self, path: str) -> list[str]:
        """The names in directory ``path``, sorted."""
        ...

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists."""
        ...
