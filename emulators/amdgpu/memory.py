"""GPU memory: lazily committed VRAM, page-granular VA mappings, the system aperture, one translation function."""

from __future__ import annotations

import bisect
import mmap
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np

from tinyhil._check import as_readonly_bytes, check_int
from tinyhil.errors import InvalidArgument, TinyHilError
from tinyhil.spec.amdgpu import GPU_VA_LIMIT, PAGE_BYTES, SYS_APERTURE, SYS_APERTURE_END

from .errors import GpuMemoryFault
from .system_bus import SystemBus

__all__ = ["GpuMemory", "HostSpan", "Mapping"]

# Linux MAP_NORESERVE (Python 3.11's mmap module lacks the name): VRAM larger than RAM + swap still maps.
_MAP_NORESERVE: Final = 0x4000 if sys.platform.startswith("linux") else 0
# Exceptions a SystemBus raises for an address with nothing behind it; the GPU turns them into memory faults.
_BUS_ERRORS: Final = (TinyHilError, ValueError, LookupError)


_VIEW_CACHE_ENTRIES: Final = 1024  # rings and pointers of every queue, with room to spare


@dataclass(frozen=True, slots=True, eq=False)
class Mapping:
    """``backing`` (flat writable bytes) seen by the GPU at ``va``; ``host_address`` is its first byte's address."""

    va: int
    backing: memoryview
    host_address: int

    @property
    def nbytes(self) -> int:
        return self.backing.nbytes

    @property
    def end(self) -> int:
        return self.va + self.backing.nbytes


@dataclass(frozen=True, slots=True)
class HostSpan:
    """A GPU address translated for host code: ``address`` is ``va`` in host memory, valid for ``nbytes``."""

    va: int
    address: int
    nbytes: int


# One piece of a translated range: its GPU address and either a live view of the backing or None (system bus).
_Segment = tuple[int, memoryview | None]


