"""MEC queues from HQD registers (banked by GRBM_GFX_CNTL) and doorbell routing by the programmed ranges."""

from __future__ import annotations

import struct

from support.gfx1100 import (
    DATA,
    MEC_DOORBELL,
    MEC_RING,
    MEC_RPTR,
    MEC_WPTR,
    SDMA_DOORBELL,
    SDMA_RING,
    SDMA_RPTR,
    SDMA_WPTR,
    RawDriver,
)

from tinyhil.spec.amdgpu_pm4 import (
    PM4_HEADER_COUNT,
    PM4_HEADER_OPCODE,
    PM4_HEADER_TYPE,
    PM4_TYPE_3,
    WRITE_DATA_DST_SEL,
    Pm4Op,
    WriteDataDstSel,
)
from tinyhil.spec.amdgpu_sdma import SDMA_HEADER_OP, SdmaOp
from tinyhil.spec.gfx1100_gmc import VMID0_VA_START
from tinyhil.spec.gfx1100_regs import Reg

MEC_RING_VA = VMID0_VA_START + 0x60_0000
MEC_PTRS_VA = VMID0_VA_START + 0x61_0000
SDMA_RING_VA = VMID0_VA_START + 0x10_0000
SDMA_PTRS_VA = VMID0_VA_START + 0x20_0000
TARGET_VA = VMID0_VA_START + 0x70_0000
ME1 = 1 << 2  # GRBM_GFX_CNTL.meid = 1, pipe 0, queue 0


def write_data(va: int, value: int) -> bytes:
    """PM4 WRITE_DATA of one dword to memory."""
    header = PM4_HEADER_TYPE.put(PM4_TYPE_3) | PM4_HEADER_COUNT.put(3) | PM4_HEADER_OPCODE.put(Pm4Op.WRITE_DATA)
    control = WRITE_DATA_DST_SEL.put(WriteDataDstSel.MEMORY)
    return struct.pack("<5I", header, control, va & 0xFFFF_FFFF, va >> 32, value)


def sdma_write(va: int, value: int) -> bytes:
    """SDMA WRITE (linear) of one dword."""
    return struct.pack("<5I", SDMA_HEADER_OP.put(SdmaOp.WRITE), va & 0xFFFF_FFFF, va >> 32, 0, value)


def map_queues(raw: RawDriver) -> None:
    raw.w(Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, 1)
    raw.setup_vmid0("gc")
    raw.setup_vmid0("mm")
    raw.map_page(MEC_RING_VA, MEC_RING)
    raw.map_page(MEC_PTRS_VA, MEC_RPTR)
    for page in range(4):
        raw.map_page(SDMA_RING_VA + page * 4096, SDMA_RING + page * 4096)
    raw.map_page(SDMA_PTRS_VA, SDMA_RPTR)
    raw.map_page(TARGET_VA, DATA)
    raw.flush_tlb()


def mec_up(raw: RawDriver, *, bank: int = ME1, doorbell: int = MEC_DOORBELL) -> None:
    """Section 9 / 11 steps 14-16: MEC doorbell range, HQD registers of the bank, CP_HQD_ACTIVE, MEC unhalted."""
    raw.w(Reg.CP_MEC_DOORBELL_RANGE_LOWER, 0)
    raw.w(Reg.CP_MEC_DOORBELL_RANGE_UPPER, 0xF8)
    raw.w(Reg.GRBM_GFX_CNTL, bank)
    raw.w(Reg.CP_HQD_VMID, 0)
    raw.w(Reg.CP_HQD_PQ_BASE, MEC_RING_VA >> 8 & 0xFFFF_FFFF)
    raw.w(Reg.CP_HQD_PQ_BASE_HI, MEC_RING_VA >> 40)
    raw.w(Reg.CP_HQD_PQ_RPTR, 0)
    raw.w(Reg.CP_HQD_PQ_RPTR_REPORT_ADDR, MEC_PTRS_VA & 0xFFFF_FFFF)
    raw.w(Reg.CP_HQD_PQ_RPTR_REPORT_ADDR_HI, MEC_PTRS_VA >> 32)
    raw.w(Reg.CP_HQD_PQ_WPTR_POLL_ADDR, (MEC_PTRS_VA + 0x100) & 0xFFFF_FFFF)
    raw.w(Reg.CP_HQD_PQ_WPTR_POLL_ADDR_HI, (MEC_PTRS_VA + 0x100) >> 32)
    raw.w(Reg.CP_HQD_PQ_DOORBELL_CONTROL, 1 << 30 | doorbell)
    raw.w(Reg.CP_HQD_PQ_CONTROL, 9 | 5 << 8)  # queue_size 9: 2 ** 10 dwords = 4 KB; rptr_block_size 5
    raw.w(Reg.CP_HQD_ACTIVE, 1)
    raw.w(Reg.GRBM_GFX_CNTL, 0)
    raw.w(Reg.CP_MEC_RS64_CNTL, 1 << 26)  # pipe0_reset 0, pipe0_active 1, halt 0


def mec_submit(raw: RawDriver, packet: bytes, wptr_dwords: int) -> int:
    raw.put(MEC_RING + wptr_dwords * 4, packet)
    wptr_dwords += len(packet) // 4
    raw.put(MEC_WPTR, wptr_dwords.to_bytes(8, "little"))
    raw.doorbell(MEC_DOORBELL, wptr_dwords)
    return wptr_dwords


