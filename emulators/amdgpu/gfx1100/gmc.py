"""The gfx1100 memory model: MC addresses, the VMID 0 page table of each hub, TLBs and their invalidation.

``docs/gfx1100.md`` section 4. :class:`Gmc` holds VRAM, the PCIe side and one
:class:`~tinyhil.emulators.amdgpu.memory.AddressSpace` per hub: ``gc`` (the SDMA and CP engines: the GPU's memory)
and ``mm`` (the PSP and the IH). Each hub is the :class:`~tinyhil.emulators.amdgpu.memory.Translation` of its
address space (:class:`PageTableHub`):

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

from tinyhil.align import round_down
from tinyhil.spec.amdgpu import PAGE_SHIFT
from tinyhil.spec.gfx1100_gmc import (
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
from ..memory import AddressSpace, HostSpan, IoRegion, Run, Vram
from ..system_bus import SystemBus
from .regfile import RegisterFile

__all__ = ["Gmc", "HubRegs", "Leaf", "PageTableHub"]

_PTE_BYTES: Final = 8
_RUN_CACHE_ENTRIES: Final = 4096  # translated ranges kept between TLB flushes (the engines reuse a few)


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
    """One translated page: ``[va, va + nbytes)`` is ``address`` onwards in VRAM (offset) or on PCIe (``system``);
    GPU writes fault unless the PTE's writeable bit is set."""

    va: int
    nbytes: int
    address: int
    system: bool
    writable: bool = True


