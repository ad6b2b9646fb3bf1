"""A first-fit range allocator for device address spaces (bookkeeping only; it owns no memory)."""

from __future__ import annotations

import bisect

from tinyhil._check import check_int
from tinyhil.align import round_up
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import PAGE_BYTES

__all__ = ["OutOfMemory", "RangeAllocator"]


class OutOfMemory(InvalidArgument, MemoryError):
    """No free range of the requested size is left in the address space."""


class RangeAllocator:
    """Hands out aligned, non-overlapping ``[addr, addr + size)`` ranges inside ``[base, base + size_bytes)``.

    Zero-byte allocations take one alignment unit so every live allocation has a distinct address.
    """

    def __init__(self, base: int, size_bytes: int, alignment: int = PAGE_BYTES) -> None:
        check_int("alignment", alignment, min_value=1)
        if alignment & (alignment - 1):
            raise InvalidArgument(f"alignment={alignment:#x}, expected a power of two")
        self.base = check_int("base", base, min_value=0)
        self.size_bytes = check_int("size_bytes", size_bytes, min_value=0)
        self.alignment = alignment
        self._starts: list[int] = []  # sorted start addresses of live allocations
        self._addr2size: dict[int, int] = {}

    def _rounded(self, nbytes: int) -> int:
        return max(self.alignment, round_up(nbytes, self.alignment))

    def alloc(self, nbytes: int) -> int:
        """Reserve ``nbytes`` (rounded up to the alignment) and return the start address.

        Raises:
            OutOfMemory: no gap is large enough.
        """
        check_int("nbytes", nbytes, min_value=0)
        need = self._rounded(nbytes)
        cursor = self.base
        for index, start in enumerate(self._starts):
            if start - cursor >= need:
                return self._take(index, cursor, need)
            cursor = start + self._addr2size[start]
        if self.base + self.size_bytes - cursor >= need:
            return self._take(len(self._starts), cursor, need)
        raise OutOfMemory(
            f"cannot allocate {nbytes:#x} bytes: address space {self.base:#x}+{self.size_bytes:#x} has "
            f"{self.free_bytes:#x} bytes free in {len(self._starts) + 1} or fewer gaps"
        )

    def _take(self, index: int, addr: int, size: int) -> int:
        self._starts.insert(index, addr)
        self._addr2size[addr] = size
        return addr

    def free(self, addr: int) -> None:
        """Release the allocation that starts at ``addr``.

        Raises:
            InvalidArgument: ``addr`` is not the start of a live allocation (double free or a wrong address).
        """
        if addr not in self._addr2size:
            raise InvalidArgument(f"free of {addr:#x}, which is not the start of a live allocation")
        del self._addr2size[addr]
        self._starts.pop(bisect.bisect_left(self._starts, addr))

    def find(self, addr: int) -> tuple[int, int] | None:
        """Return ``(start, reserved_size)`` of the live allocation containing ``addr``, or ``None``."""
        index = bisect.bisect_right(self._starts, addr) - 1
        if index < 0:
            return None
        start = self._starts[index]
        size = self._addr2size[start]
        return (start, size) if addr < start + size else None

    @property
    def used_bytes(self) -> int:
        return sum(self._addr2size.values())

    @property
    def free_bytes(self) -> int:
        return self.size_bytes - self.used_bytes

    def __len__(self) -> int:
        return len(self._starts)
