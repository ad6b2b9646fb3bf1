"""Host memory that two processes map: each allocation is a memfd, mapped here and passed to the client.

:meth:`SharedMemory.allocate` is MOCKKFD's :data:`~tinyhil.mocks.kfd.state.HostMemory` in ``tinyhil serve kfd``: GTT
buffers, doorbell frames, MMIO remap and signal pages and each GPU's VRAM live in memfds. :meth:`SharedMemory.locate`
turns the address of a view MOCKKFD hands out (a buffer object, a doorbell frame) into the memfd and offset the client
maps, so MOCKKFD's own mmap rules pick the memory and the server only translates.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import threading
import weakref
from typing import Final

__all__ = ["SharedMemory", "address_of"]

_NAME: Final = "tinyhil-kfd"


def address_of(buffer: mmap.mmap | memoryview) -> int:
    """The host address of byte 0 of a writable buffer."""
    return ctypes.addressof(ctypes.c_char.from_buffer(buffer))


class SharedMemory:
    """memfd-backed mappings, by host address; a mapping's memfd closes when the mapping is collected."""

    def __init__(self) -> None:
        self._regions: dict[int, tuple[int, int]] = {}  # host address -> (bytes, memfd)
        self._lock = threading.Lock()

    def allocate(self, nbytes: int) -> mmap.mmap:
        """``nbytes`` of zeroed shared memory (a fresh memfd, mapped ``MAP_SHARED``).

        Raises:
            OSError: the memfd or the mapping could not be made (``ENOMEM``, ``EMFILE``).
        """
        fd = os.memfd_create(_NAME, os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, nbytes)
            mapping = mmap.mmap(fd, nbytes, mmap.MAP_SHARED)
        except BaseException:
            os.close(fd)
            raise
        address = address_of(mapping)
        with self._lock:
            self._regions[address] = (nbytes, fd)
        weakref.finalize(mapping, self._forget, address, fd)
        return mapping

    def _forget(self, address: int, fd: int) -> None:
        with self._lock:
            if self._regions.get(address, (0, -1))[1] != fd:
                return  # closed by close() already
            del self._regions[address]
        os.close(fd)

    def locate(self, address: int, nbytes: int) -> tuple[int, int]:
        """The memfd and offset of ``[address, address + nbytes)``, which must lie inside one allocation.

        Raises:
            OSError: ``ENODEV``, the range is not shared memory (the client cannot map it).
        """
        with self._lock:
            for start, (size, fd) in self._regions.items():
                if start <= address and address + nbytes <= start + size:
                    return fd, address - start
        raise OSError(errno.ENODEV, f"host memory {address:#x}+{nbytes:#x} is not shared with the client")

    def close(self) -> None:
        """Close every memfd still open (the mappings stay valid until collected)."""
        with self._lock:
            regions, self._regions = self._regions, {}
        for _, fd in regions.values():
            os.close(fd)
