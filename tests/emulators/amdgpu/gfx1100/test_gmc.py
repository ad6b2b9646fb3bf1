"""The VMID 0 page-table walk: VRAM and system pages at random GPU VAs, faults, TLB invalidation, huge pages."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from support.gfx1100 import DATA, SDMA_RING, SDMA_RPTR, VRAM_BYTES, RawDriver, copy_linear
from support.scripts import load_benchmark
from support.system_bus import FakePcie

from tinyhil.emulators.amdgpu import GpuMemoryFault, GpuQueueError
from tinyhil.emulators.amdgpu.gfx1100 import Gfx1100Front
from tinyhil.emulators.kernel import EventKernel
from tinyhil.spec.gfx1100_gmc import VMID0_VA_START, PteFlag
from tinyhil.spec.gfx1100_regs import Reg

RING_VA = VMID0_VA_START + 0x10_0000
RPTR_VA = VMID0_VA_START + 0x20_0000
PCIE_BASE = 0x1_0000_0000
PAGES = 4
# First VA page of a PAGES-page buffer: inside the VMID 0 range, above the ring and pointer pages.
LAST_PAGE = (0x8000_0000_0000 - VMID0_VA_START) >> 12
BUFFER_PAGES = st.integers(min_value=0x1000, max_value=LAST_PAGE - PAGES)


def sdma_raw(pcie: FakePcie) -> RawDriver:
    """A front end with the GC hub's VMID 0 context and SDMA0 queue 0 up (no PSP needed by the copy engine)."""
    raw = RawDriver(Gfx1100Front.build(EventKernel(), vram_bytes=VRAM_BYTES, pcie=pcie), pcie)
    raw.w(Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, 1)
    raw.setup_vmid0("gc")
    raw.setup_vmid0("mm")
    for page in range(4):
        raw.map_page(RING_VA + page * 4096, SDMA_RING + page * 4096)
    raw.map_page(RPTR_VA, SDMA_RPTR)
    raw.flush_tlb()
    raw.sdma_up(RING_VA, RPTR_VA, RPTR_VA + 0x100)
    return raw


def run_copy(raw: RawDriver, dst: int, src: int, nbytes: int) -> None:
    wptr = raw.sdma_submit(copy_linear(dst, src, nbytes))
    raw.run_until(lambda: raw.sdma_rptr() == wptr, "copy")


@settings(max_examples=25, deadline=None)
@given(
    src_page=BUFFER_PAGES,
    dst_page=BUFFER_PAGES,
    src_system=st.lists(st.booleans(), min_size=PAGES, max_size=PAGES),
    dst_system=st.lists(st.booleans(), min_size=PAGES, max_size=PAGES),
    order=st.permutations(range(PAGES)),
    seed=st.integers(0, 255),
)
def test_sdma_copies_between_system_and_vram_pages_at_random_vas(
    src_page: int, dst_page: int, src_system: list[bool], dst_system: list[bool], order: list[int], seed: int
) -> None:
    assume(abs(src_page - dst_page) >= PAGES)  # two buffers, not one overlapping range
    pcie = FakePcie(PCIE_BASE, 1 << 20)
    raw = sdma_raw(pcie)
    pattern = bytes((seed + i * 7) & 0xFF for i in range(PAGES * 4096))
    src_va, dst_va = VMID0_VA_START + (src_page << 12), VMID0_VA_START + (dst_page << 12)
    # Each VA page is backed by VRAM or by PCIe memory, its physical pages in a shuffled order.
    destinations = []
    for index, physical in enumerate(order):
        chunk = pattern[index * 4096 : (index + 1) * 4096]
        if src_system[index]:
            address = PCIE_BASE + physical * 4096
            pcie.dma_write(address, chunk)
        else:
            address = DATA + physical * 4096
            raw.put(address, chunk)
        raw.map_page(src_va + index * 4096, address, system=src_system[index])
        target = (PCIE_BASE + 0x80000 if dst_system[index] else DATA + 0x100000) + physical * 4096
        raw.map_page(dst_va + index * 4096, target, system=dst_system[index])
        destinations.append((target, dst_system[index]))
    raw.flush_tlb()
    run_copy(raw, dst_va, src_va, PAGES * 4096)
    landed = b"".join(pcie.dma_read(at, 4096) if system else raw.get(at, 4096) for at, system in destinations)
    assert landed == pattern


