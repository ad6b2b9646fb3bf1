"""The VMID 0 page tables of the USB-path gfx1100 driver: built at boot, changed per allocation.

``docs/gfx1100.md`` section 4. :class:`PageTables` keeps a host copy of every table (the root PDB2 at
``BootLayout.page_tables``, then PDB1 / PDB0 / PTB tables taken from the rest of that region as they are needed)
and remembers which entries changed since the last :meth:`PageTables.write`, which sends them through BAR0, one
write per changed table. The caller then flushes the TLBs (section 4's handshake) once.

| level | index bits of the GPU address | entry |
|---|---|---|
| PDB2 (root) | 47:39 | PDE of a PDB1 |
| PDB1 | 38:30 | PDE of a PDB0 |
| PDB0 | 29:21 | a 2 MB leaf (``PDE_IS_PTE``) or the PDE of a PTB |
| PTB | 20:12 | a 4 KB PTE (VRAM, or with ``SYSTEM`` a PCIe page of the bridge) |

A whole 2 MB-aligned slot of VRAM is one 2 MB leaf, the rest are 4 KB PTEs; a slot that has a PTB keeps it (its
PTEs are set and cleared, the PTB is never given back). Unmapping clears the entries (valid bit 0). Tables are
never freed, so the region bounds how many distinct 2 MB slots ever held 4 KB pages: the 2 MB region is 511 tables
after the root, a PTB for every slot of a heap of up to about 1 GB (the worst case of a 256 MB BAR0, the size a
gfx1100 powers on with, is 126 PTBs); past that, :meth:`PageTables.map` raises :class:`DeviceError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

import numpy as np

from tinyhil.align import round_down, round_up
from tinyhil.errors import DeviceError, InvalidArgument, StateError
from tinyhil.spec.amdgpu import PAGE_BYTES, PAGE_SHIFT
from tinyhil.spec.gfx1100_gmc import PDE_ADDRESS_MASK, PT_ENTRIES, PT_INDEX_BITS, PteFlag

__all__ = ["HUGE_BYTES", "PageTables", "check_range"]

HUGE_BYTES: Final = 2 << 20
_ENTRY_BYTES: Final = 8
_PTB_LEVEL: Final = 1  # the PDB0 entries: a 2 MB leaf or the PDE of a PTB
_LEAF: Final = PteFlag.VALID | PteFlag.READABLE | PteFlag.WRITEABLE | PteFlag.EXECUTE
_SYSTEM_LEAF: Final = _LEAF | PteFlag.SYSTEM | PteFlag.SNOOPED
_HUGE_LEAF: Final = _LEAF | PteFlag.PDE_IS_PTE
_VALID: Final = np.uint64(PteFlag.VALID)  # numpy does not mix uint64 with Python ints


def _index(va: int, level: int) -> int:
    return va >> (PAGE_SHIFT + PT_INDEX_BITS * level) & (PT_ENTRIES - 1)


class PageTables:
    """Host copy of the VMID 0 tables in ``[base, end)`` of VRAM, and the entries not yet written (module docstring).

    Raises (``map``):
        DeviceError: the region has no room for another table.
        StateError: a page of the range is mapped already.
    Raises (``unmap``):
        StateError: a page of the range is not mapped, or the range covers part of a 2 MB leaf.
    """

    def __init__(self, base: int, end: int) -> None:
        self.root = base
        self._next = base + PAGE_BYTES
        self._end = end
        self.tables: dict[int, np.ndarray] = {base: np.zeros(PT_ENTRIES, np.uint64)}
        self._dirty: dict[int, tuple[int, int]] = {base: (0, PT_ENTRIES)}  # table -> [first, end) changed entries

    def _touch(self, table: int, first: int, end: int) -> None:
        low, high = self._dirty.get(table, (first, end))
        self._dirty[table] = (min(low, first), max(high, end))

    def _child(self, table: int, index: int, va: int, *, create: bool) -> int | None:
        """The table entry ``index`` of ``table`` points at, made (and linked) when ``create``; None when absent."""
        entry = int(self.tables[table][index])
        if entry & PteFlag.VALID:
            if entry & PteFlag.PDE_IS_PTE:
                raise StateError(f"GPU address {va:#x} lies in a 2 MB page mapped already, expected an unmapped one")
            return entry & PDE_ADDRESS_MASK
        if not create:
            return None
        if self._next >= self._end:
            raise DeviceError(
                f"mapping GPU address {va:#x} needs another page table, and the {self._end - self.root:#x} bytes at "
                f"VRAM {self.root:#x} are used up (free buffers, or allocate fewer small ones spread over 2 MB slots)",
                op="map",
            )
        child, self._next = self._next, self._next + PAGE_BYTES
        self.tables[child] = np.zeros(PT_ENTRIES, np.uint64)
        self._touch(child, 0, PT_ENTRIES)  # VRAM there may hold an earlier session's entries
        self.tables[table][index] = child | PteFlag.VALID
        self._touch(table, index, index + 1)
        return child

    def _pdb0(self, va: int, *, create: bool) -> int | None:
        table: int | None = self.root
        for level in (3, 2):
            assert table is not None
            table = self._child(table, _index(va, level), va, create=create)
            if table is None:
                return None
        return table

    @staticmethod
    def _slots(va: int, nbytes: int) -> Iterator[tuple[int, int]]:
        """``(va, nbytes)`` of each 2 MB slot's part of ``[va, va + nbytes)``, its end rounded up to a page."""
        end = round_up(va + nbytes, PAGE_BYTES)
        while va < end:
            step = min(end, (va | (HUGE_BYTES - 1)) + 1) - va
            yield va, step
            va += step

    def _check(self, va: int, nbytes: int, *, mapped: bool) -> None:
        """Every page of the range is mapped (``mapped``) or none is, and an unmap splits no 2 MB leaf.

        Raises:
            StateError: naming the first page that is not as expected.
        """
        state = "mapped already, expected an unmapped page" if not mapped else "not mapped, expected a mapped page"
        for at, step in self._slots(va, nbytes):
            pdb0 = self._pdb0(at, create=False)
            entry = 0 if pdb0 is None else int(self.tables[pdb0][_index(at, _PTB_LEVEL)])
            if entry & PteFlag.PDE_IS_PTE:
                if not mapped:
                    raise StateError(f"GPU address {at:#x} is {state}")
                if step != HUGE_BYTES:
                    raise StateError(f"unmapping {at:#x}+{step:#x} would split the 2 MB page at "
                                     f"{round_down(at, HUGE_BYTES):#x}, expected the whole page")  # fmt: skip
                continue
            if not entry & PteFlag.VALID:
                if mapped:
                    raise StateError(f"GPU address {at:#x} is {state}")
                continue
            first = _index(at, 0)
            valid = self.tables[entry & PDE_ADDRESS_MASK][first : first + (step >> PAGE_SHIFT)] & _VALID
            wrong = np.flatnonzero(valid == 0) if mapped else np.flatnonzero(valid)
            if wrong.size:
                raise StateError(f"GPU address {at + (int(wrong[0]) << PAGE_SHIFT):#x} is {state}")

    def map(self, va: int, address: int, nbytes: int, *, system: bool) -> None:
        """Map ``[va, va + nbytes)`` (``va`` a page, the end rounded up to one) onto VRAM offset / PCIe address
        ``address``: a 2 MB leaf for each whole 2 MB-aligned VRAM slot without a PTB, 4 KB PTEs for the rest.
        Nothing changes when it raises."""
        self._check(va, nbytes, mapped=False)
        start = va
        try:
            for at, step in self._slots(va, nbytes):
                self._map_slot(at, address + at - start, step, system=system)
                va = at + step
        except DeviceError:
            if va > start:
                self.unmap(start, va - start)  # the slots mapped before the region ran out
            raise

    def _map_slot(self, va: int, address: int, nbytes: int, *, system: bool) -> None:
        pdb0 = self._pdb0(va, create=True)
        assert pdb0 is not None
        slot = _index(va, _PTB_LEVEL)
        entry = int(self.tables[pdb0][slot])
        if not system and nbytes == HUGE_BYTES and address % HUGE_BYTES == 0 and not entry & PteFlag.VALID:
            self.tables[pdb0][slot] = address | _HUGE_LEAF
            self._touch(pdb0, slot, slot + 1)
            return
        ptb = self._child(pdb0, slot, va, create=True)
        assert ptb is not None
        first, count = _index(va, 0), nbytes >> PAGE_SHIFT
        flags = _SYSTEM_LEAF if system else _LEAF
        pages = np.arange(count, dtype=np.uint64) * np.uint64(PAGE_BYTES)
        self.tables[ptb][first : first + count] = pages + np.uint64(address | flags)
        self._touch(ptb, first, first + count)

    def unmap(self, va: int, nbytes: int) -> None:
        """Clear the entries of ``[va, va + nbytes)`` (valid bit 0); every page of it must be mapped. Nothing
        changes when it raises."""
        self._check(va, nbytes, mapped=True)
        for at, step in self._slots(va, nbytes):
            pdb0 = self._pdb0(at, create=False)
            assert pdb0 is not None
            slot = _index(at, _PTB_LEVEL)
            entry = int(self.tables[pdb0][slot])
            if entry & PteFlag.PDE_IS_PTE:
                self.tables[pdb0][slot] = 0
                self._touch(pdb0, slot, slot + 1)
            else:
                first = _index(at, 0)
                self.tables[entry & PDE_ADDRESS_MASK][first : first + (step >> PAGE_SHIFT)] = 0
                self._touch(entry & PDE_ADDRESS_MASK, first, first + (step >> PAGE_SHIFT))

    def entry(self, va: int) -> tuple[int, int]:
        """``(level, entry)`` of the leaf slot of ``va``: level 1 is its PDB0 entry (a 2 MB leaf, or 0), level 0
        its PTE; ``(3, 0)`` or ``(2, 0)`` when a directory above is missing."""
        table = self.root
        for level in (3, 2, 1):
            value = int(self.tables[table][_index(va, level)])
            if not value & PteFlag.VALID or value & PteFlag.PDE_IS_PTE:
                return level, value
            table = value & PDE_ADDRESS_MASK
        return 0, int(self.tables[table][_index(va, 0)])

    def write(self, vram_write: Callable[[int, bytes], object]) -> int:
        """Send every changed entry, one ``vram_write(offset, bytes)`` per table; returns how many writes."""
        dirty, self._dirty = self._dirty, {}
        for table, (first, end) in sorted(dirty.items()):
            vram_write(table + first * _ENTRY_BYTES, self.tables[table][first:end].astype("<u8").tobytes())
        return len(dirty)


def check_range(op: str, va: int, nbytes: int, limit: int) -> None:
    """``[va, va + nbytes)`` must be whole pages inside ``[0, limit)``.

    Raises:
        InvalidArgument: naming ``op`` and the range.
    """
    if type(va) is not int or type(nbytes) is not int or va % PAGE_BYTES or nbytes % PAGE_BYTES or nbytes <= 0:
        raise InvalidArgument(f"{op}(va={va!r}, nbytes={nbytes!r}), expected whole {PAGE_BYTES:#x}-byte pages")
    if va < 0 or va + nbytes > limit:
        raise InvalidArgument(f"{op}(va={va:#x}, nbytes={nbytes:#x}), expected a range inside 0..{limit:#x}")
