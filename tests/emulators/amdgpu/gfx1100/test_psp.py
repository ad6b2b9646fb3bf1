"""The PSP: the spec's load order is accepted; bad images, bad order and unknown commands get a PSP status."""

from __future__ import annotations

import struct

import pytest
from support.gfx1100 import BOOTLOADER_ORDER, IP_FW_ORDER, MSG1, TMR, TOC_TYPE, RawDriver

from tinyhil.amdgpu.firmware import make_image
from tinyhil.spec.gfx1100_boot import (
    PSP_BL_READY,
    PSP_RESPONSE_READY,
    GfxCmdId,
    GfxCtrlCmd,
    PspBootloaderCmd,
    PspFwType,
    PspStatus,
)
from tinyhil.spec.gfx1100_regs import Reg


def with_size(image: bytes, size_bytes: int) -> bytes:
    """``image`` with its header's size_bytes replaced."""
    return struct.pack("<I", size_bytes) + image[4:]


def ready_for_commands(raw: RawDriver) -> None:
    raw.w(Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, 1)
    raw.setup_vmid0("mm")
    raw.boot_sos()
    raw.create_ring()


def test_the_load_order_of_the_spec_is_accepted(raw: RawDriver) -> None:
    raw.boot()
    psp = raw.front.psp
    assert psp.components == [command for _, command in BOOTLOADER_ORDER]
    assert psp.firmware == [PspFwType.SMU, *(fw_type for fw_type, _ in IP_FW_ORDER)]
    order = [GfxCmdId.LOAD_TOC, GfxCmdId.LOAD_IP_FW, GfxCmdId.SETUP_TMR, *[GfxCmdId.LOAD_IP_FW] * len(IP_FW_ORDER)]
    assert [cmd for cmd, _ in psp.commands] == [*order, GfxCmdId.AUTOLOAD_RLC]
    assert all(status == 0 for _, status in psp.commands)
    assert psp.tmr == (raw.mc(TMR), 16 << 20) and psp.rlc_autoloaded


def test_a_firmware_whose_header_size_does_not_match_is_rejected_with_the_psp_status(raw: RawDriver) -> None:
    ready_for_commands(raw)
    toc = raw.sos_components()[TOC_TYPE]
    raw.put(MSG1, toc)
    assert raw.psp_command(GfxCmdId.LOAD_TOC, raw.mc(MSG1) & 0xFFFF_FFFF, raw.mc(MSG1) >> 32, len(toc))[0] == 0
    image = raw.payload("smu_13_0_0.bin")
    assert raw.load_fw(PspFwType.SMU, with_size(image, len(image) + 4)) == PspStatus.TEE_ERROR_BAD_FORMAT
    assert not raw.front.smu.alive
    assert raw.load_fw(PspFwType.SMU, image) == PspStatus.SUCCESS
    assert raw.front.smu.alive


def test_a_bad_bootloader_component_leaves_the_sos_dead(raw: RawDriver) -> None:
    raw.setup_vmid0("mm")
    components = raw.sos_components()
    raw.bootloader(PspBootloaderCmd.LOAD_KEY_DATABASE, components[3])
    status = raw.bootloader(PspBootloaderCmd.LOAD_SYSDRV, with_size(components[2], 12))
    assert status == PSP_BL_READY | (PspStatus.TEE_ERROR_BAD_PARAMETERS & 0xFFFF)
    assert raw.bootloader(PspBootloaderCmd.LOAD_SOSDRV, components[1]) == PSP_BL_READY | (
        PspStatus.TEE_ERROR_BAD_STATE & 0xFFFF
    )
    assert raw.r(Reg.MP0_SMN_C2PMSG_81) == 0
    raw.w(Reg.MP0_SMN_C2PMSG_64, GfxCtrlCmd.INIT_GPCOM_RING)
    assert raw.r(Reg.MP0_SMN_C2PMSG_64) & PSP_RESPONSE_READY == 0  # no sOS: nobody answers


@pytest.mark.parametrize(
    ("cmd_id", "union", "status"),
    [
        (GfxCmdId.SETUP_TMR, (0, 0, 16 << 20), PspStatus.TEE_ERROR_BAD_STATE),  # before LOAD_TOC
        (GfxCmdId.LOAD_IP_FW, (0, 0, 64, PspFwType.RS64_MEC), PspStatus.TEE_ERROR_BAD_STATE),  # before the TMR
        (GfxCmdId.AUTOLOAD_RLC, (), PspStatus.TEE_ERROR_BAD_STATE),  # before RLC_G
        (0x7E, (), PspStatus.PSP_ERR_UNKNOWN_COMMAND),
    ],
)
def test_commands_out_of_order_or_unknown_get_a_status(
    raw: RawDriver, cmd_id: int, union: tuple[int, ...], status: PspStatus
) -> None:
    ready_for_commands(raw)
    assert raw.psp_command(cmd_id, *union)[0] == status


def test_setup_tmr_checks_alignment_and_size(raw: RawDriver) -> None:
    ready_for_commands(raw)
    toc = make_image(b"\0" * 64)
    raw.put(MSG1, toc)
    status, tmr_size = raw.psp_command(GfxCmdId.LOAD_TOC, raw.mc(MSG1) & 0xFFFF_FFFF, raw.mc(MSG1) >> 32, len(toc))
    assert status == 0
    misaligned = raw.mc(TMR) + 0x1000
    assert raw.psp_command(GfxCmdId.SETUP_TMR, misaligned & 0xFFFF_FFFF, misaligned >> 32, tmr_size)[0] == (
        PspStatus.TEE_ERROR_BAD_PARAMETERS
    )
    assert raw.psp_command(GfxCmdId.SETUP_TMR, raw.mc(TMR) & 0xFFFF_FFFF, raw.mc(TMR) >> 32, tmr_size - 1)[0] == (
        PspStatus.TEE_ERROR_BAD_PARAMETERS
    )


def test_destroy_rings_clears_the_ring(raw: RawDriver) -> None:
    ready_for_commands(raw)
    assert raw.r(Reg.MP0_SMN_C2PMSG_71) == 0x10000
    raw.w(Reg.MP0_SMN_C2PMSG_64, GfxCtrlCmd.DESTROY_RINGS)
    assert raw.r(Reg.MP0_SMN_C2PMSG_64) == PSP_RESPONSE_READY
    assert raw.r(Reg.MP0_SMN_C2PMSG_71) == 0 and raw.front.psp.ring is None
