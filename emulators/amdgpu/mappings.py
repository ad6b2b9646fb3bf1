"""The flat translation: page-granular mappings of RAM regions, and this model's system aperture.

The translation of the engine-level GPU and of MOCKKFD's GPUs (docs/amdgpu.md, "Memory"):

| GPU address range | what |
|---|---|
| ``0 .. vram_bytes`` | VRAM itself, when ``vram_at_zero`` |
| mapped ranges | :meth:`FlatTranslation.map` backings: VRAM slices, GTT / userptr host buffers (the KFD path) |
| ``SYS_APERTURE .. SYS_APERTURE_END`` | the system bus at ``va - SYS_APERTURE``, when ``aperture`` is on |
| anything else | :class:`GpuMemoryFault` |

The system aperture is a model choice, not a hardware fact: the engine tests give the GPU a bus standing in for the
bridge's memory at a fixed GPU address. The gfx1100 model reaches the bridge through system-bit PTEs instead
(:mod:`tinyhil.emulators.amdgpu.gfx1100.gmc`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from tinyhil._check import as_writable_bytes, check_int
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import GPU_VA_LIMIT, PAGE_BYTES, SYS_APERTURE

from .errors import GpuMemoryFault
from .memory import HostSpan, Run, Vram
from .model_choices import SYS_APERTURE_END

__all__ = ["FlatTranslation", "Mapping"]


@dataclass(frozen=True, slots=True, eq=False)
class Mapping:
    """``backing`` (flat bytes) seen by the GPU at ``va``; ``host_address`` is its first byte's address. A mapping
    that is not ``writable`` hands out read-only views, so a GPU write to it is a :class:`GpuMemoryFault`."""

    va: int
    backing: memoryview
    host_address: int
    writable: bool = True

    @property
    def nbytes(self) -> int:
        return self.backing.nbytes

    @property
    def end(self) -> int:
        return self.va + self.backing.nbytes


class FlatTranslation:
    """A sorted list of mappings, and the system aperture when ``aperture`` (see the module docstring)."""

    def __init__(self, vram: Vram, *, vram_at_zero: bool, aperture: bool) -> None:
        if vram_at_zero and vram.nbytes > SYS_APERTURE:
            raise InvalidArgument(f"vram_bytes={vram.nbytes:#x}, expected at most {SYS_APERTURE:#x}")
        self.vram = vram
        self.vram_at_zero = vram_at_zero
        self.aperture = aperture
        self.generation = 0
        self.reset()

    def reset(self) -> None:
        """The power-on mappings: VRAM at 0 when ``vram_at_zero``, nothing else."""
        self._starts: list[int] = []
        self._mappings: list[Mapping] = []
        self._changed()
        if self.vram_at_zero:
            self.map(0, self.vram.view)

    def _changed(self) -> None:
        self._last: tuple[int, int, memoryview] = (0, 0, self.vram.view[:0])  # (va, end, backing) of the last hit
        self.generation += 1

    @property
    def mappings(self) -> tuple[Mapping, ...]:
        return tuple(self._mappings)

    def map(self, va: int, backing: memoryview, *, writable: bool = True) -> Mapping:
        """Make ``backing`` visible to the GPU at ``va``, read-only unless ``writable`` (the page permission a
        GPUVM PTE's writeable bit gives: a GPU write to a read-only mapping faults; host code is not checked).

        Raises:
            InvalidArgument: ``va`` or the size is not page aligned, the range is empty, leaves the 48-bit VA space,
                overlaps the system aperture or an existing mapping, or ``backing`` is not writable contiguous bytes;
                nothing changes.
        """
        check_int("va", va, min_value=0)
        view = as_writable_bytes("backing", backing)
        nbytes = view.nbytes
        if va % PAGE_BYTES or nbytes % PAGE_BYTES or not nbytes:
            raise InvalidArgument(
                f"mapping {va:#x}+{nbytes:#x}, expected a non-empty range of whole {PAGE_BYTES} B pages"
            )
        if va + nbytes > GPU_VA_LIMIT:
            raise InvalidArgument(f"mapping {va:#x}+{nbytes:#x} ends past the GPU VA limit {GPU_VA_LIMIT:#x}")
        if self.aperture and va < SYS_APERTURE_END and va + nbytes > SYS_APERTURE:
            raise InvalidArgument(f"mapping {va:#x}+{nbytes:#x} overlaps the system aperture at {SYS_APERTURE:#x}")
        index = bisect.bisect_right(self._starts, va)
        for other in self._mappings[max(index - 1, 0) : index + 1]:
            if va < other.end and other.va < va + nbytes:
                raise InvalidArgument(
                    f"mapping {va:#x}+{nbytes:#x} overlaps the mapping {other.va:#x}+{other.nbytes:#x}; unmap it first"
                )
        host_address = int(np.frombuffer(view, np.uint8).ctypes.data)
        mapping = Mapping(va, view if writable else view.toreadonly(), host_address, writable)
        self._starts.insert(index, va)
        self._mappings.insert(index, mapping)
        self._changed()
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
        self._changed()

    def _describe(self) -> str:
        return ", ".join(f"{m.va:#x}+{m.nbytes:#x}" for m in self._mappings) or "nothing"

    def in_aperture(self, va: int) -> bool:
        """Whether ``va`` is in the active system aperture (the bus, reached across PCIe)."""
        return self.aperture and SYS_APERTURE <= va < SYS_APERTURE_END

    def runs(self, va: int, nbytes: int) -> list[Run]:
        """``[va, va + nbytes)`` as views of the mappings it lies in, or one bus run in the aperture.

        Raises:
            GpuMemoryFault: some byte of the range is unmapped, or the range leaves the aperture.
        """
        end = va + nbytes
        first, last_end, backing = self._last
        if first <= va and end <= last_end and nbytes > 0:  # in the mapping of the last translation: no search
            return [(va, nbytes, backing[va - first : end - first], -1)]
        if nbytes <= 0:
            return []
        if self.in_aperture(va):
            if end > SYS_APERTURE_END:
                raise GpuMemoryFault(SYS_APERTURE_END, end - SYS_APERTURE_END)
            return [(va, nbytes, None, va - SYS_APERTURE)]
        index = bisect.bisect_right(self._starts, va) - 1
        runs: list[Run] = []
        cursor = va
        while cursor < end:
            mapping = self._mappings[index] if 0 <= index < len(self._mappings) else None
            if mapping is None or not mapping.va <= cursor < mapping.end:
                raise GpuMemoryFault(cursor, end - cursor, f"no mapping (mapped: {self._describe()})")
            stop = min(end, mapping.end)
            runs.append((cursor, stop - cursor, mapping.backing[cursor - mapping.va : stop - mapping.va], -1))
            self._last = (mapping.va, mapping.end, mapping.backing)
            cursor = stop
            index += 1
        return runs

    def host_span(self, va: int) -> HostSpan:
        """The host address of ``va`` and the bytes left in its mapping.

        Raises:
            GpuMemoryFault: ``va`` is unmapped or in the system aperture (host code cannot reach the bus).
        """
        if self.in_aperture(va):
            raise GpuMemoryFault(va, 1, "kernels cannot access the system aperture")
        index = bisect.bisect_right(self._starts, va) - 1
        if index < 0 or va >= self._mappings[index].end:
            raise GpuMemoryFault(va, 1, f"pointer outside every mapping (mapped: {self._describe()})")
        mapping = self._mappings[index]
        return HostSpan(va, mapping.host_address + va - mapping.va, mapping.end - va)
