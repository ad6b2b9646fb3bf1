"""IH ring 0 (``ih.py``) and the VM fault registers (``vm_faults.py``): the IV's bytes, wrap-around, write-back,
overflow, a disabled ring, and the IVs a stopped SDMA / MEC queue and a VM fault post."""

from __future__ import annotations

import struct

import pytest
from support.gfx1100 import IH_RING, IH_RING_BYTES, IH_WPTR, SDMA_RING, SDMA_RPTR, RawDriver, copy_linear

from tinyhil.emulators.amdgpu.errors import GpuQueueError
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu_sdma import SDMA_HEADER_OP
from tinyhil.spec.gfx1100_gmc import VMID0_VA_START
from tinyhil.spec.gfx1100_ih import (
    IhClientId,
    IhSourceId,
    InterruptVector,
    Utcl2ClientId,
    fault_page,
    fault_src_data,
)
from tinyhil.spec.gfx1100_regs import Reg

from .test_queues import map_queues, mec_submit, mec_up

IV = 32


def words(entry: bytes) -> tuple[int, ...]:
    return struct.unpack("<8I", entry)


def post(raw: RawDriver, source: int = IhSourceId.SDMA_TRAP, src0: int = 0) -> bool:
    return raw.front.ih.post(IhClientId.GFX, source, src_data=(src0, 0, 0, 0))


def test_an_iv_packs_into_the_eight_dwords_linux_decodes() -> None:
    iv = InterruptVector(0x0A, 0xB7, ring_id=0x14, vmid=0x3, vmid_type=1, timestamp=0x1234_89AB_CDEF,
                         timestamp_src=1, pasid=0x8001, node_id=0x5, src_data=(1, 2, 3, 0xFFFF_FFFF))  # fmt: skip
    # dw0: client 7:0, src 15:8, ring 23:16, vmid 27:24, vmid_type 31; dw1-2: timestamp 47:0, timestamp_src dw2[31];
    # dw3: pasid 15:0, node_id 23:16; dw4-7: src_data (amdgpu_ih_decode_iv_helper)
    expected = (0x8314_B70A, 0x89AB_CDEF, 0x8000_1234, 0x0005_8001, 1, 2, 3, 0xFFFF_FFFF)
    assert words(iv.pack()) == expected
    assert InterruptVector.unpack(iv.pack()) == iv


@pytest.mark.parametrize(
    ("fields", "match"),
    [({"client_id": 0x100}, "client_id=256"), ({"timestamp": 1 << 48}, "48-bit"), ({"src_data": (1, 2)}, "four")],
)
def test_an_iv_field_that_does_not_fit_is_refused(fields: dict[str, object], match: str) -> None:
    values: dict[str, object] = {"client_id": 0x0A, "source_id": 0, **fields}
    with pytest.raises(InvalidArgument, match=match):
        InterruptVector(**values)  # type: ignore[arg-type]


def test_a_vm_fault_s_src_data_carries_the_page_as_gmc_v11_decodes_it() -> None:
    va = 0xABCD_EF12_3456  # 48 bits
    data = fault_src_data(va)
    assert data[0] == va >> 12 & 0xFFFF_FFFF and data[1] & 0xF == va >> 44
    assert fault_page(data) == va & ~0xFFF


def test_a_posted_iv_lands_at_the_write_offset_with_the_gpu_timestamp(raw: RawDriver) -> None:
    raw.setup_vmid0("mm")
    raw.ih_up()
    raw.front.gpu.kernel.run_for(12_340)
    assert post(raw, IhSourceId.CP_BAD_OPCODE_ERROR, 0x42)
    assert raw.r(Reg.IH_RB_WPTR) == IV
    entry = raw.ih_entries(0, 1)[0]
    timestamp = raw.front.gpu.timestamp()
    assert timestamp == 1234  # 100 MHz: 10 ns ticks
    assert words(entry) == (0x0000_B70A, timestamp, 0, 0, 0x42, 0, 0, 0)


