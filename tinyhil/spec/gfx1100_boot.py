"""gfx1100 bring-up facts: the IP discovery binary, the memory model (MC addresses, PTE/PDE bits), PSP and SMU.

Every number cites ``spec/amdgpu-registers.md`` (section in the comment); registers are in
:mod:`tinyhil.spec.gfx1100_regs`. Values the spec leaves open and this project chose are marked "model".
"""

from __future__ import annotations

from enum import IntEnum, IntFlag
from typing import Final

__all__ = [
    "BINARY_SIGNATURE",
    "BOOTED_SCRATCH_REG7",
    "DISCOVERY_TMR_OFFSET",
    "DISCOVERY_TMR_SIZE",
    "DISCOVERY_VERSION_MAJOR",
    "DISCOVERY_VERSION_MINOR",
    "FB_BLOCK_BYTES",
    "GC_INFO_SIGNATURE",
    "HARVEST_ENTRIES",
    "HARVEST_TABLE_SIGNATURE",
    "HDP_FLUSH_BYTE_OFFSET",
    "IP_DISCOVERY_SIGNATURE",
    "IP_DISCOVERY_VERSION",
    "MM_INDEX_HI_SHIFT",
    "MM_INDEX_VRAM_FLAG",
    "NAVI31_FB_BASE",
    "PDE_ADDRESS_MASK",
    "PSP_BL_READY",
    "PSP_CMD_BYTES",
    "PSP_CMD_RESP_OFFSET",
    "PSP_CMD_UNION_OFFSET",
    "PSP_FRAME_DWORDS",
    "PSP_IFWI_READY",
    "PSP_MSG1_SHIFT",
    "PSP_RESPONSE_READY",
    "PSP_STATUS_MASK",
    "PTE_ADDRESS_MASK",
    "PT_ENTRIES",
    "PT_INDEX_BITS",
    "SMU_DPM_LEVEL_COUNT_INDEX",
    "SMU_RESPONSE_FLAG",
    "VMID0_VA_START",
    "BinaryTable",
    "GfxCmdId",
    "GfxCtrlCmd",
    "PspBootloaderCmd",
    "PspFwType",
    "PspStatus",
    "PsqRingType",
    "PteFlag",
    "SmuClock",
    "SmuDebugMsg",
    "SmuMsg",
    "SmuResult",
]

# --- section 3: IP discovery binary, at VRAM offset (MEMSIZE_MB << 20) - DISCOVERY_TMR_OFFSET, packed little-endian
DISCOVERY_TMR_OFFSET: Final = 64 << 10
DISCOVERY_TMR_SIZE: Final = 10 << 10
BINARY_SIGNATURE: Final = 0x28211407  # binary_header.binary_signature
IP_DISCOVERY_SIGNATURE: Final = 0x53445049  # "IPDS"
GC_INFO_SIGNATURE: Final = 0x4347  # "GC"
HARVEST_TABLE_SIGNATURE: Final = 0x56524148  # "HARV"
HARVEST_ENTRIES: Final = 32  # harvest_table: 32 x {u16 hw_id, u8 number_instance, u8 reserved}
DISCOVERY_VERSION_MAJOR: Final = 1  # model: binary_header version
DISCOVERY_VERSION_MINOR: Final = 0
IP_DISCOVERY_VERSION: Final = 4  # model: ip_discovery_header.version (section 15: real table is 3 or 4)


class BinaryTable(IntEnum):
    """binary_header.table_info indices (section 3)."""

    IP_DISCOVERY = 0
    GC = 1
    HARVEST_INFO = 2
    VCN_INFO = 3
    MALL_INFO = 4
    NPS_INFO = 5


# --- section 4: memory model
NAVI31_FB_BASE: Final = 0x80_0000_0000  # MMMC_VM_FB_LOCATION_BASE = 0x8000 (<< 24)
FB_BLOCK_BYTES: Final = 1 << 24  # FB_BASE / FB_TOP are in 16 MB blocks; TOP is the start of the last one
VMID0_VA_START: Final = 0x2000_0000_0000  # CONTEXT0_PAGE_TABLE_START_ADDR 0x2_0000_0000 (pages)
PT_ENTRIES: Final = 512  # per table level, u64 entries
PT_INDEX_BITS: Final = 9
PTE_ADDRESS_MASK: Final = 0x0000_FFFF_FFFF_F000  # PTE bits 47:12
PDE_ADDRESS_MASK: Final = 0x0000_FFFF_FFFF_FFC0  # PDE bits 47:6
HDP_FLUSH_BYTE_OFFSET: Final = 0x7F000  # model: BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL reads this (Linux's value)
MM_INDEX_VRAM_FLAG: Final = 0x8000_0000  # MM_INDEX = (addr & 0x7FFFFFFF) | 0x8000_0000 (section 2.3)
MM_INDEX_HI_SHIFT: Final = 31  # MM_INDEX_HI = addr >> 31


class PteFlag(IntFlag):
    """PTE / PDE bits (gfx11, section 4)."""

    VALID = 1 << 0
    SYSTEM = 1 << 1
    SNOOPED = 1 << 2  # PDE: C (coherent)
    TMZ = 1 << 3
    EXECUTE = 1 << 4
    READABLE = 1 << 5
    WRITEABLE = 1 << 6
    PRT = 1 << 51
    PDE_IS_PTE = 1 << 54  # "P": a PDB2/1/0 entry that is a leaf (huge page)


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
BOOTED_SCRATCH_REG7: Final = 0xA000_0008  # section 11 step 20 / section 12: AM's "booted" mark


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


# --- section 6: SMU (MP1 13.0.0) mailbox
SMU_DPM_LEVEL_COUNT_INDEX: Final = 0xFF  # GetDpmFreqByIndex index that asks for the number of levels
SMU_RESPONSE_FLAG: Final = 1 << 31  # a flag bit of GetDpmFreqByIndex's answer that AM masks off


class SmuMsg(IntEnum):
    """PPSMC messages AM uses on SMU 13.0.0 (section 6)."""

    GetSmuVersion = 0x2
    EnableAllSmuFeatures = 0x6
    SetDriverDramAddrHigh = 0xE
    SetDriverDramAddrLow = 0xF
    TransferTableSmu2Dram = 0x12
    SetSoftMinByFreq = 0x19
    SetSoftMaxByFreq = 0x1A
    GetDpmFreqByIndex = 0x1F
    Mode1Reset = 0x2F
    SetPptLimit = 0x32


class SmuDebugMsg(IntEnum):
    """Debug-mailbox (C2PMSG_75) messages (section 6)."""

    Mode1Reset = 0x2


class SmuResult(IntEnum):
    """C2PMSG_90 responses (section 6)."""

    OK = 0x1
    CmdRejectedBusy = 0xFC
    CmdRejectedPrereq = 0xFD
    UnknownCmd = 0xFE
    Failed = 0xFF


class SmuClock(IntEnum):
    """Clock ids of GetDpmFreqByIndex / SetSoftMin / SetSoftMax (arg bits 31:16, section 6)."""

    GFXCLK = 0
    SOCCLK = 1
    UCLK = 2
    FCLK = 3
