"""The gfx1100 register table against the absolute dword addresses docs/gfx1100.md states."""

from __future__ import annotations

import pytest

from tinyhil.spec.gfx1100_regs import IP_BASES, HwIp, Reg, reg_address

# (register, absolute dword) pairs the spec writes out (sections 2.3, 5, 6, 8, 9, 10, 11).
SPEC_ADDRESSES = [
    (Reg.RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE, 0xDE3),
    (Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, 0xDE0),
    (Reg.BIF_BX0_BIF_DOORBELL_INT_CNTL, 0xE1E),
    (Reg.BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL, 0xE4D),
    (Reg.BIF_BX_PF0_RSMU_INDEX, 0x14),
    (Reg.BIF_BX_PF0_RSMU_DATA, 0x15),
    (Reg.RCC_DEV0_EPF2_STRAP2, 0x404D102),
    (Reg.S2A_DOORBELL_ENTRY_0_CTRL, 0x507A40),
    (Reg.S2A_DOORBELL_ENTRY_2_CTRL, 0x507A42),
    (Reg.S2A_DOORBELL_ENTRY_3_CTRL, 0x507A43),
    (Reg.MP0_SMN_C2PMSG_33, 0x16061),
    (Reg.MP0_SMN_C2PMSG_35, 0x16063),
    (Reg.MP0_SMN_C2PMSG_64, 0x16080),
    (Reg.MP0_SMN_C2PMSG_67, 0x16083),
    (Reg.MP0_SMN_C2PMSG_71, 0x16087),
    (Reg.MP0_SMN_C2PMSG_81, 0x16091),
    (Reg.MP1_SMN_C2PMSG_66, 0x16282),
    (Reg.MP1_SMN_C2PMSG_82, 0x16292),
    (Reg.MP1_SMN_C2PMSG_90, 0x1629A),
    (Reg.MP1_SMN_C2PMSG_75, 0x1628B),
    (Reg.MP1_SMN_C2PMSG_53, 0x16275),
    (Reg.MP1_SMN_C2PMSG_54, 0x16276),
    (Reg.MMMC_VM_FB_LOCATION_BASE, 0x1A8EC),
    (Reg.MMMC_VM_FB_LOCATION_TOP, 0x1A8ED),
    (Reg.SDMA0_QUEUE0_RB_CNTL, 0x12E0),
    (Reg.SDMA0_QUEUE0_RB_RPTR_ADDR_LO, 0x12E9),
    (Reg.SDMA0_QUEUE0_DOORBELL, 0x12F2),
    (Reg.SDMA0_QUEUE0_DOORBELL_OFFSET, 0x130B),
    (Reg.SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO, 0x1313),
    (Reg.SDMA0_QUEUE0_MINOR_PTR_UPDATE, 0x1315),
    (Reg.SDMA0_CNTL, 0x127C),
    (Reg.SDMA0_F32_CNTL, 0xF89A),
    (Reg.GRBM_GFX_CNTL, 0xA900),
    (Reg.CP_MQD_BASE_ADDR, 0x3209),
    (Reg.CP_HQD_ACTIVE, 0x320B),
    (Reg.CP_HQD_PQ_DOORBELL_CONTROL, 0x3218),
    (Reg.CP_HQD_PQ_CONTROL, 0x321A),
    (Reg.CP_HQD_DEQUEUE_REQUEST, 0x3221),
    (Reg.CP_HQD_PQ_WPTR_HI, 0x3240),
    (Reg.CP_MEC_DOORBELL_RANGE_LOWER, 0x305C),
    (Reg.CP_MEC_RS64_CNTL, 0xC904),
    (Reg.CP_MEC_RS64_PRGRM_CNTR_START_HI, 0xC938),
    (Reg.SPI_COMPUTE_QUEUE_RESET, 0x31D3),
    (Reg.SH_MEM_CONFIG, 0xA9E4),
    (Reg.CP_STAT, 0x21A0),
    (Reg.RLC_RLCS_BOOTLOAD_STATUS, 0xEE82),
    (Reg.RLC_SAFE_MODE, 0xA980),
    (Reg.SCRATCH_REG7, 0xC047),
    (Reg.SCRATCH_REG6, 0xC046),
    (Reg.GCVM_L2_PROTECTION_FAULT_STATUS, 0x2828),
    (Reg.HDP_MEM_POWER_CTRL, 0xFF4),
]
# Section 4's per-hub registers: the GC hub's (GCMC_VM_* / GCVM_*) and the MM hub's (MMMC_VM_* / MMVM_*).
HUB_REGISTERS = [
    "MC_VM_AGP_BASE", "MC_VM_AGP_BOT", "MC_VM_AGP_TOP", "MC_VM_SYSTEM_APERTURE_LOW_ADDR",
    "MC_VM_SYSTEM_APERTURE_HIGH_ADDR", "MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB",
    "MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB",
    "MC_VM_MX_L1_TLB_CNTL", "VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32", "VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32",
    "VM_L2_PROTECTION_FAULT_CNTL2", "VM_L2_CNTL", "VM_L2_CNTL2", "VM_L2_CNTL3", "VM_L2_CNTL4", "VM_L2_CNTL5",
    "VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32", "VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32",
    "VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32", "VM_INVALIDATE_ENG0_ADDR_RANGE_LO32",
    "VM_INVALIDATE_ENG17_ADDR_RANGE_HI32", "VM_CONTEXT0_CNTL",
]  # fmt: skip


@pytest.mark.parametrize(("reg", "address"), SPEC_ADDRESSES, ids=lambda v: getattr(v, "name", hex(v)))
def test_each_register_sits_at_the_address_the_spec_gives(reg: Reg, address: int) -> None:
    assert reg == address


@pytest.mark.parametrize("name", HUB_REGISTERS)
def test_each_hub_register_exists_for_both_hubs_in_its_ip(name: str) -> None:
    gc, mm = Reg[f"GC{name}"], Reg[f"MM{name}"]
    assert IP_BASES[HwIp.GC][0] <= gc < IP_BASES[HwIp.GC][1]  # GC 11.0.0 segment 0
    assert IP_BASES[HwIp.MMHUB][0] <= mm < IP_BASES[HwIp.MMHUB][1]  # MMHUB 3.0.0 segment 0


def test_the_invalidate_ranges_of_engines_0_to_17_are_consecutive_pairs() -> None:
    for hub in ("GC", "MM"):
        first = Reg[f"{hub}VM_INVALIDATE_ENG0_ADDR_RANGE_LO32"]
        assert [Reg[f"{hub}VM_INVALIDATE_ENG{engine}_ADDR_RANGE_{half}"] - first for engine in range(18)
                for half in ("LO32", "HI32")] == list(range(36))  # fmt: skip


def test_no_two_registers_share_an_address() -> None:
    values = [member.value for member in Reg.__members__.values()]
    assert len(values) == len(set(values)), "an IntEnum alias hides a duplicated address"


def test_reg_address_adds_the_segment_base() -> None:
    assert reg_address(HwIp.NBIF, 2, 0xC3) == 0xDE3
    assert reg_address(HwIp.GC, 1, 0x589A) == Reg.SDMA0_F32_CNTL
    assert IP_BASES[HwIp.SDMA0] == IP_BASES[HwIp.GC]