def test_the_write_offset_wraps_at_the_ring_size(raw: RawDriver) -> None:
    raw.setup_vmid0("mm")
    raw.ih_up()
    slots = IH_RING_BYTES // IV
    for number in range(slots - 1):
        assert post(raw, src0=number)
    assert raw.r(Reg.IH_RB_WPTR) == (slots - 1) * IV
    raw.w(Reg.IH_RB_RPTR, 3 * IV)  # the driver read three
    for number in range(slots - 1, slots + 2):
        assert post(raw, src0=number)
    assert raw.r(Reg.IH_RB_WPTR) == 2 * IV  # 7, then 0, 1 of the next lap
    assert [words(e)[4] for e in raw.ih_entries(0, 2)] == [slots, slots + 1]
    assert words(raw.ih_entries((slots - 1) * IV, 1)[0])[4] == slots - 1


def test_the_write_pointer_is_written_back_when_enabled(raw: RawDriver) -> None:
    raw.setup_vmid0("mm")
    raw.ih_up(writeback=True)
    post(raw)
    post(raw)
    assert struct.unpack("<I", raw.get(IH_WPTR, 4))[0] == raw.r(Reg.IH_RB_WPTR) == 2 * IV


def test_without_write_back_the_address_is_not_written(raw: RawDriver) -> None:
    raw.setup_vmid0("mm")
    raw.ih_up()
    raw.put(IH_WPTR, b"\xee" * 4)
    post(raw)
    assert raw.get(IH_WPTR, 4) == b"\xee" * 4


def test_a_full_ring_drops_the_iv_and_sets_rb_overflow_until_cleared(raw: RawDriver) -> None:
    raw.setup_vmid0("mm")
    raw.ih_up()
    slots = IH_RING_BYTES // IV
    for number in range(slots - 1):  # one slot stays empty: wptr == rptr means empty
        assert post(raw, src0=number)
    before = raw.get(IH_RING, IH_RING_BYTES)
    assert not post(raw, src0=99)
    assert raw.r(Reg.IH_RB_WPTR) == (slots - 1) * IV | 1  # offset unchanged, rb_overflow
    assert raw.get(IH_RING, IH_RING_BYTES) == before  # nothing overwritten
    assert raw.front.ih.dropped[-1][1].startswith("IH ring 0 is full")
    cntl = raw.r(Reg.IH_RB_CNTL)
    raw.w(Reg.IH_RB_CNTL, cntl | 1 << 31)  # wptr_overflow_clear
    assert raw.r(Reg.IH_RB_WPTR) == (slots - 1) * IV
    assert not post(raw)  # still full, and clear held at 1: no overflow bit
    assert raw.r(Reg.IH_RB_WPTR) == (slots - 1) * IV


def test_a_disabled_ring_posts_nothing(raw: RawDriver) -> None:
    raw.setup_vmid0("mm")
    raw.ih_up()
    raw.w(Reg.IH_RB_CNTL, raw.r(Reg.IH_RB_CNTL) & ~(1 << 17))  # rb_enable without enable_intr
    before = raw.get(IH_RING, IH_RING_BYTES)
    assert not post(raw)
    assert raw.r(Reg.IH_RB_WPTR) == 0 and raw.get(IH_RING, IH_RING_BYTES) == before
    assert raw.front.ih.posted == 0 and "not enabled" in raw.front.ih.dropped[-1][1]


def sdma_queue(raw: RawDriver) -> None:
    """SDMA0 queue 0 on MC addresses (the GC hub's aperture), IH ring 0 up."""
    raw.w(Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, 1)
    raw.setup_vmid0("gc")
    raw.setup_vmid0("mm")
    raw.ih_up()
    raw.sdma_up(raw.mc(SDMA_RING), raw.mc(SDMA_RPTR), raw.mc(SDMA_RPTR + 0x100))


def test_an_sdma_queue_stopped_by_an_unknown_opcode_posts_a_queue_hang_iv(raw: RawDriver) -> None:
    sdma_queue(raw)
    raw.sdma_submit(struct.pack("<I", SDMA_HEADER_OP.put(0x7F)))
    with pytest.raises(GpuQueueError, match="unknown SDMA opcode 0x7f"):
        raw.run_until(lambda: False, "the stop")
    client, source, ring_id = (IhClientId.GFX, IhSourceId.SDMA_QUEUE_HANG, 0x00)  # instance 0, queue 0
    assert words(raw.ih_entries(0, 1)[0])[0] == ring_id << 16 | source << 8 | client
    assert raw.r(Reg.IH_RB_WPTR) == IV


