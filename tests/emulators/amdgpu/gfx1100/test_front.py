"""The gfx1100 front end driven by raw register writes from the spec's tables (no tinyhil driver)."""

from __future__ import annotations

import struct

import pytest
from support.gfx1100 import (
    DATA,
    SDMA_RING,
    SDMA_RPTR,
    VRAM_BYTES,
    RawDriver,
    copy_linear,
)
from support.system_bus import FakePcie

from tinyhil.emulators.amdgpu import AmdGpu
from tinyhil.emulators.amdgpu.gfx1100 import Gfx1100Front, Gmc, RegisterFile
from tinyhil.emulators.kernel import EventKernel
from tinyhil.emulators.observe import Observed, Observer
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.spec.gfx1100_gmc import NAVI31_FB_BASE, VMID0_VA_START
from tinyhil.spec.gfx1100_regs import Reg
from tinyhil.spec.gfx1100_smu import SmuMsg

RING_VA = VMID0_VA_START + 0x10_0000
RPTR_VA = VMID0_VA_START + 0x20_0000
WPTR_VA = RPTR_VA + 0x100
SRC_VA, DST_VA = VMID0_VA_START + 0x40_0000, VMID0_VA_START + 0x50_0000


class RegisterLog(Observer):
    def __init__(self) -> None:
        self.accesses: list[tuple[int, int, bool]] = []

    def gpu_register(self, address: int, value: int, write: bool) -> None:
        self.accesses.append((address, value, write))


def map_sdma_queue(raw: RawDriver) -> None:
    for page in range(4):
        raw.map_page(RING_VA + page * 4096, SDMA_RING + page * 4096)
    raw.map_page(RPTR_VA, SDMA_RPTR)  # rptr write-back and wptr shadow share the page
    raw.flush_tlb()


def booted_sdma(raw: RawDriver) -> None:
    """Boot, map the SDMA ring, its pointers and the two data pages, bring SDMA0 queue 0 up."""
    raw.boot()
    map_sdma_queue(raw)
    raw.map_page(SRC_VA, DATA)
    raw.map_page(DST_VA, DATA + 0x10000)
    raw.flush_tlb()
    raw.sdma_up(RING_VA, RPTR_VA, WPTR_VA)


def test_raw_register_bring_up_runs_a_copy_linear_through_the_doorbell(raw: RawDriver) -> None:
    booted_sdma(raw)
    pattern = bytes(range(256)) * 16
    raw.put(DATA, pattern)
    wptr = raw.sdma_submit(copy_linear(DST_VA, SRC_VA, 4096))
    raw.run_until(lambda: raw.sdma_rptr() == wptr, "rptr write-back")
    assert raw.get(DATA + 0x10000, 4096) == pattern
    assert raw.sdma_rptr() == wptr == 28
    assert raw.r(Reg.SDMA0_QUEUE0_RB_RPTR) == 28  # the register reads the live pointer too
    assert raw.front.dropped_doorbells == []


def test_a_halted_sdma_engine_holds_the_doorbell_until_f32_cntl_unhalts_it(raw: RawDriver) -> None:
    booted_sdma(raw)
    raw.w(Reg.SDMA0_F32_CNTL, 1)  # halt
    raw.put(DATA, b"\x5a" * 64)
    wptr = raw.sdma_submit(copy_linear(DST_VA, SRC_VA, 64))
    raw.front.gpu.kernel.run_for(1_000_000)
    assert raw.sdma_rptr() == 0 and raw.get(DATA + 0x10000, 64) == bytes(64)
    raw.w(Reg.SDMA0_F32_CNTL, 0)
    raw.run_until(lambda: raw.sdma_rptr() == wptr, "the copy once unhalted")
    assert raw.get(DATA + 0x10000, 64) == b"\x5a" * 64


def test_pointer_writes_need_minor_ptr_update_while_the_queue_is_live(raw: RawDriver) -> None:
    raw.boot()
    map_sdma_queue(raw)
    raw.sdma_up(RING_VA, RPTR_VA, WPTR_VA)
    raw.w(Reg.SDMA0_QUEUE0_RB_WPTR, 0x40)
    assert raw.front.regs.stored(Reg.SDMA0_QUEUE0_RB_WPTR) == 0
    raw.w(Reg.SDMA0_QUEUE0_MINOR_PTR_UPDATE, 1)
    raw.w(Reg.SDMA0_QUEUE0_RB_WPTR, 0x40)
    assert raw.front.regs.stored(Reg.SDMA0_QUEUE0_RB_WPTR) == 0x40


