"""The gfx1100 memory model: MC addresses, the VMID 0 page table of each hub, TLBs and their invalidation.

``spec/amdgpu-registers.md`` section 4. Every engine access goes through :class:`PagedMemory`, the GPU's
:class:`~tinyhil.emulators.amdgpu.memory.GpuMemory` for this front end:

| GPU address (per hub) | what |
|---|---|
| ``SYSTEM_APERTURE_LOW << 18 .. (HIGH << 18) + 256 KB``, within the FB range | VRAM at ``address - FB_BASE`` |
| ``CONTEXT0 START .. END`` pages of a hub | the VMID 0 page table: VRAM pages, or system pages on the PCIe side |
| anything else | :class:`GpuMemoryFault` naming the address |

Each hub has its own aperture (``GCMC_VM_*`` / ``MMMC_VM_*``), read when the driver writes it (and after a reset); at
power-on both registers read 0, so nothing bypasses the table until the driver programs them (section 4). An MC
address outside the aperture, FB range or not, walks the table like any VA.

The walk: ``index = VA - START``; 4 levels of 512 u64 entries (PDB2 [47:39], PDB1 [38:30], PDB0 [29:21], PTB
[20:12] for ``page_table_depth`` 3), an entry at PDB2/1/0 with bit 54 is a leaf. Addresses in PDEs and VRAM PTEs
are VRAM offsets; a PTE (or PDE) with the system bit is a PCIe bus address reached through ``pcie``. Each hub has a
TLB (walked entries by 4 KB page) that only ``*VM_INVALIDATE_ENG17_REQ`` flushes, as on hardware; the GC hub
serves the SDMA and CP engines, the MM hub the PSP.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final

import numpy as np

from tinyhil.errors import InvalidArgument, TinyHilError
from tinyhil.spec.gfx1100_boot import (
    FB_BLOCK_BYTES,
    PDE_ADDRESS_MASK,
    PT_ENTRIES,
    PT_INDEX_BITS,
    PTE_ADDRESS_MASK,
    SYSTEM_APERTURE_SHIFT,
    PteFlag,
)
from tinyhil.spec.gfx1100_regs import (
    MC_VM_SYSTEM_APERTURE_LOGICAL_ADDR,
    VM_CONTEXT0_CNTL_ENABLE_CONTEXT,
    VM_CONTEXT0_CNTL_PAGE_TABLE_DEPTH,
    Reg,
)

from ..errors import GpuMemoryFault
from ..memory import GpuMemory, HostSpan
from ..system_bus import SystemBus
from .regfile import RegisterFile

__all__ = ["HubRegs", "Leaf", "PageTableHub", "PagedMemory"]

_PAGE_SHIFT: Final = 12
_PTE_BYTES: Final = 8
_RUN_CACHE_ENTRIES: Final = 4096  # translated ranges kept between TLB flushes (the engines reuse a few)
# What a SystemBus raises for an address with nothing behind it (as GpuMemory's): a memory fault of the access.
_BUS_ERRORS: Final = (TinyHilError, ValueError, LookupError)


@dataclass(frozen=True, slots=True)
class HubRegs:
    """The VMID 0 context registers of one hub (GCVM_* or MMVM_*)."""

    name: str
    cntl: int
    base_lo: int
    base_hi: int
    start_lo: int
    start_hi: int
    end_lo: int
    end_hi: int
    aperture_low: int  # *MC_VM_SYSTEM_APERTURE_LOW_ADDR
    aperture_high: int


GC_HUB: Final = HubRegs(
    "GC hub",
    Reg.GCVM_CONTEXT0_CNTL,
    Reg.GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32,
    Reg.GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32,
    Reg.GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32,
    Reg.GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32,
    Reg.GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32,
    Reg.GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32,
    Reg.GCMC_VM_SYSTEM_APERTURE_LOW_ADDR,
    Reg.GCMC_VM_SYSTEM_APERTURE_HIGH_ADDR,
)
MM_HUB: Final = HubRegs(
    "MM hub",
    Reg.MMVM_CONTEXT0_CNTL,
    Reg.MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32,
    Reg.MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32,
    Reg.MMVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32,
    Reg.MMVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32,
    Reg.MMVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32,
    Reg.MMVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32,
    Reg.MMMC_VM_SYSTEM_APERTURE_LOW_ADDR,
    Reg.MMMC_VM_SYSTEM_APERTURE_HIGH_ADDR,
)


@dataclass(frozen=True, slots=True)
class Leaf:
    """One translated page: ``[va, va + nbytes)`` is ``address`` onwards in VRAM (offset) or on PCIe (``system``)."""

    va: int
    nbytes: int
    address: int
    system: bool


class PageTableHub:
    """One hub's VMID 0 translation: the walk of section 4 and a TLB that ``invalidate`` empties."""

    def __init__(self, regs: RegisterFile, hub: HubRegs, vram: memoryview, pcie: SystemBus | None) -> None:
        self.regs = regs
        self.hub = hub
        self.vram = vram
        self.pcie = pcie
        self.walks = 0  # TLB misses, for tests
        self._tlb: dict[int, Leaf] = {}
        self.aperture = (0, 0)  # [start, end) of the MC addresses that bypass the table (set by load_aperture)

    def invalidate(self) -> None:
        self._tlb.clear()

    def load_aperture(self, fb_start: int, fb_end: int) -> None:
        """Read the system aperture registers: ``[LOW << 18, (HIGH << 18) + 256 KB)`` (HIGH inclusive), as far as
        it overlaps the FB range ``[fb_start, fb_end)``; empty when it does not."""
        regs, hub = self.regs, self.hub
        low = MC_VM_SYSTEM_APERTURE_LOGICAL_ADDR.get(regs.stored(hub.aperture_low)) << SYSTEM_APERTURE_SHIFT
        high = (MC_VM_SYSTEM_APERTURE_LOGICAL_ADDR.get(regs.stored(hub.aperture_high)) + 1) << SYSTEM_APERTURE_SHIFT
        start, end = max(low, fb_start), min(high, fb_end)
        self.aperture = (start, end) if start < end else (0, 0)

    def covers(self, va: int) -> bool:
        """Whether ``va`` lies in this hub's enabled VMID 0 range."""
        regs, hub = self.regs, self.hub
        if not VM_CONTEXT0_CNTL_ENABLE_CONTEXT.get(regs.stored(hub.cntl)):
            return False
        start = regs.pair(hub.start_lo, hub.start_hi) << _PAGE_SHIFT
        end = (regs.pair(hub.end_lo, hub.end_hi) + 1) << _PAGE_SHIFT
        return start <= va < end

    def leaf(self, va: int) -> Leaf:
        """The page ``va`` lies in.

        Raises:
            GpuMemoryFault: ``va`` is outside the context, or a PDE / PTE on its walk is invalid (the message
                names ``va``, the level and the entry).
        """
        page = va >> _PAGE_SHIFT
        cached = self._tlb.get(page)
        if cached is not None:
            return cached
        found = self._walk(va)
        self._tlb[page] = found
        return found

    def _entry(self, table: int, system: bool, index: int, va: int) -> int:
        address = table + index * _PTE_BYTES
        if system:
            if self.pcie is None:
                raise GpuMemoryFault(va, 1, f"{self.hub.name}: page table at PCIe {address:#x} with no PCIe host")
            try:
                return int.from_bytes(bytes(self.pcie.dma_read(address, _PTE_BYTES)), "little")
            except _BUS_ERRORS as error:
                raise GpuMemoryFault(va, 1, f"{self.hub.name}: page table at PCIe {address:#x}: {error}") from None
        if address + _PTE_BYTES > self.vram.nbytes:
            raise GpuMemoryFault(va, 1, f"{self.hub.name}: page table entry at VRAM {address:#x} is past VRAM")
        return int.from_bytes(self.vram[address : address + _PTE_BYTES], "little")

    def _walk(self, va: int) -> Leaf:
        regs, hub = self.regs, self.hub
        self.walks += 1
        if not self.covers(va):
            raise GpuMemoryFault(va, 1, f"{hub.name}: outside the VMID 0 page table range (or context disabled)")
        depth = VM_CONTEXT0_CNTL_PAGE_TABLE_DEPTH.get(regs.stored(hub.cntl))
        offset = va - (regs.pair(hub.start_lo, hub.start_hi) << _PAGE_SHIFT)
        root = regs.pair(hub.base_lo, hub.base_hi)
        if not root & PteFlag.VALID:
            raise GpuMemoryFault(va, 1, f"{hub.name}: PAGE_TABLE_BASE_ADDR {root:#x} is not a valid PDE")
        table, system = root & PDE_ADDRESS_MASK, bool(root & PteFlag.SYSTEM)
        for level in range(depth, -1, -1):
            shift = _PAGE_SHIFT + PT_INDEX_BITS * level
            index = offset >> shift
            if index >= PT_ENTRIES:
                raise GpuMemoryFault(va, 1, f"{hub.name}: index {index} at level {level} is past the table")
            entry = self._entry(table, system, index, va)
            offset &= (1 << shift) - 1
            if not entry & PteFlag.VALID:
                what = "PTE" if level == 0 else f"PDE (level {level})"
                raise GpuMemoryFault(va, 1, f"{hub.name}: invalid {what} {entry:#x} for VA {va:#x}")
            if level == 0 or entry & PteFlag.PDE_IS_PTE:
                size = 1 << shift
                base = (entry & PTE_ADDRESS_MASK) & ~(size - 1)
                return Leaf(va - offset, size, base, bool(entry & PteFlag.SYSTEM))
            table, system = entry & PDE_ADDRESS_MASK, bool(entry & PteFlag.SYSTEM)
        raise AssertionError("unreachable: level 0 returns")


