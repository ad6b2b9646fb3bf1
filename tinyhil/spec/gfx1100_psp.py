"""The gfx1100 PSP (MP0 13.0.0, section 5): the mailbox bits, the bootloader commands, the ring frame and the
command / response buffer, firmware ids and status codes.

Numbers cite ``docs/gfx1100.md`` "The register interface" (section in the comment); values the spec leaves open and this
project chose are marked "model".
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = [
    "PSP_BL_READY",
    "PSP_CMD_BYTES",
    "PSP_CMD_RESP_OFFSET",
    "PSP_CMD_UNION_OFFSET",
    "PSP_FRAME_DWORDS",
    "PSP_IFWI_READY",
    "PSP_MSG1_SHIFT",
    "PSP_RESPONSE_READY",
    "PSP_STATUS_MASK",
    "GfxCmdId",
    "GfxCtrlCmd",
    "PspBootloaderCmd",
    "PspFwBinType",
    "PspFwType",
    "PspStatus",
    "PsqRingType",
]

# --- section 5: PSP (MP0 13.0.0)
PSP_IFWI_READY: Final = 1 << 31  # C2PMSG_33
PSP_BL_READY: Final = 1 << 31  # C2PMSG_35
PSP_RESPONSE_READY: Final = 1 << 31  # C2PMSG_64
PSP_STATUS_MASK: Final = 0xFFFF  # C2PMSG_64 bits 15:0 (psp_gfx_if.h GFX_CMD_STATUS_MASK)
PSP_MSG1_SHIFT: Final = 20  # C2PMSG_36 = component buffer address >> 20
PSP_FRAME_DWORDS: Final = 16  # psp_gfx_rb_frame, 64 bytes
PSP_CMD_BYTES: Final = 1024  # psp_gfx_cmd_resp
PSP_CMD_UNION_OFFSET: Final = 28
PSP_CMD_RESP_OFFSET: Final = 864  # response: status, session_id, fw_addr lo/hi, tmr_size at +16


class PspBootloaderCmd(IntEnum):
    """``PSP_BL__*`` commands written to C2PMSG_35 (section 5)."""

    LOAD_SYSDRV = 0x10000
    LOAD_SOSDRV = 0x20000
    LOAD_KEY_DATABASE = 0x80000
    LOAD_SOCDRV = 0xB0000
    LOAD_DBGDRV = 0xC0000
    LOAD_INTFDRV = 0xD0000
    LOAD_RASDRV = 0xE0000
    LOAD_IPKEYMGRDRV = 0xF0000
    DRAM_LONG_TRAIN = 0x100000
    DRAM_SHORT_TRAIN = 0x200000
    LOAD_TOS_SPL_TABLE = 0x1000_0000


class PspFwBinType(IntEnum):
    """``PSP_FW_TYPE`` of a psp v2.0 sOS file's components (``psp_fw_bin_desc.fw_type``, section 7)."""

    SOS = 1
    SYS_DRV = 2
    KDB = 3
    TOC = 4
    SPL = 5
    RL = 6
    SOC_DRV = 7
    INTF_DRV = 8
    DBG_DRV = 9
    RAS_DRV = 10
    IPKEYMGR = 11


class GfxCtrlCmd(IntEnum):
    """``GFX_CTRL_CMD_ID_*`` written to C2PMSG_64 (section 5)."""

    INIT_RBI_RING = 0x10000
    INIT_GPCOM_RING = 0x20000
    DESTROY_RINGS = 0x30000
    CAN_INIT_RINGS = 0x40000
    ENABLE_INT = 0x50000
    DISABLE_INT = 0x60000
    MODE1_RST = 0x70000


class PsqRingType(IntEnum):
    """Ring types (C2PMSG_64 = type << 16, section 5)."""

    UM = 1
    KM = 2


class GfxCmdId(IntEnum):
    """``psp_gfx_cmd_resp.cmd_id`` (section 5)."""

    LOAD_TA = 0x01
    UNLOAD_TA = 0x02
    INVOKE_CMD = 0x03
    LOAD_ASD = 0x04
    SETUP_TMR = 0x05
    LOAD_IP_FW = 0x06
    DESTROY_TMR = 0x07
    SAVE_RESTORE = 0x08
    SETUP_VMR = 0x09
    DESTROY_VMR = 0x0A
    PROG_REG = 0x0B
    GET_FW_ATTESTATION = 0x0F
    LOAD_TOC = 0x20
    AUTOLOAD_RLC = 0x21
    BOOT_CFG = 0x22
    SRIOV_SPATIAL_PART = 0x27


class PspFwType(IntEnum):
    """LOAD_IP_FW ``fw_type`` values AM sends for gfx1100 (section 5)."""

    RLC_V = 7
    RLC_G = 8
    SMU = 18
    RLC_RESTORE_LIST_GPM_MEM = 20
    RLC_RESTORE_LIST_SRM_MEM = 21
    RLC_RESTORE_LIST_SRM_CNTL = 22
    RLC_P = 25
    RLC_IRAM = 26
    RLC_DRAM_BOOT = 48
    IMU_I = 68
    IMU_D = 69
    SDMA_UCODE_TH0 = 71
    SDMA_UCODE_TH1 = 72
    RS64_MEC = 89
    RS64_MEC_P0_STACK = 94


class PspStatus(IntEnum):
    """``psp_gfx_cmd_resp`` response status (section 5; psp_gfx_if.h). The TEE codes follow GlobalPlatform's TEE
    numbering, of which psp_gfx_if.h lists NOT_SUPPORTED; BAD_FORMAT / BAD_PARAMETERS / BAD_STATE are the model's
    answers for a rejected image, argument or order (docs/gfx1100.md)."""

    SUCCESS = 0
    PSP_ERR_UNKNOWN_COMMAND = 0x100
    TEE_ERROR_BAD_FORMAT = 0xFFFF0005
    TEE_ERROR_BAD_PARAMETERS = 0xFFFF0006
    TEE_ERROR_BAD_STATE = 0xFFFF0007
    TEE_ERROR_NOT_SUPPORTED = 0xFFFF000A