def test_an_invalid_pte_is_a_memory_fault_naming_the_va(pcie: FakePcie) -> None:
    raw = sdma_raw(pcie)
    src, bad = VMID0_VA_START + 0x100_0000, VMID0_VA_START + 0x200_0000
    raw.map_page(src, DATA)
    raw.map_page(bad, DATA + 0x1000, valid=False)
    raw.flush_tlb()
    raw.sdma_submit(copy_linear(bad, src, 64))
    with pytest.raises(GpuQueueError, match=f"{bad:#x}") as stopped:
        raw.run_until(lambda: False, "the fault")
    assert stopped.value.fault_va == bad
    with pytest.raises(GpuMemoryFault, match=f"invalid PTE .* for VA {bad + 8:#x}"):
        raw.front.gpu.read(bad + 8, 4)


def test_an_unmapped_pde_and_an_address_outside_the_context_fault(pcie: FakePcie) -> None:
    raw = sdma_raw(pcie)
    far = VMID0_VA_START + (1 << 40)
    with pytest.raises(GpuMemoryFault, match=r"invalid PDE \(level 3\)"):
        raw.front.gpu.read(far, 4)
    with pytest.raises(GpuMemoryFault, match="outside the VMID 0 page table range"):
        raw.front.gpu.read(0x1000, 4)


def test_a_changed_pte_takes_effect_only_after_the_tlb_invalidate(pcie: FakePcie) -> None:
    raw = sdma_raw(pcie)
    va = VMID0_VA_START + 0x300_0000
    raw.put(DATA, b"old!")
    raw.put(DATA + 0x1000, b"new!")
    raw.map_page(va, DATA)
    raw.flush_tlb()
    assert bytes(raw.front.gpu.read(va, 4)) == b"old!"
    raw.map_page(va, DATA + 0x1000)
    assert bytes(raw.front.gpu.read(va, 4)) == b"old!"  # the TLB still holds the old page
    raw.w(Reg.GCVM_INVALIDATE_ENG17_REQ, 0x00F8_0001)
    assert raw.r(Reg.GCVM_INVALIDATE_ENG17_ACK) & 1 == 1
    assert bytes(raw.front.gpu.read(va, 4)) == b"new!"


def test_a_pde_with_bit_54_is_a_2mb_leaf(pcie: FakePcie) -> None:
    raw = sdma_raw(pcie)
    va = VMID0_VA_START + 0x4000_0000  # 1 GB: a fresh PDB0 entry
    raw.map_page(va, DATA)  # builds the tables down to the PTB
    offset = va - VMID0_VA_START
    pdb2 = int.from_bytes(raw.get(8 * (offset >> 39), 8), "little") & 0xFFFF_FFFF_FFC0
    pdb1 = int.from_bytes(raw.get(pdb2 + 8 * (offset >> 30 & 0x1FF), 8), "little") & 0xFFFF_FFFF_FFC0
    huge = 0x200000 | PteFlag.VALID | PteFlag.READABLE | PteFlag.WRITEABLE | PteFlag.PDE_IS_PTE
    raw.put(pdb1 + 8 * (offset >> 21 & 0x1FF), huge.to_bytes(8, "little"))
    raw.flush_tlb()
    raw.put(0x200000 + 0x12345, b"huge")
    assert bytes(raw.front.gpu.read(va + 0x12345, 4)) == b"huge"


