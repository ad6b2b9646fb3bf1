"""The real file-I/O seam: ``os.open``, ``fcntl.ioctl`` and ``mmap(2)`` on this machine."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
from typing import Final

from tinyhil._check import check_int
from tinyhil.fileio.buffers import MappedBuffer
from tinyhil.fileio.protocol import IoctlArg

__all__ = ["RealFileIO"]

_MAP_FAILED: Final = ctypes.c_void_p(-1).value
_OFF_T_SIGN: Final = 1 << 63


class RealFileIO:
    """The operating system, through the :class:`~tinyhil.fileio.FileIO` seam.

    ``mmap`` calls libc's ``mmap`` directly because amdkfd's mmap offsets use bits 62-63 (doorbells, events), which
    Python's :mod:`mmap` rejects as negative ``off_t`` values; the result is a :class:`MappedBuffer` that
    ``munmap``\\ s on :meth:`munmap`.
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

    def open(self, path: str, flags: int) -> int:
        return os.open(path, flags | os.O_CLOEXEC)

    def close(self, fd: int) -> None:
        os.close(fd)

    def ioctl(self, fd: int, request: int, buf: IoctlArg) -> int:
        return int(fcntl.ioctl(fd, request, buf, True))

    def mmap(self, fd: int, length: int, offset: int) -> MappedBuffer:
        check_int("length", length, min_value=1)
        check_int("offset", offset, min_value=0, max_value=(1 << 64) - 1)
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
        buf.release()

    def read(self, path: str) -> bytes:
        with open(path, "rb") as file:
            return file.read()

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def exists(self, path: str) -> bool:
        return os.path.exists(path)