def test_the_smu_answers_a_small_dpm_level_count_and_errors_for_unknown_messages(raw: RawDriver) -> None:
    raw.boot()
    result, count = raw.smu(SmuMsg.GetDpmFreqByIndex, 0 << 16 | 0xFF)
    assert (result, count) == (1, 2)
    assert raw.smu(SmuMsg.GetDpmFreqByIndex, 0 << 16 | 1) == (1, 2500)
    assert raw.smu(SmuMsg.GetSmuVersion)[1] == 0x004E_8500
    assert raw.smu(0x77, 0x1234) == (0xFE, 0x1234)  # UnknownCmd; the argument register is left as written
    assert raw.smu(SmuMsg.GetDpmFreqByIndex, 9 << 16 | 0xFF)[0] == 0xFF  # no such clock: Failed


def test_a_minimal_boot_sends_23_smu_messages(raw: RawDriver) -> None:
    raw.boot()
    assert len(raw.front.smu.messages) == 23  # 3 setup + 4 clocks x (count + 2 levels + min + max)


def test_the_smu_does_not_answer_before_its_firmware_is_loaded(raw: RawDriver) -> None:
    raw.w(Reg.MP1_SMN_C2PMSG_90, 0)
    raw.w(Reg.MP1_SMN_C2PMSG_66, SmuMsg.GetSmuVersion)
    assert raw.r(Reg.MP1_SMN_C2PMSG_90) == 0


def test_the_observer_logs_every_register_access_of_a_boot_in_order(raw: RawDriver) -> None:
    log = RegisterLog()
    with raw.front.observe(log):
        raw.boot()
    writes = [address for address, _, write in log.accesses if write]
    assert log.accesses[0] == (Reg.RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE, VRAM_BYTES >> 20, False)
    # the spec's order: doorbell aperture, MM hub context, bootloader, ring, commands, SMU, GC hub, booted mark
    firsts = [writes.index(reg) for reg in (Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, Reg.MMVM_CONTEXT0_CNTL,
              Reg.MP0_SMN_C2PMSG_35, Reg.MP0_SMN_C2PMSG_64, Reg.MP0_SMN_C2PMSG_67, Reg.MP1_SMN_C2PMSG_66,
              Reg.GCVM_CONTEXT0_CNTL, Reg.SCRATCH_REG7)]  # fmt: skip
    assert firsts == sorted(firsts)
    after = len(log.accesses)
    raw.r(Reg.CP_STAT)
    assert len(log.accesses) == after  # detached


def test_registers_beyond_bar5_are_reached_through_rsmu_and_pcie_index2(raw: RawDriver) -> None:
    raw.w(Reg.RCC_DEV0_EPF2_STRAP2, 0x1234_5678)  # dword 0x404D102, past the 1 MB BAR
    assert raw.front.regs.stored(Reg.RCC_DEV0_EPF2_STRAP2) == 0x1234_5678
    bar5 = raw.front.bar5
    bar5.write(Reg.BIF_BX0_PCIE_INDEX2 * 4, struct.pack("<I", (Reg.RCC_DEV0_EPF2_STRAP2 * 4) & 0xFFFF_FFFF))
    bar5.write(Reg.BIF_BX0_PCIE_INDEX2_HI * 4, struct.pack("<I", (Reg.RCC_DEV0_EPF2_STRAP2 * 4) >> 32))
    assert bar5.read(Reg.BIF_BX0_PCIE_DATA2 * 4, 4) == struct.pack("<I", 0x1234_5678)
    with pytest.raises(InvalidArgument, match="BAR5"):
        bar5.read(1 << 20, 4)


def test_mm_index_reads_vram_and_the_fixed_registers_answer_as_the_spec_says(raw: RawDriver) -> None:
    raw.put(0x3000, b"\x11\x22\x33\x44")
    raw.w(Reg.MM_INDEX, 0x3000 | 0x8000_0000)
    raw.w(Reg.MM_INDEX_HI, 0)
    assert raw.r(Reg.MM_DATA) == 0x4433_2211
    assert raw.r(Reg.MMMC_VM_FB_LOCATION_BASE) == 0x8000
    assert raw.r(Reg.MMMC_VM_FB_LOCATION_TOP) == 0x8000 + (VRAM_BYTES >> 24) - 1
    assert raw.r(Reg.BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL) == 0x7F000
    assert raw.r(Reg.MP0_SMN_C2PMSG_33) >> 31 == 1 and raw.r(Reg.DRIVER_SCRATCH_2) == 0
    raw.w(Reg.RLC_SAFE_MODE, 3)
    assert raw.r(Reg.RLC_SAFE_MODE) & 1 == 0