def test_a_vram_page_without_the_writeable_bit_is_read_only(pcie: FakePcie) -> None:
    raw = sdma_raw(pcie)
    va = VMID0_VA_START + 0x4000_0000
    raw.map_page(va, DATA, writeable=False)
    raw.map_page(va + 0x1000, DATA + 0x1000)
    raw.flush_tlb()
    raw.put(DATA, b"keep")
    with pytest.raises(GpuMemoryFault, match="read-only") as caught:
        raw.front.gpu.write(va + 0xFFC, b"12345678")  # straddles from the read-only page into the writable one
    assert caught.value.va == va + 0xFFC  # the first byte of the read-only run
    assert bytes(raw.front.gpu.read(va, 4)) == b"keep"
    assert bytes(raw.front.gpu.read(va + 0x1000, 4)) == bytes(4)  # nothing of the write landed
    raw.front.gpu.write(va + 0x1000, b"ok!!")
    assert bytes(raw.front.gpu.read(va + 0x1000, 4)) == b"ok!!"


def test_the_mm_hub_is_separate_from_the_gc_hub(pcie: FakePcie) -> None:
    raw = RawDriver(Gfx1100Front.build(EventKernel(), vram_bytes=VRAM_BYTES, pcie=pcie), pcie)
    raw.setup_vmid0("mm")
    va = VMID0_VA_START + 0x10_0000
    raw.map_page(va, PCIE_BASE, system=True)
    raw.flush_tlb()
    pcie.dma_write(PCIE_BASE, b"sram")
    assert bytes(raw.front.memory.mm.read(va, 4)) == b"sram"
    with pytest.raises(GpuMemoryFault, match="GC hub"):
        raw.front.gpu.read(va, 4)  # the engines' hub has no context yet


def test_a_pcie_side_attached_later_serves_system_pages() -> None:
    pcie = FakePcie(PCIE_BASE, 1 << 16)
    raw = RawDriver(Gfx1100Front.build(EventKernel(), vram_bytes=VRAM_BYTES), pcie)
    raw.setup_vmid0("gc")
    va = VMID0_VA_START + 0x10_0000
    raw.map_page(va, PCIE_BASE + 0x1000, system=True)
    raw.flush_tlb()
    with pytest.raises(GpuMemoryFault, match=f"fault at {va:#x}.*no PCIe host"):
        raw.front.gpu.read(va, 4)
    raw.front.memory.pcie = pcie
    pcie.dma_write(PCIE_BASE + 0x1000, b"late")
    assert bytes(raw.front.gpu.read(va, 4)) == b"late"


def aperture(raw: RawDriver, hub: str, low: int, high: int) -> None:
    """Program ``hub``'s system aperture to MC ``[low, high]`` (256 KB units, HIGH inclusive: section 4)."""
    raw.w(Reg[f"{hub}MC_VM_SYSTEM_APERTURE_LOW_ADDR"], low >> 18)
    raw.w(Reg[f"{hub}MC_VM_SYSTEM_APERTURE_HIGH_ADDR"], high >> 18)


def test_mc_addresses_reach_vram_only_inside_the_programmed_aperture(front: Gfx1100Front, pcie: FakePcie) -> None:
    raw = RawDriver(front, pcie)
    fb_base, fb_top = raw.fb_base, raw.fb_base + VRAM_BYTES - (16 << 20)  # FB_TOP: the last 16 MB block
    raw.put(DATA, b"data")
    raw.put(fb_top - fb_base + 0x3FFFC, b"edge")
    with pytest.raises(GpuMemoryFault, match="outside the VMID 0 page table range"):
        front.gpu.read(fb_base + DATA, 4)  # power-on: both registers 0, nothing bypasses the table
    raw.setup_vmid0("gc")  # LOW = FB_BASE >> 18, HIGH = FB_TOP >> 18 (AM's values)
    assert bytes(front.gpu.read(fb_base + DATA, 4)) == b"data"
    assert bytes(front.gpu.read(fb_top + 0x3FFFC, 4)) == b"edge"  # HIGH's 256 KB unit is inside
    with pytest.raises(GpuMemoryFault, match="outside the VMID 0 page table range"):
        front.gpu.read(fb_top + 0x40000, 4)  # in VRAM's FB range, but past the aperture: the walk faults
    with pytest.raises(GpuMemoryFault, match="MM hub"):
        front.memory.mm.read(fb_base + DATA, 4)  # each hub has its own aperture
    aperture(raw, "GC", fb_base + 0x100000, fb_base + 0x100000)
    with pytest.raises(GpuMemoryFault, match="outside the VMID 0 page table range"):
        front.gpu.read(fb_base + DATA, 4)  # a rewritten aperture takes effect at once (no TLB holds it)
    assert front.memory.gc_hub.aperture == (fb_base + 0x100000, fb_base + 0x140000)


