"""The GPU's address space: memory regions (VRAM, host buffers, the system bus) behind a pluggable translation.

As in QEMU's ``AddressSpace`` of ``MemoryRegion``s, one class performs every access and a translation says where
each GPU address lies. A translation turns a GPU range into *runs*: contiguous pieces, each a live view of a RAM
region (VRAM or a host buffer) or an address on the system bus (an I/O region). The translations are
:class:`~tinyhil.emulators.amdgpu.mappings.FlatTranslation` (a list of mappings and the model's system aperture)
and :class:`~tinyhil.emulators.amdgpu.gfx1100.gmc.PageTableTranslation` (the VMID 0 page-table walk of gfx1100).
"""

from __future__ import annotations

import mmap
import operator
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

import numpy as np

from tinyhil._check import as_readonly_bytes, check_int
from tinyhil.errors import InvalidArgument, TinyHilError

from .errors import GpuMemoryFault
from .system_bus import SystemBus

__all__ = ["AddressSpace", "HostSpan", "IoRegion", "Run", "Translation", "Vram"]

# Linux MAP_NORESERVE (Python 3.11's mmap module lacks the name): VRAM larger than RAM + swap still maps.
_MAP_NORESERVE: Final = 0x4000 if sys.platform.startswith("linux") else 0
_MADV_HUGEPAGE: Final[int | None] = getattr(mmap, "MADV_HUGEPAGE", None)  # Linux only
# What a SystemBus raises for an address with nothing behind it; the access becomes a memory fault.
_BUS_ERRORS: Final = (TinyHilError, ValueError, LookupError)
_VIEW_CACHE_ENTRIES: Final = 1024  # rings and pointers of every queue, with room to spare
# A fill of bus memory writes its pattern in pieces of at most this size (host memory bounded whatever the size).
_BUS_FILL_PIECE_BYTES: Final = 64 << 10
_U32: Final = np.dtype("<u4")
_U8: Final = np.dtype(np.uint8)

# One translated piece: (GPU address, bytes, a live view of a RAM region or None, system-bus address or -1).
Run = tuple[int, int, memoryview | None, int]


@dataclass(frozen=True, slots=True)
class HostSpan:
    """A GPU address translated for host code: ``address`` is ``va`` in host memory, valid for ``nbytes``."""

    va: int
    address: int
    nbytes: int


class Vram:
    """The GPU's VRAM, a RAM region: an anonymous private mapping, so untouched pages cost no RAM and
    :meth:`zero` gives them back to the OS. Where the OS has transparent huge pages, the mapping asks for them
    (as numpy does for its large arrays): docs/performance.md.

    ``backing``, when given, is the mapping to use instead (a shared one, which another process maps too: ``tinyhil
    serve kfd``); it must be ``nbytes`` long, and :meth:`zero` gives its pages back with ``MADV_REMOVE``.

    Raises:
        InvalidArgument: ``nbytes`` is not a whole number of MB (at least 1 MB), or ``backing`` is not that long.
    """

    def __init__(self, nbytes: int, backing: mmap.mmap | None = None) -> None:
        check_int("vram_bytes", nbytes, min_value=1 << 20)
        if nbytes % (1 << 20):
            raise InvalidArgument(f"vram_bytes={nbytes:#x}, expected a whole number of MB")
        if backing is not None and len(backing) != nbytes:
            raise InvalidArgument(f"backing of {len(backing):#x} bytes, expected vram_bytes={nbytes:#x}")
        self.nbytes = nbytes
        self.shared = backing is not None
        if backing is None:
            backing = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE)
            if _MADV_HUGEPAGE is not None:
                backing.madvise(_MADV_HUGEPAGE)
        self._map = backing
        self.view = memoryview(self._map)
        self.host_address = int(np.frombuffer(self.view, np.uint8).ctypes.data)

    def zero(self) -> None:
        if self.shared:  # MADV_DONTNEED keeps a shared mapping's contents; MADV_REMOVE frees them (reads give zeros)
            self._map.madvise(mmap.MADV_REMOVE)
        elif sys.platform.startswith("linux"):
            self._map.madvise(mmap.MADV_DONTNEED)
        else:
            np.frombuffer(self.view, np.uint8).fill(0)