# One piece of a translated range: GPU address, a VRAM view or None (PCIe), the PCIe address (or -1), length.
_Piece = tuple[int, memoryview | None, int, int]


class PagedMemory(GpuMemory):
    """The address space of the gfx1100 front end (see the module docstring); ``pcie`` carries system pages."""

    def __init__(self, vram_bytes: int, *, fb_base: int, regs: RegisterFile, pcie: SystemBus | None = None) -> None:
        self.fb_base = fb_base
        self._hubs: tuple[PageTableHub, ...] = ()
        super().__init__(vram_bytes, system_bus=None, vram_at_zero=False)
        self.gc_hub = PageTableHub(regs, GC_HUB, self.vram, pcie)
        self.mm_hub = PageTableHub(regs, MM_HUB, self.vram, pcie)
        self._hubs = (self.gc_hub, self.mm_hub)
        for hub in self._hubs:
            for address in (hub.hub.aperture_low, hub.hub.aperture_high):
                regs.on_write(address, functools.partial(self._aperture_written, hub))
            hub.load_aperture(fb_base, fb_base + vram_bytes)
        self._pcie_bus = pcie
        self._vram_address = int(np.frombuffer(self.vram, np.uint8).ctypes.data)
        self._runs: dict[tuple[int, int, bool], list[_Piece]] = {}  # translated ranges, until a TLB flush

    @property
    def pcie(self) -> SystemBus | None:
        """Where system pages (and system-bit page tables) live; the mount may attach it later (a bridge)."""
        return self._pcie_bus

    @pcie.setter
    def pcie(self, bus: SystemBus | None) -> None:
        self._pcie_bus = bus
        for hub in self._hubs:
            hub.pcie = bus

    def reset(self) -> None:
        """Zero VRAM, empty both TLBs and re-read the apertures."""
        super().reset()
        self.registers_reset()

    def registers_reset(self) -> None:
        """The registers went back to their reset values: empty both TLBs and re-read both apertures."""
        for hub in self._hubs:
            hub.load_aperture(self.fb_base, self.fb_base + self.vram_bytes)
            self.invalidate(hub)

    def _aperture_written(self, hub: PageTableHub, value: int) -> None:
        hub.load_aperture(self.fb_base, self.fb_base + self.vram_bytes)
        self.invalidate(hub)  # translated ranges and views the engines hold may now mean other memory

    def aperture_offset(self, va: int, hub: PageTableHub | None = None) -> int | None:
        """The VRAM offset of ``va`` if it lies in ``hub``'s (default the GC hub's) system aperture, else None."""
        start, end = (self.gc_hub if hub is None else hub).aperture
        return va - self.fb_base if start <= va < end else None

    @property
    def fb_top_block(self) -> int:
        """``*MC_VM_FB_LOCATION_TOP``: the 16 MB block number of the last VRAM block."""
        return (self.fb_base + self.vram_bytes - FB_BLOCK_BYTES) // FB_BLOCK_BYTES

    def invalidate(self, hub: PageTableHub) -> None:
        """Flush ``hub``'s TLB; views the engines hold of translated memory are retaken."""
        hub.invalidate()
        self._runs.clear()
        self._views.clear()
        self.generation += 1

    # --- translation ---
    def pieces(self, va: int, nbytes: int, hub: PageTableHub | None = None) -> list[_Piece]:
        """``[va, va + nbytes)`` split into contiguous VRAM views and PCIe runs.

        Raises:
            GpuMemoryFault: some byte has nothing behind it.
        """
        if nbytes <= 0:
            return []
        end = va + nbytes
        hub = self.gc_hub if hub is None else hub
        start, stop = hub.aperture
        if start <= va < stop:  # the system aperture: VRAM, no walk; what runs past its end walks the table
            fb_base = self.fb_base
            if end <= stop:
                return [(va, self.vram[va - fb_base : end - fb_base], -1, nbytes)]
            return [(va, self.vram[va - fb_base : stop - fb_base], -1, stop - va), *self.pieces(stop, end - stop, hub)]
        key = (va, nbytes, hub is self.mm_hub)
        cached = self._runs.get(key)
        if cached is not None:  # the TLB holds every page of it: the same runs as the last walk
            return cached
        found = self._walk_runs(hub, va, end)
        if len(self._runs) >= _RUN_CACHE_ENTRIES:
            self._runs.clear()
        self._runs[key] = found
        return found

    def _walk_runs(self, hub: PageTableHub, va: int, end: int) -> list[_Piece]:
        vram = self.vram
        runs: list[list[int]] = []  # [va, address, length, system]
        cursor = va
        while cursor < end:
            leaf = hub.leaf(cursor)
            stop = min(end, leaf.va + leaf.nbytes)
            address = leaf.address + cursor - leaf.va
            if not leaf.system and address + stop - cursor > self.vram_bytes:
                raise GpuMemoryFault(cursor, stop - cursor, f"PTE points past VRAM ({address:#x})")
            last = runs[-1] if runs else None
            if last is not None and last[3] == leaf.system and last[1] + last[2] == address:
                last[2] += stop - cursor
            else:
                runs.append([cursor, address, stop - cursor, leaf.system])
            cursor = stop
        return [(start, None, address, length) if system else (start, vram[address : address + length], -1, length)
                for start, address, length, system in runs]  # fmt: skip

    def translate(self, va: int, nbytes: int) -> list[tuple[int, memoryview | None]]:
        return [(start, view) for start, view, _, _ in self.pieces(va, nbytes)]

    def in_system_aperture(self, va: int) -> bool:
        return False

    def host_span(self, va: int) -> HostSpan:
        """A kernel pointer for host code: the host address of ``va``'s VRAM and the physically contiguous bytes
        from there (across leaves the page table maps back to back).

        Raises:
            GpuMemoryFault: ``va`` is unmapped, or a system page (host code cannot reach the bridge).
        """
        in_aperture = self.aperture_offset(va)
        if in_aperture is not None:
            offset, nbytes = in_aperture, self.gc_hub.aperture[1] - va
        else:
            leaf = self.gc_hub.leaf(va)
            if leaf.system:
                raise GpuMemoryFault(va, 1, f"kernels cannot access system pages (PCIe {leaf.address:#x})")
            offset = leaf.address + va - leaf.va
            nbytes = leaf.va + leaf.nbytes - va
            while offset + nbytes < self.vram_bytes:
                try:
                    after = self.gc_hub.leaf(va + nbytes)
                except GpuMemoryFault:
                    break
                if after.system or after.address != offset + nbytes:
                    break
                nbytes += after.nbytes
        if offset + nbytes > self.vram_bytes:
            raise GpuMemoryFault(va, 1, f"PTE points past VRAM ({offset:#x})")
        return HostSpan(va, self._vram_address + offset, nbytes)

    def _pcie(self, va: int, nbytes: int, address: int) -> SystemBus:
        bus = self._pcie_bus
        if bus is None:
            raise GpuMemoryFault(va, nbytes, f"system page at PCIe {address:#x} with no PCIe host attached")
        return bus

    def _gather(self, pieces: list[_Piece]) -> memoryview:
        if len(pieces) == 1:
            start, view, address, length = pieces[0]
            if view is not None:
                return view
            try:  # one PCIe run: the bus's own bytes (a view where it gives one), not a second copy
                return memoryview(self._pcie(start, length, address).dma_read(address, length))
            except _BUS_ERRORS as error:
                raise GpuMemoryFault(start, length, f"PCIe {address:#x}: {error}") from None
        parts = []
        for start, view, address, length in pieces:
            if view is None:
                bus = self._pcie(start, length, address)
                try:
                    parts.append(bytes(bus.dma_read(address, length)))
                except _BUS_ERRORS as error:
                    raise GpuMemoryFault(start, length, f"PCIe {address:#x}: {error}") from None
            else:
                parts.append(bytes(view))
        return memoryview(b"".join(parts))

    def _put(self, pieces: list[_Piece], data: memoryview) -> None:
        offset = 0
        for start, view, address, length in pieces:
            chunk = data[offset : offset + length]
            if view is None:
                bus = self._pcie(start, length, address)
                try:
                    bus.dma_write(address, chunk)
                except _BUS_ERRORS as error:
                    raise GpuMemoryFault(start, length, f"PCIe {address:#x}: {error}") from None
            else:
                view[:] = chunk
            offset += length

    # --- access (the GpuMemory interface, through the GC hub) ---
    def _bus_read(self, va: int, nbytes: int) -> memoryview:
        return self._gather(self.pieces(va, nbytes))

    def _bus_write(self, va: int, data: memoryview) -> None:
        self._put(self.pieces(va, data.nbytes), data)

    def _scatter(self, segments: list[tuple[int, memoryview | None]], data: memoryview) -> None:
        if segments:
            self._put(self.pieces(segments[0][0], data.nbytes), data)

    def _store(self, va: int, view: memoryview) -> None:
        self._put(self.pieces(va, view.nbytes), view)  # one walk per write (the runs cached until a TLB flush)

    def read(self, va: int, nbytes: int) -> memoryview:
        return self._gather(self.pieces(va, nbytes))

    def copy(self, dst: int, src: int, nbytes: int) -> bool:
        """Copy through the GC hub like ``memmove``; whether either side starts on a system page (PCIe)."""
        sources, targets = self.pieces(src, nbytes), self.pieces(dst, nbytes)
        if not sources:
            return False
        if len(sources) == 1 and len(targets) == 1:  # the common case: one run each side, one copy of the bytes
            source, target = sources[0][1], targets[0][1]
            if target is not None:  # one slice assignment: memmoves when source and target overlap
                target[:] = source if source is not None else self._gather(sources)
            elif source is not None:  # VRAM to PCIe: the bus copies the view
                self._put(targets, source)
            else:
                self._put(targets, memoryview(bytes(self._gather(sources))))
        else:
            data = memoryview(bytes(self._gather(sources)))  # a snapshot: pieces of the ranges may overlap
            self._put(targets, data)
        self.notify_written(dst, nbytes)
        return sources[0][1] is None or targets[0][1] is None

    def fill(self, va: int, nbytes: int, value: int, *, dword: bool) -> None:
        if dword and (va % 4 or nbytes % 4):
            raise InvalidArgument(f"dword fill of {va:#x}+{nbytes:#x}, expected a dword-aligned address and size")
        pieces = self.pieces(va, nbytes)
        dtype = np.dtype("<u4") if dword else np.dtype(np.uint8)
        pattern = np.full(nbytes // dtype.itemsize, value, dtype).tobytes()
        self._put(pieces, memoryview(pattern))
        self.notify_written(va, nbytes)

    def read_u32(self, va: int) -> int:
        return int.from_bytes(self.read(va, 4), "little")

    # --- the PSP's view (MM hub) ---
    def hub_read(self, hub: PageTableHub, va: int, nbytes: int) -> bytes:
        """``nbytes`` at ``va`` as a client of ``hub`` sees them."""
        return bytes(self._gather(self.pieces(va, nbytes, hub)))

    def hub_write(self, hub: PageTableHub, va: int, data: bytes) -> None:
        """Write ``data`` at ``va`` as a client of ``hub``."""
        self._put(self.pieces(va, len(data), hub), memoryview(data))
        self.notify_written(va, len(data))
