"""The PSP: the spec's load order is accepted (generated and real files); bad images, bad order and unknown commands
get a PSP status."""

from __future__ import annotations

import struct

import pytest
from support.firmware import REAL_FIRMWARE
from support.gfx1100 import BOOTLOADER_ORDER, IP_FW_ORDER, MSG1, TMR, TOC_TYPE, RawDriver

from tinyhil.amdgpu.firmware import DirectoryFirmware, FirmwareSource, GeneratedFirmware, make_image
from tinyhil.spec.gfx1100_psp import (
    PSP_BL_READY,
    PSP_RESPONSE_READY,
    GfxCmdId,
    GfxCtrlCmd,
    PspBootloaderCmd,
    PspFwType,
    PspStatus,
)
from tinyhil.spec.gfx1100_regs import Reg

SOURCES = [pytest.param(GeneratedFirmware(), id="generated"), pytest.param(DirectoryFirmware(), id="real",
                                                                             marks=REAL_FIRMWARE)]  # fmt: skip


def with_u32(image: bytes, **fields: int) -> bytes:
    """``image`` with signed-image header fields replaced: ``size_signed`` (0x14), ``image_size`` (0x6C)."""
    out = bytearray(image)
    for field, value in fields.items():
        struct.pack_into("<I", out, {"size_signed": 0x14, "image_size": 0x6C}[field], value)
    return bytes(out)


def size_signed(image: bytes) -> int:
    return int(struct.unpack_from("<I", image, 0x14)[0])


def ready_for_commands(raw: RawDriver) -> None:
    raw.w(Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, 1)
    raw.setup_vmid0("mm")
    raw.boot_sos()
    raw.create_ring()


@pytest.mark.parametrize("firmware", SOURCES)
def test_the_load_order_of_the_spec_is_accepted(raw: RawDriver, firmware: FirmwareSource) -> None:
    """Every payload of the generated and of the real files passes the PSP's signed-image check."""
    raw.firmware = firmware
    raw.boot()
    psp = raw.front.psp
    present = raw.sos_components()
    assert psp.components == [command for fw_type, command in BOOTLOADER_ORDER if fw_type in present]
    assert psp.firmware == [PspFwType.SMU, *(fw_type for fw_type, _ in IP_FW_ORDER)]
    order = [GfxCmdId.LOAD_TOC, GfxCmdId.LOAD_IP_FW, GfxCmdId.SETUP_TMR, *[GfxCmdId.LOAD_IP_FW] * len(IP_FW_ORDER)]
    assert [cmd for cmd, _ in psp.commands] == [*order, GfxCmdId.AUTOLOAD_RLC]
    assert all(status == 0 for _, status in psp.commands)
    assert psp.tmr == (raw.mc(TMR), 16 << 20) and psp.rlc_autoloaded


@pytest.mark.parametrize(
    "change",
    [
        lambda image: with_u32(image, size_signed=size_signed(image) + 4),  # the size field disagrees with 0x6C
        lambda image: with_u32(image, size_signed=size_signed(image) - 4),  # and shorter: still refused
        lambda image: with_u32(image, size_signed=size_signed(image) + 16, image_size=len(image) + 16),  # > fw_size
        lambda image: image[:0x10] + b"$PS2" + image[0x14:],
        lambda image: with_u32(image[:0x30] + b"\0\0\0\0" + image[0x34:]),  # not signed
    ],
    ids=["size-signed-up", "size-signed-down", "past-the-command-size", "magic", "unsigned"],
)
def test_a_bad_signed_image_is_refused_with_bad_format(raw: RawDriver, change: object) -> None:
    ready_for_commands(raw)
    toc = raw.sos_components()[TOC_TYPE]
    raw.put(MSG1, toc)
    assert raw.psp_command(GfxCmdId.LOAD_TOC, raw.mc(MSG1) & 0xFFFF_FFFF, raw.mc(MSG1) >> 32, len(toc))[0] == 0
    image = raw.payload("smu_13_0_0.bin")
    assert callable(change)
    assert raw.load_fw(PspFwType.SMU, change(image)) == PspStatus.TEE_ERROR_BAD_FORMAT
    assert not raw.front.smu.alive
    assert raw.load_fw(PspFwType.SMU, image) == PspStatus.SUCCESS
    assert raw.front.smu.alive


def test_a_payload_may_carry_padding_after_its_image(raw: RawDriver) -> None:
    """As the real MEC stack section does (a 0x1440-byte image in 0x22000 bytes)."""
    ready_for_commands(raw)
    toc = raw.sos_components()[TOC_TYPE]
    raw.put(MSG1, toc + bytes(0x1000))
    assert raw.psp_command(GfxCmdId.LOAD_TOC, raw.mc(MSG1) & 0xFFFF_FFFF, raw.mc(MSG1) >> 32, len(toc) + 0x1000)[0] == 0


def test_a_bad_bootloader_component_leaves_the_sos_dead(raw: RawDriver) -> None:
    raw.setup_vmid0("mm")
    components = raw.sos_components()
    kdb = components[3]
    assert kdb[0x10:0x14] == bytes(4), "the key database has no magic"
    assert raw.bootloader(PspBootloaderCmd.LOAD_KEY_DATABASE, kdb) == PSP_BL_READY
    assert raw.bootloader(PspBootloaderCmd.LOAD_TOS_SPL_TABLE, kdb) == PSP_BL_READY  # MP0 13.0: the KDB again
    assert raw.bootloader(PspBootloaderCmd.LOAD_SYSDRV, kdb) == PSP_BL_READY | (PspStatus.TEE_ERROR_BAD_FORMAT & 0xFFFF)
    huge = with_u32(components[2], size_signed=64 << 20, image_size=(64 << 20) + 0x200)
    status = raw.bootloader(PspBootloaderCmd.LOAD_SYSDRV, huge)
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