class IoRegion:
    """Memory reached through a :class:`SystemBus` (the bridge's SRAM and windows, across PCIe): an I/O region
    that takes accesses of any size at any byte address. ``bus`` may be attached after construction; ``name``
    prefixes the faults. This is the one place a bus error becomes a :class:`GpuMemoryFault`."""

    def __init__(self, name: str, bus: SystemBus | None = None) -> None:
        self.name = name
        self.bus = bus

    def _unattached(self, va: int, nbytes: int, address: int, what: str) -> GpuMemoryFault:
        return GpuMemoryFault(va, nbytes, f"{what}{self.name} {address:#x} with no PCIe host attached")

    def read(self, va: int, address: int, nbytes: int, what: str = "") -> memoryview:
        """The bus's ``nbytes`` at ``address`` (a view where the bus gives one), for an access at GPU ``va``;
        ``what`` prefixes a fault's reason.

        Raises:
            GpuMemoryFault: nothing on the bus there, no bus attached, or the bus returned another size.
        """
        bus = self.bus
        if bus is None:
            raise self._unattached(va, nbytes, address, what)
        try:
            data = memoryview(bus.dma_read(address, nbytes)).cast("B")
        except _BUS_ERRORS as error:
            raise GpuMemoryFault(va, nbytes, f"{what}{self.name} {address:#x}: {error}") from None
        if data.nbytes != nbytes:
            raise GpuMemoryFault(va, nbytes, f"{self.name} {address:#x} returned {data.nbytes} bytes, not {nbytes}")
        return data

    def write(self, va: int, address: int, data: memoryview) -> None:
        """Write ``data`` at bus ``address`` for an access at GPU ``va``.

        Raises:
            GpuMemoryFault: nothing on the bus there, or no bus attached.
        """
        bus = self.bus
        if bus is None:
            raise self._unattached(va, data.nbytes, address, "")
        try:
            bus.dma_write(address, data)
        except _BUS_ERRORS as error:
            raise GpuMemoryFault(va, data.nbytes, f"{self.name} {address:#x}: {error}") from None


class Translation(Protocol):
    """Where each GPU address lies: the seam between :class:`AddressSpace` and a memory model.

    ``generation`` moves whenever a translation may have changed (a mapping, a TLB flush, a reset): runs and views
    taken earlier may be stale. A translation may cache the runs it returns until then.
    """

    generation: int

    def runs(self, va: int, nbytes: int) -> list[Run]:
        """``[va, va + nbytes)`` as contiguous runs in address order (``[]`` when ``nbytes`` is 0).

        Raises:
            GpuMemoryFault: some byte of the range has nothing behind it (``va`` of the fault is the first one).
        """
        ...

    def host_span(self, va: int) -> HostSpan:
        """The host address of ``va`` and the bytes contiguous in host memory from there (kernel pointers).

        Raises:
            GpuMemoryFault: ``va`` is unmapped or on the system bus (host code cannot reach it).
        """
        ...

    def reset(self) -> None:
        """Back to the power-on translation."""
        ...