def test_section_10_registers_store_what_is_written_and_ras_status_reads_0(raw: RawDriver) -> None:
    values = (
        (Reg.GCVM_L2_CNTL, 0x8_0801),
        (Reg.MMVM_L2_CNTL3, 0x8013_0009),
        (Reg.IH_RB_CNTL, 0xC031_0021),
        (Reg.TCP_CNTL, 1 << 29),
        (Reg.RLC_CGTT_MGCG_OVERRIDE, 0x400),
        (Reg.SDMA1_UTCL1_PAGE, 0x0100_E000),
    )
    for reg, value in values:
        raw.w(reg, value)
        assert raw.r(reg) == value, reg.name
    raw.w(Reg.BIF_BX0_BIF_DOORBELL_INT_CNTL, 0x0600_0007)  # RAS interrupts disabled; status bits 0-2 written
    assert raw.r(Reg.BIF_BX0_BIF_DOORBELL_INT_CNTL) == 0x0600_0001  # bits 1-2 (RAS status) read 0: no RAS error
    flushes = raw.front.bar5.hdp_flushes
    raw.hdp_flush()
    assert raw.front.bar5.hdp_flushes == flushes + 1


def test_the_front_end_needs_the_gc_hubs_address_space() -> None:
    gmc = Gmc(64 << 20, fb_base=NAVI31_FB_BASE, regs=RegisterFile(Observed()))
    with pytest.raises(InvalidArgument, match="expected an AmdGpu on the GC hub's address space of <Gmc"):
        Gfx1100Front(AmdGpu(EventKernel()), gmc)
    with pytest.raises(InvalidArgument, match="GC hub's address space"):
        Gfx1100Front(AmdGpu(EventKernel(), memory=gmc.mm), gmc)


def test_the_page_tables_map_its_memory_not_map_memory(front: Gfx1100Front) -> None:
    with pytest.raises(StateError, match=r"gpu0.map_memory: the address space is translated by PageTableHub"):
        front.gpu.map_memory(0x1000, memoryview(bytearray(4096)))
    with pytest.raises(StateError, match="unmap_memory"):
        front.gpu.unmap_memory(0x1000)


def test_mode1_reset_through_the_debug_mailbox_returns_the_blocks_to_cold(raw: RawDriver, pcie: FakePcie) -> None:
    raw.boot()
    raw.put(DATA, b"kept")
    raw.w(Reg.MP1_SMN_C2PMSG_54, 0)
    raw.w(Reg.MP1_SMN_C2PMSG_53, 0)
    raw.w(Reg.MP1_SMN_C2PMSG_75, 2)  # DEBUGSMC Mode1Reset (section 11 step 4a)
    assert raw.r(Reg.MP1_SMN_C2PMSG_54) == 1
    assert raw.r(Reg.MP0_SMN_C2PMSG_81) == 0 and raw.r(Reg.SCRATCH_REG7) == 0
    assert not raw.front.smu.alive and pcie.memory == bytearray(len(pcie.memory))
    assert raw.get(DATA, 4) == b"kept"  # VRAM keeps its contents
    assert raw.r(Reg.MMMC_VM_SYSTEM_APERTURE_HIGH_ADDR) == 0 and raw.front.memory.mm_hub.aperture == (0, 0)
    RawDriver(raw.front, pcie).boot()  # and a cold boot runs again (a fresh driver: its PSP ring starts at 0)


@pytest.mark.parametrize(
    ("access", "message"),
    [
        (lambda f: f.bar5.read(2, 4), r"BAR5 access 0x2\+0x4, expected whole aligned"),
        (lambda f: f.bar5.write(0, b"\0\0"), r"BAR5 access 0x0\+0x2"),
        (lambda f: f.bar5.write((1 << 20) - 4, bytes(8)), "BAR5"),
        (lambda f: f.vram_read(VRAM_BYTES - 4, 8), "BAR0"),
        (lambda f: f.vram_write(VRAM_BYTES, b"\0"), "BAR0"),
        (lambda f: f.doorbell_write(8 << 10, bytes(8)), "BAR2"),
    ],
)
def test_bad_bar_accesses_are_typed_errors_and_change_nothing(
    front: Gfx1100Front, access: object, message: str
) -> None:
    before = front.vram_read(VRAM_BYTES - 4, 4)
    with pytest.raises(InvalidArgument, match=message):
        access(front)  # type: ignore[operator]
    assert front.vram_read(VRAM_BYTES - 4, 4) == before and front.dropped_doorbells == []


def test_mm_data_past_vram_is_a_typed_error(raw: RawDriver) -> None:
    raw.w(Reg.MM_INDEX, 0x8000_0000)
    raw.w(Reg.MM_INDEX_HI, 1)  # VRAM offset 2 GB
    with pytest.raises(InvalidArgument, match="MM_INDEX VRAM offset 0x80000000"):
        raw.r(Reg.MM_DATA)


def test_several_observers_each_see_every_register_access(raw: RawDriver) -> None:
    first, second = RegisterLog(), RegisterLog()
    with raw.front.observe(first), raw.front.observe(second):
        raw.w(Reg.SCRATCH_REG6, 5)
        assert raw.r(Reg.SCRATCH_REG6) == 5
    assert first.accesses == second.accesses == [(Reg.SCRATCH_REG6, 5, True), (Reg.SCRATCH_REG6, 5, False)]