class GpuMemory:
    """The GPU's address space. Every engine access goes through :meth:`translate`.

    | GPU address range | what | spec/amdgpu.md |
    |---|---|---|
    | ``0 .. vram_bytes`` | VRAM itself, when ``vram_at_zero`` | Memory |
    | mapped ranges | ``map`` backings: VRAM slices, GTT / userptr host buffers (the KFD path) | Memory |
    | ``SYS_APERTURE + pcie_addr`` | PCIe memory through ``system_bus``, when one is given | Memory |
    | anything else | :class:`GpuMemoryFault`: never a host crash, never a write to random host memory | Memory |

    The system aperture is this flat model's way to reach memory outside VRAM (the engine tests give it a bus
    standing in for the bridge's SRAM); the gfx1100 front end replaces the whole address space with its page
    tables (:class:`~tinyhil.emulators.amdgpu.gfx1100.gmc.PagedMemory`), whose system-bit PTEs reach the bridge.

    VRAM is an anonymous private mapping: untouched pages cost no RAM, and :meth:`reset` returns them to the OS.
    ``on_write(va, nbytes)`` is called after every write through this object (engine or host), so waiters wake.
    """

    def __init__(self, vram_bytes: int, *, system_bus: SystemBus | None = None, vram_at_zero: bool = True) -> None:
        check_int("vram_bytes", vram_bytes, min_value=1 << 20)
        if vram_bytes % (1 << 20):
            raise InvalidArgument(f"vram_bytes={vram_bytes:#x}, expected a whole number of MB")
        if vram_at_zero and vram_bytes > SYS_APERTURE:
            raise InvalidArgument(f"vram_bytes={vram_bytes:#x}, expected at most {SYS_APERTURE:#x}")
        self.vram_bytes = vram_bytes
        self.system_bus = system_bus
        self.vram_at_zero = vram_at_zero
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE
        self._vram_map = mmap.mmap(-1, vram_bytes, flags=flags)
        self.vram = memoryview(self._vram_map)
        self.on_write: Callable[[int, int], None] | None = None
        self.generation = 0  # bumped whenever the mappings change: views taken earlier may be stale
        self.reset()

    def reset(self) -> None:
        """Zero VRAM (lazily: the pages go back to the OS) and restore the power-on mappings."""
        if sys.platform.startswith("linux"):
            self._vram_map.madvise(mmap.MADV_DONTNEED)
        else:
            np.frombuffer(self.vram, np.uint8).fill(0)
        self._starts: list[int] = []
        self._mappings: list[Mapping] = []
        self._last: tuple[int, int, memoryview] = (0, 0, self.vram[:0])  # (va, end, backing) of the last hit
        self._views: dict[tuple[int, int, str], np.ndarray | None] = {}
        self.generation += 1
        if self.vram_at_zero:
            self.map(0, self.vram)

    @property
    def mappings(self) -> tuple[Mapping, ...]:
        return tuple(self._mappings)

    @property
    def aperture_active(self) -> bool:
        """The system aperture exists only when a system bus is attached."""
        return self.system_bus is not None

    # --- mapping management ---
    def map(self, va: int, backing: memoryview) -> Mapping:
        """Make ``backing`` visible to the GPU at ``va``.

        Raises:
            InvalidArgument: ``va`` or the size is not page aligned, the range is empty, leaves the 48-bit VA space,
                overlaps the system aperture or an existing mapping, or ``backing`` is not writable contiguous bytes;
                nothing changes.
        """
        check_int("va", va, min_value=0)
        view = as_readonly_bytes("backing", backing)
        if view.readonly:
            raise InvalidArgument("backing is read-only, expected writable memory (a VRAM slice or host buffer)")
        nbytes = view.nbytes
        if va % PAGE_BYTES or nbytes % PAGE_BYTES or not nbytes:
            raise InvalidArgument(
                f"mapping {va:#x}+{nbytes:#x}, expected a non-empty range of whole {PAGE_BYTES} B pages"
            )
        if va + nbytes > GPU_VA_LIMIT:
            raise InvalidArgument(f"mapping {va:#x}+{nbytes:#x} ends past the GPU VA limit {GPU_VA_LIMIT:#x}")
        if self.aperture_active and va < SYS_APERTURE_END and va + nbytes > SYS_APERTURE:
            raise InvalidArgument(f"mapping {va:#x}+{nbytes:#x} overlaps the system aperture at {SYS_APERTURE:#x}")
        index = bisect.bisect_right(self._starts, va)
        neighbours = self._mappings[max(index - 1, 0) : index + 1]
        for other in neighbours:
            if va < other.end and other.va < va + nbytes:
                raise InvalidArgument(
                    f"mapping {va:#x}+{nbytes:#x} overlaps the mapping {other.va:#x}+{other.nbytes:#x}; unmap it first"
                )
        mapping = Mapping(va, view, int(np.frombuffer(view, np.uint8).ctypes.data))
        self._starts.insert(index, va)
        self._mappings.insert(index, mapping)
        self._last = (0, 0, self.vram[:0])
        self._views.clear()
        self.generation += 1
        return mapping

    def unmap(self, va: int) -> None:
        """Remove the mapping that starts at ``va``.

        Raises:
            InvalidArgument: no mapping starts at ``va``.
        """
        index = bisect.bisect_left(self._starts, va)
        if index == len(self._starts) or self._starts[index] != va:
            raise InvalidArgument(f"va={va:#x}, expected the start of a mapping (mapped: {self._describe()})")
        del self._starts[index]
        del self._mappings[index]
        self._last = (0, 0, self.vram[:0])
        self._views.clear()
        self.generation += 1

    def _describe(self) -> str:
        return ", ".join(f"{m.va:#x}+{m.nbytes:#x}" for m in self._mappings) or "nothing"

    # --- the one translation function ---
    def in_system_aperture(self, va: int) -> bool:
        """Whether ``va`` is in the active system aperture (the bridge's memory, reached across PCIe)."""
        return self.system_bus is not None and SYS_APERTURE <= va < SYS_APERTURE_END

    def array(self, va: int, nbytes: int, dtype: str) -> np.ndarray | None:
        """A live numpy view of ``[va, va + nbytes)`` as ``dtype`` when the range lies in one mapping and is aligned
        to the item size, else ``None`` (use :meth:`read` / :meth:`write`). Cached until the mappings change: what
        the engines use for their rings and pointers. Writes through it notify nobody."""
        key = (va, nbytes, dtype)
        try:
            return self._views[key]
        except KeyError:
            pass
        view = None
        item = np.dtype(dtype).itemsize
        if nbytes > 0 and not va % item and not nbytes % item and not self.in_system_aperture(va):
            try:
                segments = self.translate(va, nbytes)
            except GpuMemoryFault:
                segments = []
            if len(segments) == 1 and segments[0][1] is not None:
                view = np.frombuffer(segments[0][1], dtype)
        if len(self._views) < _VIEW_CACHE_ENTRIES:
            self._views[key] = view
        return view

    def translate(self, va: int, nbytes: int) -> list[_Segment]:
        """Split ``[va, va + nbytes)`` into mapped pieces: live views of backings, or ``None`` for the system bus.

        Raises:
            GpuMemoryFault: some byte of the range has nothing behind it (``va`` of the fault is the first one).
        """
        if nbytes <= 0:
            return []
        end = va + nbytes
        first, last_end, backing = self._last
        if first <= va and end <= last_end:  # the mapping of the last translation: the common case, no search
            return [(va, backing[va - first : end - first])]
        if self.system_bus is not None and SYS_APERTURE <= va < SYS_APERTURE_END:
            if end > SYS_APERTURE_END:
                raise GpuMemoryFault(SYS_APERTURE_END, end - SYS_APERTURE_END)
            return [(va, None)]
        index = bisect.bisect_right(self._starts, va) - 1
        segments: list[_Segment] = []
        cursor = va
        while cursor < end:
            mapping = self._mappings[index] if 0 <= index < len(self._mappings) else None
            if mapping is None or not mapping.va <= cursor < mapping.end:
                raise GpuMemoryFault(cursor, end - cursor, f"no mapping (mapped: {self._describe()})")
            stop = min(end, mapping.end)
            segments.append((cursor, mapping.backing[cursor - mapping.va : stop - mapping.va]))
            self._last = (mapping.va, mapping.end, mapping.backing)
            cursor = stop
            index += 1
        return segments

    def host_span(self, va: int) -> HostSpan:
        """Translate a pointer for host code: the host address of ``va`` and the bytes left in its mapping.

        Raises:
            GpuMemoryFault: ``va`` is unmapped or in the system aperture (host code cannot reach the bridge).
        """
        if self.aperture_active and SYS_APERTURE <= va < SYS_APERTURE_END:
            raise GpuMemoryFault(va, 1, "kernels cannot access the system aperture")
        index = bisect.bisect_right(self._starts, va) - 1
        if index < 0 or va >= self._mappings[index].end:
            raise GpuMemoryFault(va, 1, f"pointer outside every mapping (mapped: {self._describe()})")
        mapping = self._mappings[index]
        return HostSpan(va, mapping.host_address + va - mapping.va, mapping.end - va)

    # --- access ---
    def _bus_read(self, va: int, nbytes: int) -> memoryview:
        """The system bus's bytes at ``va`` (a view where the bus gives one); also how a range is checked against
        the bus before anything the size of it is allocated (the bus validates before it copies)."""
        assert self.system_bus is not None  # translate returns bus segments only with a bus attached
        try:
            data = memoryview(self.system_bus.dma_read(va - SYS_APERTURE, nbytes)).cast("B")
        except _BUS_ERRORS as error:
            raise GpuMemoryFault(va, nbytes, f"system bus: {error}") from None
        if data.nbytes != nbytes:
            raise GpuMemoryFault(va, nbytes, f"system bus returned {data.nbytes} bytes, expected {nbytes}")
        return data

    def _bus_write(self, va: int, data: memoryview) -> None:
        assert self.system_bus is not None
        try:
            self.system_bus.dma_write(va - SYS_APERTURE, data)
        except _BUS_ERRORS as error:
            raise GpuMemoryFault(va, data.nbytes, f"system bus: {error}") from None

    def read(self, va: int, nbytes: int) -> memoryview:
        """The bytes at ``va``: a live view when they sit in one mapping, else a copy.

        Raises:
            GpuMemoryFault: part of the range is unmapped.
        """
        segments = self.translate(va, nbytes)
        if len(segments) == 1:
            start, view = segments[0]
            return self._bus_read(start, nbytes) if view is None else view
        # Only mappings split a range (the aperture is one segment), so every piece here is a view.
        return memoryview(b"".join(view for _, view in segments if view is not None))

    def _scatter(self, segments: list[_Segment], data: memoryview) -> None:
        offset = 0
        for start, view in segments:
            if view is None:
                self._bus_write(start, data[offset:])
                return
            view[:] = data[offset : offset + view.nbytes]
            offset += view.nbytes

    def notify_written(self, va: int, nbytes: int) -> None:
        """Report that ``[va, va + nbytes)`` changed behind this object's back (host mmap, kernel, bridge)."""
        if self.on_write is not None and nbytes:
            self.on_write(va, nbytes)

    def write(self, va: int, data: bytes | bytearray | memoryview | np.ndarray) -> None:
        """Write ``data`` at ``va`` (nothing is written if any byte of the range is unmapped).

        Raises:
            GpuMemoryFault: part of the range is unmapped.
        """
        view = memoryview(data) if type(data) is bytes else as_readonly_bytes("data", data)
        nbytes = view.nbytes
        self._store(va, view)
        if self.on_write is not None and nbytes:  # notify_written
            self.on_write(va, nbytes)

    def _store(self, va: int, view: memoryview) -> None:
        """Put ``view``'s bytes at ``va``, notifying nobody: what :meth:`write` and the engines' write-backs share
        (a subclass with another address space translates here, once per write)."""
        if self.system_bus is not None and SYS_APERTURE <= va < va + view.nbytes <= SYS_APERTURE_END:
            self._bus_write(va, view)  # fences and completion entries into the bridge's memory
        else:
            self._scatter(self.translate(va, view.nbytes), view)

    def copy(self, dst: int, src: int, nbytes: int) -> bool:
        """Copy like ``memmove``: overlapping ranges come out right; VRAM to VRAM is one slice assignment. Returns
        whether the copy starts on the system bus on either side (its rate is the bus's: ``GpuTiming``).

        Raises:
            GpuMemoryFault: part of either range is unmapped (then nothing is written).
        """
        sources = self.translate(src, nbytes)
        targets = self.translate(dst, nbytes)
        if not sources:
            return False
        if len(sources) > 1 and targets[0][1] is None:  # pieces joined for the system bus: check it has them first
            self._bus_read(dst, nbytes)
        if len(sources) == 1:
            start, view = sources[0]
            data = self._bus_read(start, nbytes) if view is None else view
            if view is not None and len(targets) > 1:
                data = memoryview(bytes(data))  # piecewise writes could overlap the live source: snapshot it
        else:
            data = memoryview(b"".join(view for _, view in sources if view is not None))
        # One target view: a single slice assignment, which memmoves when source and target overlap.
        target = targets[0][1] if len(targets) == 1 else None
        if target is not None:
            target[:] = data
        else:
            self._scatter(targets, data)
        if self.on_write is not None:  # notify_written (nbytes > 0 here)
            self.on_write(dst, nbytes)
        return sources[0][1] is None or targets[0][1] is None

    def fill(self, va: int, nbytes: int, value: int, *, dword: bool) -> None:
        """Fill with the byte ``value`` or (``dword``) the little-endian u32 ``value``.

        Raises:
            InvalidArgument: a dword fill of a range not dword aligned in address and size.
            GpuMemoryFault: part of the range is unmapped (then nothing is written).
        """
        if dword and (va % 4 or nbytes % 4):
            raise InvalidArgument(f"dword fill of {va:#x}+{nbytes:#x}, expected a dword-aligned address and size")
        dtype = np.dtype("<u4") if dword else np.dtype(np.uint8)
        for start, view in self.translate(va, nbytes):
            if view is None:
                # The pattern costs host memory in proportion to the size: the bus must have the range first.
                self._bus_read(start, va + nbytes - start)
                pattern = np.full((va + nbytes - start) // dtype.itemsize, value, dtype)
                self._bus_write(start, as_readonly_bytes("fill pattern", pattern))
            else:
                np.frombuffer(view, dtype).fill(value)
        self.notify_written(va, nbytes)

    def read_u32(self, va: int) -> int:
        if self.system_bus is not None and SYS_APERTURE <= va <= SYS_APERTURE_END - 4:
            return int.from_bytes(self._bus_read(va, 4), "little")  # polls of the bridge's memory
        return int.from_bytes(self.read(va, 4), "little")

    def read_u64(self, va: int) -> int:
        return int.from_bytes(self.read(va, 8), "little")

    def write_u32(self, va: int, value: int) -> None:
        self.write(va, (value & 0xFFFF_FFFF).to_bytes(4, "little"))

    def write_u64(self, va: int, value: int, *, notify: bool = True) -> None:
        """Write a u64; ``notify=False`` skips waking pollers (the engines' own pointer write-backs)."""
        data = memoryview((value & 0xFFFF_FFFF_FFFF_FFFF).to_bytes(8, "little"))
        if notify:
            self.write(va, data)
        else:
            self._store(va, data)
