"""The real file-I/O seam: ``os.open``, ``ioctl(2)`` and ``mmap(2)`` on this machine."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
from typing import Final

from tinyhil.align import round_up
from tinyhil.fileio.arguments import (
    as_int,
    check_fd,
    check_mapped_buffer,
    check_mmap,
    check_path,
    ioctl_request,
    seam_error,
    user_memory,
)
from tinyhil.fileio.buffers import MappedBuffer
from tinyhil.fileio.file_io import IoctlArg
from tinyhil.spec.linux_ioctl import ioc_size

__all__ = ["RealFileIO"]

_MAP_FAILED: Final = ctypes.c_void_p(-1).value
_OFF_T_SIGN: Final = 1 << 63
_PROT_NONE: Final = 0  # mmap.PROT_NONE exists only from Python 3.13


class RealFileIO:
    """The operating system, through the :class:`~tinyhil.fileio.FileIO` seam.

    Arguments are checked by the seam's shared rules (:mod:`tinyhil.fileio.arguments`), which every emulated seam
    applies too: ``TypeError`` for an argument that is not an int or a path, ``OSError`` with Linux's errno for
    the rest. ``mmap`` calls libc's ``mmap`` directly because amdkfd's mmap offsets use bits 62-63 (doorbells,
    events), which Python's :mod:`mmap` rejects as negative ``off_t`` values; the result is a :class:`MappedBuffer`
    that ``munmap``\\ s on :meth:`munmap`.

    ``ioctl`` passes a writable argument that holds the size the request encodes to ``fcntl.ioctl``, which fills it
    in place. Any other argument (shorter than that size, read-only, or no buffer at all) is user memory as
    :func:`~tinyhil.fileio.arguments.user_memory` defines it: the kernel gets a copy in a private mapping that ends
    at an unmapped guard page (read-only for a read-only argument), or a NULL pointer for no memory, so its own
    copies answer ``EFAULT`` exactly where the caller's memory ends, never reading or writing past it.
    """

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._mmap = libc.mmap
        self._mmap.restype = ctypes.c_void_p
        self._mmap.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int64,
        ]
        self._munmap = libc.munmap
        self._munmap.restype = ctypes.c_int
        self._munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self._mprotect = libc.mprotect
        self._mprotect.restype = ctypes.c_int
        self._mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self._ioctl = libc.ioctl
        self._ioctl.restype = ctypes.c_int
        self._ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]

    def open(self, path: str, flags: int) -> int:
        return os.open(check_path(path), as_int("flags", flags) | os.O_CLOEXEC)

    def close(self, fd: int) -> None:
        os.close(check_fd(as_int("fd", fd), "close"))

    def ioctl(self, fd: int, request: int, buf: IoctlArg) -> int:
        fd, request = as_int("fd", fd), ioctl_request(request)
        check_fd(fd, "ioctl")
        user = user_memory(buf)
        if not user.readonly and ioc_size(request) <= len(user):
            return int(fcntl.ioctl(fd, request, user, True))
        return self._ioctl_staged(fd, request, user)

    def _ioctl_staged(self, fd: int, request: int, user: memoryview) -> int:
        """The ioctl on a copy of ``user`` that ends at a guard page; copied back afterwards, even on failure."""
        nbytes = len(user)
        if not nbytes:
            return self._raw_ioctl(fd, request, None)
        page = mmap.PAGESIZE
        data_bytes = round_up(nbytes, page)
        total = data_bytes + page
        base = self._mmap(None, total, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        if base is None or base == _MAP_FAILED:
            code = ctypes.get_errno() or errno.ENOMEM
            seam_error(code, f"ioctl(request={request:#x}): no memory for a {nbytes:#x}-byte argument copy")
        try:
            start = base + data_bytes - nbytes
            ctypes.memmove(start, bytes(user), nbytes)
            self._mprotect(base + data_bytes, page, _PROT_NONE)
            if user.readonly:
                self._mprotect(base, data_bytes, mmap.PROT_READ)
            try:
                return self._raw_ioctl(fd, request, start)
            finally:
                if not user.readonly:
                    user[:] = ctypes.string_at(start, nbytes)
        finally:
            self._munmap(base, total)

    def _raw_ioctl(self, fd: int, request: int, address: int | None) -> int:
        result = int(self._ioctl(fd, request, address))
        if result < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"ioctl(fd={fd}, request={request:#x}): {os.strerror(code)}")
        return result

    def mmap(self, fd: int, length: int, offset: int) -> MappedBuffer:
        fd = as_int("fd", fd)
        length, offset = check_mmap("mmap", length, offset, mmap.PAGESIZE)
        check_fd(fd, "mmap")
        signed_offset = offset - (1 << 64) if offset >= _OFF_T_SIGN else offset
        prot = mmap.PROT_READ | mmap.PROT_WRITE
        address = self._mmap(None, length, prot, mmap.MAP_SHARED, fd, signed_offset)
        if address is None or address == _MAP_FAILED:
            code = ctypes.get_errno() or errno.EINVAL
            raise OSError(code, f"mmap(fd={fd}, length={length:#x}, offset={offset:#x}): {os.strerror(code)}")

        def unmap() -> None:
            self._munmap(address, length)

        return MappedBuffer.at_address(address, length, release=unmap)

    def munmap(self, buf: MappedBuffer) -> None:
        check_mapped_buffer(buf).release()

    def read(self, path: str) -> bytes:
        with open(check_path(path), "rb") as file:
            return file.read()

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(check_path(path)))

    def exists(self, path: str) -> bool:
        try:
            return os.path.exists(check_path(path))
        except ValueError:  # a NUL byte: no such file, as os.path.exists says
            return False