def target(raw: RawDriver) -> int:
    return int(struct.unpack("<I", raw.get(DATA, 4))[0])


def test_hqd_programming_and_cp_hqd_active_run_a_pm4_queue(raw: RawDriver) -> None:
    map_queues(raw)
    mec_up(raw)
    raw.w(Reg.GRBM_GFX_CNTL, ME1)
    assert raw.r(Reg.CP_HQD_ACTIVE) == 1
    raw.w(Reg.GRBM_GFX_CNTL, 0)
    assert raw.r(Reg.CP_HQD_ACTIVE) == 0  # another bank: nothing mapped there
    wptr = mec_submit(raw, write_data(TARGET_VA, 0xC0FFEE), 0)
    raw.run_until(lambda: int.from_bytes(raw.get(MEC_RPTR, 8), "little") == wptr, "PM4 rptr report")
    assert target(raw) == 0xC0FFEE and wptr == 5


def test_dequeue_stops_the_queue(raw: RawDriver) -> None:
    map_queues(raw)
    mec_up(raw)
    raw.w(Reg.GRBM_GFX_CNTL, ME1)
    raw.w(Reg.CP_HQD_DEQUEUE_REQUEST, 2)
    raw.w(Reg.SPI_COMPUTE_QUEUE_RESET, 1)
    raw.poll(lambda: raw.r(Reg.CP_HQD_ACTIVE) & 1 == 0, "dequeue")
    raw.w(Reg.GRBM_GFX_CNTL, 0)
    mec_submit(raw, write_data(TARGET_VA, 0xBAD), 0)
    raw.front.gpu.kernel.run_for(1_000_000)
    assert target(raw) == 0 and MEC_DOORBELL in raw.front.dropped_doorbells
    assert raw.front.gpu.queues == ()


def test_hqd_registers_are_banked_by_grbm_gfx_cntl(raw: RawDriver) -> None:
    raw.w(Reg.GRBM_GFX_CNTL, ME1)
    raw.w(Reg.CP_HQD_PQ_BASE, 0x1111)
    raw.w(Reg.GRBM_GFX_CNTL, ME1 | 1 << 8)  # queue 1
    assert raw.r(Reg.CP_HQD_PQ_BASE) == 0
    raw.w(Reg.CP_HQD_PQ_BASE, 0x2222)
    raw.w(Reg.GRBM_GFX_CNTL, ME1)
    assert raw.r(Reg.CP_HQD_PQ_BASE) == 0x1111
    raw.w(Reg.GRBM_GFX_CNTL, 3 << 4)  # vmid 3
    raw.w(Reg.SH_MEM_CONFIG, 0xC00C)
    raw.w(Reg.GRBM_GFX_CNTL, 4 << 4)
    assert raw.r(Reg.SH_MEM_CONFIG) == 0
    assert raw.r(Reg.CP_HQD_PQ_BASE) == 0  # bank (0, 0, 0)


def test_only_the_queue_whose_programmed_range_holds_the_doorbell_runs(raw: RawDriver) -> None:
    map_queues(raw)
    mec_up(raw)
    raw.sdma_up(SDMA_RING_VA, SDMA_PTRS_VA, SDMA_PTRS_VA + 0x100)
    # Both rings hold a write; only the MEC's doorbell rings: the SDMA queue must not run.
    raw.put(SDMA_RING, sdma_write(TARGET_VA + 4, 0x5D3A))
    raw.put(SDMA_WPTR, (20).to_bytes(8, "little"))
    wptr = mec_submit(raw, write_data(TARGET_VA, 0x3EC), 0)
    raw.run_until(lambda: target(raw) == 0x3EC, "MEC write")
    raw.front.gpu.kernel.run_for(1_000_000)
    assert struct.unpack("<I", raw.get(DATA + 4, 4))[0] == 0
    assert int.from_bytes(raw.get(SDMA_RPTR, 8), "little") == 0
    # A doorbell inside the MEC range that no HQD uses, one outside every range: dropped.
    raw.doorbell(0x40, wptr)
    raw.doorbell(0x1000, 20)
    assert raw.front.dropped_doorbells == [0x40, 0x1000]
    raw.doorbell(SDMA_DOORBELL, 20)
    raw.run_until(lambda: struct.unpack("<I", raw.get(DATA + 4, 4))[0] == 0x5D3A, "SDMA write")


def test_doorbells_need_the_aperture_and_the_s2a_port(raw: RawDriver) -> None:
    map_queues(raw)
    raw.sdma_up(SDMA_RING_VA, SDMA_PTRS_VA, SDMA_PTRS_VA + 0x100)
    raw.put(SDMA_RING, sdma_write(TARGET_VA, 0x77))
    raw.w(Reg.S2A_DOORBELL_ENTRY_2_CTRL, 0)  # port 2 disabled
    raw.doorbell(SDMA_DOORBELL, 20)
    raw.w(Reg.S2A_DOORBELL_ENTRY_2_CTRL, 1 | 0x200 << 7 | 4 << 17)
    raw.w(Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, 0)
    raw.doorbell(SDMA_DOORBELL, 20)
    raw.front.gpu.kernel.run_for(1_000_000)
    assert target(raw) == 0 and raw.front.dropped_doorbells == [SDMA_DOORBELL, SDMA_DOORBELL]
    raw.w(Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, 1)
    raw.doorbell(SDMA_DOORBELL, 20)
    raw.run_until(lambda: target(raw) == 0x77, "SDMA write")