class PageTableHub:
    """One hub's VMID 0 translation (a :class:`~tinyhil.emulators.amdgpu.memory.Translation`): its system
    aperture, the walk of section 4, and a TLB that only :meth:`invalidate` empties. The runs of a range are kept
    until then too (the TLB holds every page of them)."""

    def __init__(self, regs: RegisterFile, hub: HubRegs, vram: Vram, io: IoRegion, fb_base: int) -> None:
        self.regs = regs
        self.hub = hub
        self.name = hub.name
        self.vram = vram
        self.io = io
        self.fb_base = fb_base
        self.walks = 0  # TLB misses, for tests
        self.generation = 0
        self.aperture = (0, 0)  # [start, end) of the MC addresses that bypass the table (set by load_aperture)
        self.reset()

    def reset(self) -> None:
        """The registers went back to their reset values (or the aperture was written): re-read the aperture and
        empty the TLB."""
        self.load_aperture()
        self.invalidate()

    def invalidate(self) -> None:
        """Flush the TLB; runs and views taken of translated memory are retaken (``generation`` moves)."""
        self._tlb: dict[int, Leaf] = {}
        self._runs: dict[tuple[int, int], list[Run]] = {}
        self.generation += 1

    def load_aperture(self) -> None:
        """Read the system aperture registers: ``[LOW << 18, (HIGH << 18) + 256 KB)`` (HIGH inclusive), as far as
        it overlaps the FB range; empty when it does not."""
        regs, hub = self.regs, self.hub
        low = MC_VM_SYSTEM_APERTURE_LOGICAL_ADDR.get(regs.stored(hub.aperture_low)) << SYSTEM_APERTURE_SHIFT
        high = (MC_VM_SYSTEM_APERTURE_LOGICAL_ADDR.get(regs.stored(hub.aperture_high)) + 1) << SYSTEM_APERTURE_SHIFT
        start, end = max(low, self.fb_base), min(high, self.fb_base + self.vram.nbytes)
        self.aperture = (start, end) if start < end else (0, 0)

    def aperture_offset(self, va: int) -> int | None:
        """The VRAM offset of ``va`` if it lies in the system aperture, else None."""
        start, end = self.aperture
        return va - self.fb_base if start <= va < end else None

    def covers(self, va: int) -> bool:
        """Whether ``va`` lies in this hub's enabled VMID 0 range."""
        regs, hub = self.regs, self.hub
        if not VM_CONTEXT0_CNTL_ENABLE_CONTEXT.get(regs.stored(hub.cntl)):
            return False
        start = regs.pair(hub.start_lo, hub.start_hi) << PAGE_SHIFT
        end = (regs.pair(hub.end_lo, hub.end_hi) + 1) << PAGE_SHIFT
        return start <= va < end

    # --- the walk ---
    def leaf(self, va: int) -> Leaf:
        """The page ``va`` lies in.

        Raises:
            GpuMemoryFault: ``va`` is outside the context, or a PDE / PTE on its walk is invalid (the message
                names ``va``, the level and the entry).
        """
        page = va >> PAGE_SHIFT
        cached = self._tlb.get(page)
        if cached is not None:
            return cached
        found = self._walk(va)
        self._tlb[page] = found
        return found

    def _entry(self, table: int, system: bool, index: int, va: int) -> int:
        address = table + index * _PTE_BYTES
        if system:
            return int.from_bytes(self.io.read(va, address, _PTE_BYTES, f"{self.name}: page table at "), "little")
        if address + _PTE_BYTES > self.vram.nbytes:
            raise GpuMemoryFault(va, 1, f"{self.name}: page table entry at VRAM {address:#x} is past VRAM")
        return int.from_bytes(self.vram.view[address : address + _PTE_BYTES], "little")

    def _walk(self, va: int) -> Leaf:
        regs, hub = self.regs, self.hub
        self.walks += 1
        if not self.covers(va):
            raise GpuMemoryFault(va, 1, f"{hub.name}: outside the VMID 0 page table range (or context disabled)")
        depth = VM_CONTEXT0_CNTL_PAGE_TABLE_DEPTH.get(regs.stored(hub.cntl))
        offset = va - (regs.pair(hub.start_lo, hub.start_hi) << PAGE_SHIFT)
        root = regs.pair(hub.base_lo, hub.base_hi)
        if not root & PteFlag.VALID:
            raise GpuMemoryFault(va, 1, f"{hub.name}: PAGE_TABLE_BASE_ADDR {root:#x} is not a valid PDE")
        table, system = root & PDE_ADDRESS_MASK, bool(root & PteFlag.SYSTEM)
        for level in range(depth, -1, -1):
            shift = PAGE_SHIFT + PT_INDEX_BITS * level
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
                base = round_down(entry & PTE_ADDRESS_MASK, size)
                return Leaf(va - offset, size, base, bool(entry & PteFlag.SYSTEM), bool(entry & PteFlag.WRITEABLE))
            table, system = entry & PDE_ADDRESS_MASK, bool(entry & PteFlag.SYSTEM)
        raise AssertionError("unreachable: level 0 returns")

    def _check_vram(self, va: int, offset: int, nbytes: int) -> None:
        if offset + nbytes > self.vram.nbytes:
            raise GpuMemoryFault(va, nbytes, f"PTE points past VRAM ({offset:#x})")

    # --- the Translation ---
    def runs(self, va: int, nbytes: int) -> list[Run]:
        """``[va, va + nbytes)`` as VRAM views (the aperture, VRAM pages) and PCIe runs (system pages), pages
        contiguous on either side merged into one run.

        Raises:
            GpuMemoryFault: some byte has nothing behind it.
        """
        if nbytes <= 0:
            return []
        end = va + nbytes
        start, stop = self.aperture
        if start <= va < stop:  # the system aperture: VRAM, no walk; what runs past its end walks the table
            offset = va - self.fb_base
            run = (va, min(end, stop) - va, self.vram.view[offset : offset + min(end, stop) - va], -1)
            return [run] if end <= stop else [run, *self.runs(stop, end - stop)]
        key = (va, nbytes)
        cached = self._runs.get(key)
        if cached is not None:  # the TLB holds every page of it: the same runs as the last walk
            return cached
        found = self._walk_runs(va, end)
        if len(self._runs) >= _RUN_CACHE_ENTRIES:
            self._runs.clear()
        self._runs[key] = found
        return found

    def _walk_runs(self, va: int, end: int) -> list[Run]:
        runs: list[list[int]] = []  # [va, length, address, system, writable]
        cursor = va
        while cursor < end:
            leaf = self.leaf(cursor)
            stop = min(end, leaf.va + leaf.nbytes)
            address = leaf.address + cursor - leaf.va
            if not leaf.system:
                self._check_vram(cursor, address, stop - cursor)
            last = runs[-1] if runs else None
            same = last is not None and (last[3], last[4]) == (leaf.system, leaf.writable)
            if last is not None and same and last[2] + last[1] == address:
                last[1] += stop - cursor
            else:
                runs.append([cursor, stop - cursor, address, leaf.system, leaf.writable])
            cursor = stop
        view = self.vram.view
        # a VRAM page without write permission is handed out read-only: AddressSpace writes to it fault
        return [(start, length, None, address) if system
                else (start, length, view[address : address + length] if writable
                      else view[address : address + length].toreadonly(), -1)
                for start, length, address, system, writable in runs]  # fmt: skip

    def host_span(self, va: int) -> HostSpan:
        """A kernel pointer for host code: the host address of ``va``'s VRAM and the physically contiguous bytes
        from there (across leaves the page table maps back to back).

        Raises:
            GpuMemoryFault: ``va`` is unmapped, or a system page (host code cannot reach the bridge).
        """
        offset = self.aperture_offset(va)
        if offset is not None:
            nbytes = self.aperture[1] - va
        else:
            leaf = self.leaf(va)
            if leaf.system:
                raise GpuMemoryFault(va, 1, f"kernels cannot access system pages (PCIe {leaf.address:#x})")
            offset = leaf.address + va - leaf.va
            nbytes = leaf.va + leaf.nbytes - va
            while offset + nbytes < self.vram.nbytes:
                try:
                    after = self.leaf(va + nbytes)
                except GpuMemoryFault:
                    break
                if after.system or after.address != offset + nbytes:
                    break
                nbytes += after.nbytes
        self._check_vram(va, offset, nbytes)
        return HostSpan(va, self.vram.host_address + offset, nbytes)

    def physical(self, va: int) -> tuple[bool, int] | None:
        """(system, VRAM offset or PCIe address) of GPU address ``va``; None: unmapped."""
        offset = self.aperture_offset(va)
        if offset is not None:
            return False, offset
        try:
            leaf = self.leaf(va)
        except GpuMemoryFault:
            return None
        return leaf.system, leaf.address + va - leaf.va


