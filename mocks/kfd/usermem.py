"""User memory as the kernel sees it: ``copy_from_user`` / ``copy_to_user`` on pointers a client passes in ioctls.

KFD arguments carry raw process addresses (``events_ptr``, ``device_ids_array_ptr``, a userptr allocation's CPU
address). The mock dereferences them with ctypes, after checking that the whole range lies in mappings of this
process with the needed permissions (``/proc/self/maps``), so a bad pointer gets ``EFAULT`` as from the kernel
instead of crashing the interpreter. The maps are cached and re-read on a miss. Where ``/proc/self/maps`` does not
exist (not Linux) pointers are trusted, as the kernel would trust nothing: run the fuzz tests on Linux.
"""

from __future__ import annotations

import bisect
import ctypes
import errno
from typing import Final

from tinyhil.mocks.kfd._errno import fail

__all__ = ["MAPS_PATH", "UserMemory"]

MAPS_PATH: Final = "/proc/self/maps"
_ADDRESS_LIMIT: Final = 1 << 64


class UserMemory:
    """Checked access to this process's memory at raw addresses."""

    def __init__(self, maps_path: str = MAPS_PATH) -> None:
        self.maps_path = maps_path
        self._starts: list[int] = []
        self._ranges: list[tuple[int, int, str]] = []
        self._available = True
        self._reload()

    def _reload(self) -> None:
        try:
            with open(self.maps_path) as maps:
                lines = maps.read().splitlines()
        except OSError:
            self._available = False
            return
        ranges = []
        for line in lines:
            span, perms = line.split()[:2]
            start, end = (int(part, 16) for part in span.split("-"))
            ranges.append((start, end, perms))
        ranges.sort()
        self._ranges = ranges
        self._starts = [start for start, _, _ in ranges]

    def _covered(self, address: int, nbytes: int, perms: str) -> bool:
        cursor, end = address, address + nbytes
        index = bisect.bisect_right(self._starts, cursor) - 1
        while cursor < end:
            if index < 0 or index >= len(self._ranges):
                return False
            start, stop, have = self._ranges[index]
            if not start <= cursor < stop or any(p not in have for p in perms):
                return False
            cursor, index = stop, index + 1
        return True

    def check(self, what: str, address: int, nbytes: int, *, writable: bool = False) -> None:
        """Fail with ``EFAULT`` unless ``[address, address + nbytes)`` is mapped readable (and writable).

        Raises:
            OSError: ``EFAULT`` naming ``what`` and the range.
        """
        if nbytes == 0:
            return
        if address <= 0 or address + nbytes > _ADDRESS_LIMIT:
            fail(errno.EFAULT, f"{what} {address:#x}+{nbytes:#x} is not a user address")
        if not self._available:
            return
        perms = "rw" if writable else "r"
        if not self._covered(address, nbytes, perms):
            self._reload()
            if not self._covered(address, nbytes, perms):
                access = "read-write" if writable else "readable"
                fail(errno.EFAULT, f"{what} {address:#x}+{nbytes:#x} is not {access} memory of this process")

    def read(self, what: str, address: int, nbytes: int) -> bytes:
        """``copy_from_user``: the bytes at ``address``."""
        self.check(what, address, nbytes)
        return ctypes.string_at(address, nbytes) if nbytes else b""

    def write(self, what: str, address: int, data: bytes) -> None:
        """``copy_to_user``: store ``data`` at ``address``."""
        self.check(what, address, len(data), writable=True)
        if data:
            ctypes.memmove(address, data, len(data))

    def view(self, what: str, address: int, nbytes: int) -> memoryview:
        """A writable view of ``nbytes`` at ``address`` (userptr memory the GPU maps), checked read-write."""
        self.check(what, address, nbytes, writable=True)
        return memoryview((ctypes.c_char * nbytes).from_address(address)).cast("B")