def test_an_mc_address_outside_the_aperture_walks_the_page_table(front: Gfx1100Front, pcie: FakePcie) -> None:
    raw = RawDriver(front, pcie)
    mc = raw.fb_base + DATA
    raw.map_page(VMID0_VA_START + mc, DATA + 0x2000)  # table entries for offset ``mc`` ...
    raw.setup_vmid0("gc")
    raw.w(Reg.GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32, 0)  # ... which START = 0 makes the walk of VA ``mc``
    raw.put(DATA, b"flat")
    raw.put(DATA + 0x2000, b"walk")
    assert bytes(front.gpu.read(mc, 4)) == b"flat"  # inside the aperture: VRAM at mc - FB_BASE
    aperture(raw, "GC", 1 << 18, 0)  # LOW above HIGH: the aperture is closed
    assert front.memory.gc_hub.aperture == (0, 0)
    raw.flush_tlb()
    assert bytes(front.gpu.read(mc, 4)) == b"walk"  # the same MC address now goes through the page table


def test_a_fill_through_the_page_table_fills_each_run_in_place(pcie: FakePcie) -> None:
    raw = sdma_raw(pcie)
    va, pages = VMID0_VA_START + 0x400_0000, 32
    for page in range(pages):  # VRAM pages back to back (one run), then every fourth page on the PCIe side
        system = page % 4 == 3
        raw.map_page(va + page * 4096, PCIE_BASE + page * 4096 if system else DATA + page * 4096, system=system)
    raw.flush_tlb()
    memory = raw.front.gpu.memory
    runs = memory.runs(va, pages * 4096)
    assert len(runs) == pages // 4 * 2 and [run[1] for run in runs[:2]] == [3 * 4096, 4096]
    memory.fill(va + 4, pages * 4096 - 8, 0xA1B2C3D4, dword=True)
    vram = b"".join(raw.get(DATA + page * 4096, 4096) for page in range(pages) if page % 4 != 3)
    system = b"".join(pcie.dma_read(PCIE_BASE + page * 4096, 4096) for page in range(pages) if page % 4 == 3)
    word = (0xA1B2C3D4).to_bytes(4, "little")
    assert vram == bytes(4) + word * (len(vram) // 4 - 1)
    assert system == word * (len(system) // 4 - 1) + bytes(4)
    count_calls = load_benchmark("callcount").count_calls
    counts = {}
    for nbytes in (4096, 3 * 4096, pages // 2 * 4096, pages * 4096):  # 1, 1, 8 and 16 runs
        memory.fill(va, nbytes, 0, dword=False)  # the walk, once: its runs stay until the next TLB flush
        counts[nbytes] = count_calls(lambda nbytes=nbytes: memory.fill(va, nbytes, 0, dword=False))
    assert counts[4096] == counts[3 * 4096], "a run costs the same calls whatever its size"
    python, c = (more - fewer for more, fewer in zip(counts[pages * 4096], counts[pages // 2 * 4096], strict=True))
    # A VRAM run is a numpy fill (C calls only); a PCIe run is the bus's check and write (Python calls of the bus).
    assert python <= 4 * 10 and c <= 8 * 5, f"{python} Python and {c} C calls for 8 more runs (4 on the PCIe side)"