def test_a_mec_queue_stopped_by_a_bad_opcode_posts_the_cp_s_bad_opcode_iv(raw: RawDriver) -> None:
    map_queues(raw)
    raw.ih_up()
    mec_up(raw)
    mec_submit(raw, struct.pack("<I", 3 << 30 | 0x7E << 8), 0)  # type 3, opcode 0x7E: not a PM4 opcode
    with pytest.raises(GpuQueueError, match="unknown PM4 opcode 0x7e"):
        raw.run_until(lambda: False, "the stop")
    dw0, *_, doorbell = words(raw.ih_entries(0, 1)[0])[:5]
    ring_id = 1 << 2  # me 1 [3:2], pipe 0 [1:0], queue 0 [6:4] (gfx_v11_0_handle_priv_fault)
    assert dw0 == ring_id << 16 | IhSourceId.CP_BAD_OPCODE_ERROR << 8 | IhClientId.GFX
    assert doorbell == 0x18 // 4  # src_data[0]: the queue's doorbell in dwords


def test_a_vm_fault_latches_the_status_and_page_and_posts_the_utcl2_fault_iv(raw: RawDriver) -> None:
    sdma_queue(raw)
    bad = VMID0_VA_START + 0x300_0000 + 0x123  # no PTE
    raw.sdma_submit(copy_linear(raw.mc(0x600000), bad, 64))
    with pytest.raises(GpuQueueError, match=f"{bad:#x}"):
        raw.run_until(lambda: False, "the fault")
    status = raw.r(Reg.GCVM_L2_PROTECTION_FAULT_STATUS)
    assert status == Utcl2ClientId.SDMA0 << 9 | 1 << 4  # cid [17:9], permission_faults = valid [7:4]
    page = bad >> 12
    assert (raw.r(Reg.GCVM_L2_PROTECTION_FAULT_ADDR_LO32), raw.r(Reg.GCVM_L2_PROTECTION_FAULT_ADDR_HI32)) == (
        page & 0xFFFF_FFFF, page >> 32)  # fmt: skip
    dw = words(raw.ih_entries(0, 1)[0])
    assert dw[0] == 0x08 << 16 | IhSourceId.UTCL2_FAULT << 8 | IhClientId.GFX  # ring_id prot_valid, vmid 0, GC hub
    assert fault_page((dw[4], dw[5], dw[6], dw[7])) == bad & ~0xFFF
    raw.w(Reg.GCVM_L2_PROTECTION_FAULT_CNTL, 1)  # clear_protection_fault_status_addr
    assert raw.r(Reg.GCVM_L2_PROTECTION_FAULT_STATUS) == raw.r(Reg.GCVM_L2_PROTECTION_FAULT_ADDR_LO32) == 0
    assert raw.r(Reg.GCVM_L2_PROTECTION_FAULT_CNTL) == 0


def test_a_second_fault_before_the_clear_sets_more_faults_and_keeps_the_first_page(raw: RawDriver) -> None:
    raw.setup_vmid0("mm")
    raw.ih_up()
    faults = raw.front.vm_faults
    faults.fault(0x5000, cid=Utcl2ClientId.CPC)
    faults.fault(0x9000, cid=Utcl2ClientId.SDMA1)
    assert raw.r(Reg.GCVM_L2_PROTECTION_FAULT_STATUS) == 1 | Utcl2ClientId.CPC << 9 | 1 << 4
    assert raw.r(Reg.GCVM_L2_PROTECTION_FAULT_ADDR_LO32) == 0x5
    assert raw.r(Reg.IH_RB_WPTR) == 2 * IV  # each fault posts its IV
    faults.fault(0x7000, cid=Utcl2ClientId.TCP, mm_hub=True)
    dw0 = words(raw.ih_entries(2 * IV, 1)[0])[0]
    assert dw0 == 1 << 31 | 0x08 << 16 | 0 << 8 | IhClientId.VMC  # vmid_type 1: the MM hub
    assert raw.r(Reg.MMVM_L2_PROTECTION_FAULT_ADDR_LO32) == 0x7