class AddressSpace:
    """The GPU's address space: every engine and host access goes through here, translated by ``translation``.

    | region | what | reached as |
    |---|---|---|
    | ``vram`` | the GPU's VRAM (:class:`Vram`) | runs with a view |
    | host buffers | GTT / userptr memory a flat translation maps (the KFD path) | runs with a view |
    | ``io`` | the system bus (:class:`IoRegion`): the bridge's memory across PCIe | runs with a bus address |
    | anything else | :class:`GpuMemoryFault`: never a host crash, never a write to random host memory | |

    ``on_write(va, nbytes)`` is called after every write through this object (engine or host), so waiters wake.
    """

    if TYPE_CHECKING:

        @property
        def generation(self) -> int:
            """The translation's generation (read-only): views and runs taken at another one may be stale."""

    else:  # read by the engines once per packet: an attrgetter runs no Python frame (docs/performance.md)
        generation = property(operator.attrgetter("translation.generation"), doc="The translation's generation.")

    def __init__(self, vram: Vram, translation: Translation, io: IoRegion) -> None:
        self.vram_region = vram
        self.vram = vram.view
        self.vram_bytes = vram.nbytes
        self.translation = translation
        self.io = io
        self.on_write: Callable[[int, int], None] | None = None
        self._views: dict[tuple[int, int, str], np.ndarray | None] = {}
        self._views_generation = -1

    def __repr__(self) -> str:
        return f"<AddressSpace {type(self.translation).__name__} vram={self.vram_bytes >> 20} MB>"

    @property
    def system_bus(self) -> SystemBus | None:
        return self.io.bus

    def reset(self) -> None:
        """Zero VRAM (lazily: the pages go back to the OS) and restore the power-on translation."""
        self.vram_region.zero()
        self.translation.reset()

    # --- translation ---
    def runs(self, va: int, nbytes: int) -> list[Run]:
        """``[va, va + nbytes)`` as the translation's runs (see :class:`Translation`)."""
        return self.translation.runs(va, nbytes)

    def host_span(self, va: int) -> HostSpan:
        """Translate a pointer for host code (see :meth:`Translation.host_span`)."""
        return self.translation.host_span(va)

    def array(self, va: int, nbytes: int, dtype: str) -> np.ndarray | None:
        """A live numpy view of ``[va, va + nbytes)`` as ``dtype`` when the range is one RAM run aligned to the item
        size, else ``None`` (use :meth:`read` / :meth:`write`). Cached until the translation changes: what the
        engines use for their rings and pointers. Writes through it notify nobody."""
        generation = self.translation.generation
        if generation != self._views_generation:
            self._views.clear()
            self._views_generation = generation
        key = (va, nbytes, dtype)
        try:
            return self._views[key]
        except KeyError:
            pass
        view = None
        item = np.dtype(dtype).itemsize
        if nbytes > 0 and not va % item and not nbytes % item:
            try:
                runs = self.translation.runs(va, nbytes)
            except GpuMemoryFault:
                runs = []
            if len(runs) == 1 and runs[0][2] is not None:
                view = np.frombuffer(runs[0][2], dtype)
        if len(self._views) < _VIEW_CACHE_ENTRIES:
            self._views[key] = view
        return view

    # --- access ---
    def _gather(self, runs: list[Run]) -> memoryview:
        """The bytes of ``runs``: the live view (or the bus's bytes) of one run, a joined copy of several."""
        if len(runs) == 1:
            va, nbytes, view, address = runs[0]
            return self.io.read(va, address, nbytes) if view is None else view
        io = self.io
        return memoryview(b"".join(io.read(va, address, nbytes) if view is None else view
                                   for va, nbytes, view, address in runs))  # fmt: skip

    @staticmethod
    def _check_writable(runs: list[Run]) -> None:
        """Raise before anything is written when a run is read-only memory (a mapping without write permission).

        Raises:
            GpuMemoryFault: the first read-only run (``va`` its first byte).
        """
        for va, nbytes, view, _address in runs:
            if view is not None and view.readonly:
                raise GpuMemoryFault(va, nbytes, "write to read-only memory")

    def _scatter(self, runs: list[Run], data: memoryview) -> None:
        offset = 0
        for va, nbytes, view, address in runs:
            if view is None:
                self.io.write(va, address, data[offset : offset + nbytes])
            else:
                view[:] = data[offset : offset + nbytes]
            offset += nbytes

    def read(self, va: int, nbytes: int) -> memoryview:
        """The bytes at ``va``: a live view when they sit in one RAM run, else a copy.

        Raises:
            GpuMemoryFault: part of the range has nothing behind it.
        """
        runs = self.translation.runs(va, nbytes)
        return self._gather(runs) if runs else memoryview(b"")

    def notify_written(self, va: int, nbytes: int) -> None:
        """Report that ``[va, va + nbytes)`` changed behind this object's back (host mmap, kernel, bridge)."""
        if self.on_write is not None and nbytes:
            self.on_write(va, nbytes)

    def write(self, va: int, data: bytes | bytearray | memoryview | np.ndarray) -> None:
        """Write ``data`` at ``va``.

        Raises:
            GpuMemoryFault: part of the range has nothing behind it or is read-only (then nothing is written).
        """
        view = memoryview(data) if type(data) is bytes else as_readonly_bytes("data", data)
        nbytes = view.nbytes
        self._store(va, view)
        if self.on_write is not None and nbytes:  # notify_written
            self.on_write(va, nbytes)

    def _store(self, va: int, view: memoryview) -> None:
        """Put ``view``'s bytes at ``va``, notifying nobody (what :meth:`write` and the engines' write-backs share).
        The whole range is translated before a byte is written."""
        runs = self.translation.runs(va, view.nbytes)
        self._check_writable(runs)
        if len(runs) == 1 and runs[0][2] is not None:
            runs[0][2][:] = view
        elif runs:
            self._scatter(runs, view)

    def copy(self, dst: int, src: int, nbytes: int) -> bool:
        """Copy like ``memmove``: overlapping ranges come out right; one RAM run to one RAM run is one slice
        assignment. Returns whether either side starts on the system bus (its rate is the bus's: ``GpuTiming``).

        Raises:
            GpuMemoryFault: part of either range has nothing behind it (then nothing is written).
        """
        sources = self.translation.runs(src, nbytes)
        targets = self.translation.runs(dst, nbytes)
        self._check_writable(targets)
        if not sources:
            return False
        if len(targets) == 1:
            target = targets[0][2]
            if target is not None:  # one slice assignment: memmoves when source and target overlap
                target[:] = self._gather(sources)
            elif len(sources) == 1 and sources[0][2] is not None:  # RAM to the bus: the bus copies the view
                self.io.write(dst, targets[0][3], sources[0][2])
            elif len(sources) == 1:  # bus to bus: a snapshot, the bus's view may overlap the target
                self.io.write(dst, targets[0][3], memoryview(bytes(self._gather(sources))))
            else:  # pieces joined for the bus: check the bus has the range before joining them
                self.io.read(dst, targets[0][3], nbytes)
                self.io.write(dst, targets[0][3], self._gather(sources))
        else:  # a snapshot: piecewise writes could overlap the live source
            self._scatter(targets, memoryview(bytes(self._gather(sources))))
        if self.on_write is not None:  # notify_written (nbytes > 0 here)
            self.on_write(dst, nbytes)
        return sources[0][2] is None or targets[0][2] is None

    def fill(self, va: int, nbytes: int, value: int, *, dword: bool) -> None:
        """Fill with the byte ``value`` or (``dword``) the little-endian u32 ``value``, in place: each RAM run is
        filled through a numpy view of it, bus runs in pieces of a small pattern, so the host memory a fill needs
        does not grow with its size.

        Raises:
            InvalidArgument: a dword fill of a range not dword aligned in address and size.
            GpuMemoryFault: part of the range has nothing behind it (then nothing is written).
        """
        if dword and (va % 4 or nbytes % 4):
            raise InvalidArgument(f"dword fill of {va:#x}+{nbytes:#x}, expected a dword-aligned address and size")
        runs = self.translation.runs(va, nbytes)
        self._check_writable(runs)
        for start, length, view, address in runs:
            if view is None:  # the bus must take the whole range before anything is written
                self.io.read(start, address, length)
        dtype = _U32 if dword else _U8
        for start, length, view, address in runs:
            if view is not None:
                np.frombuffer(view, dtype).fill(value)
                continue
            items = min(length, _BUS_FILL_PIECE_BYTES) // dtype.itemsize
            pattern = as_readonly_bytes("fill pattern", np.full(items, value, dtype))
            for at in range(0, length, pattern.nbytes):
                self.io.write(start + at, address + at, pattern[: min(pattern.nbytes, length - at)])
        self.notify_written(va, nbytes)

    def read_u32(self, va: int) -> int:
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