class Gmc:
    """The gfx1100 memory controller (see the module docstring): VRAM at MC ``fb_base``, the PCIe side ``io``
    (system pages; ``pcie`` may be attached later), and each hub's address space: ``gc`` is the GPU's memory (the
    SDMA and CP engines), ``mm`` the PSP's and the IH's. Writes through ``mm`` reach ``gc``'s listener too.

    Raises:
        InvalidArgument: ``vram_bytes`` is not a whole number of MB.
    """

    def __init__(self, vram_bytes: int, *, fb_base: int, regs: RegisterFile, pcie: SystemBus | None = None) -> None:
        self.vram_region = vram = Vram(vram_bytes)
        self.vram = vram.view
        self.vram_bytes = vram.nbytes
        self.fb_base = fb_base
        self.io = IoRegion("PCIe", pcie)
        self.gc_hub = PageTableHub(regs, GC_HUB, vram, self.io, fb_base)
        self.mm_hub = PageTableHub(regs, MM_HUB, vram, self.io, fb_base)
        self.gc = AddressSpace(vram, self.gc_hub, self.io)
        self.mm = AddressSpace(vram, self.mm_hub, self.io)
        self.mm.on_write = self.gc.notify_written
        for hub in (self.gc_hub, self.mm_hub):
            for address in (hub.hub.aperture_low, hub.hub.aperture_high):
                regs.on_write(address, functools.partial(self._aperture_written, hub))

    def __repr__(self) -> str:
        return f"<Gmc vram={self.vram_bytes >> 20} MB at MC {self.fb_base:#x}>"

    @property
    def pcie(self) -> SystemBus | None:
        """Where system pages (and system-bit page tables) live; the mount may attach it later (a bridge)."""
        return self.io.bus

    @pcie.setter
    def pcie(self, bus: SystemBus | None) -> None:
        self.io.bus = bus

    @property
    def fb_top_block(self) -> int:
        """``*MC_VM_FB_LOCATION_TOP``: the 16 MB block number of the last VRAM block."""
        return (self.fb_base + self.vram_bytes - FB_BLOCK_BYTES) // FB_BLOCK_BYTES

    def registers_reset(self) -> None:
        """The registers went back to their reset values: empty both TLBs and re-read both apertures."""
        self.gc_hub.reset()
        self.mm_hub.reset()

    def _aperture_written(self, hub: PageTableHub, value: int) -> None:
        hub.reset()  # translated ranges and views the engines hold may now mean other memory
