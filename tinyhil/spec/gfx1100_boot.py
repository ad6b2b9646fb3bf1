"""gfx1100 bring-up facts: the IP discovery binary, the memory model (MC addresses, PTE/PDE bits), PSP and SMU.

Every number cites ``spec/amdgpu-registers.md`` (section in the comment); registers are in
:mod:`tinyhil.spec.gfx1100_regs`. Values the spec leaves open and this project chose are marked "model".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from types import MappingProxyType
from typing import Final

__all__ = [
    "BINARY_SIGNATURE",
    "BOOTED_SCRATCH_REG7",
    "CLOCK_GATING_GFX",
    "CLOCK_GATING_SOC",
    "CP_SOFT_RESET_S",
    "DISCOVERY_TMR_OFFSET",
    "DISCOVERY_TMR_SIZE",
    "DISCOVERY_VERSION_MAJOR",
    "DISCOVERY_VERSION_MINOR",
    "FB_BLOCK_BYTES",
    "GC_INFO_SIGNATURE",
    "GFX_MISC",
    "GRBM_CNTL_READ_TIMEOUT",
    "HARVEST_ENTRIES",
    "HARVEST_TABLE_SIGNATURE",
    "HDP_FLUSH_BYTE_OFFSET",
    "HUB_SETUP",
    "IH_ENABLE",
    "IH_INTERRUPT_CONTROLS",
    "IH_RB_SETUP",
    "IH_RB_SIZE",
    "IH_RING_BYTES",
    "IP_DISCOVERY_SIGNATURE",
    "IP_DISCOVERY_VERSION",
    "MM_INDEX_HI_SHIFT",
    "MM_INDEX_VRAM_FLAG",
    "MODE1_RESET_SETTLE_S",
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
    "SDMA_ENGINE",
    "SMU_ALIVE_TIMEOUT_S",
    "SMU_DPM_LEVEL_COUNT_INDEX",
    "SMU_RESPONSE_FLAG",
    "SYSTEM_APERTURE_SHIFT",
    "VMID0_VA_START",
    "VM_CONTEXT0_CNTL_FAULT_ENABLES",
    "BinaryTable",
    "FieldUpdate",
    "GfxCmdId",
    "GfxCtrlCmd",
    "PspBootloaderCmd",
    "PspFwBinType",
    "PspFwType",
    "PspStatus",
    "PsqRingType",
    "PteFlag",
    "RegUpdate",
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


# --- sections 4, 10, 11: the register values of the bring-up (AM's, tinygrad ``ip.py``; field layouts from the
# gc 11.0.0 / mmhub 3.0.0 / osssys 6.0.0 / hdp 6.0.0 ``_sh_mask.h``, docs/gfx1100.md)
SYSTEM_APERTURE_SHIFT: Final = 18  # *MC_VM_SYSTEM_APERTURE_LOW/HIGH_ADDR = MC address >> 18 (256 KB units)
SMU_ALIVE_TIMEOUT_S: Final = 0.1  # section 6: GetSmuVersion, the alive probe of step 4a
MODE1_RESET_SETTLE_S: Final = 0.5  # section 6: the sleep after the debug-mailbox Mode1Reset
CP_SOFT_RESET_S: Final = 0.05  # section 12: the GRBM_SOFT_RESET cp + cpc pulse of the partial path
IH_RING_BYTES: Final = 256 << 10  # AM's IH ring size (both rings)
IH_RB_SIZE: Final = (IH_RING_BYTES // 4).bit_length() - 1  # IH_RB_CNTL.rb_size: log2(ring dwords) = 16
_U32: Final = 0xFFFF_FFFF


@dataclass(frozen=True, slots=True)
class RegUpdate:
    """One register write of the bring-up: ``value`` into the bits of ``mask``, the other bits read back and kept
    (AM's ``update``); a full mask writes ``value`` outright. ``register`` is a :class:`Reg` name, with ``{hub}``
    (``GC`` / ``MM``) or ``{sdma}`` (``0`` / ``1``) to fill in."""

    register: str
    value: int
    mask: int = _U32


@dataclass(frozen=True, slots=True)
class FieldUpdate:
    """One register write of the bring-up by field name (``tinyhil.spec.gfx1100_fields`` has the layouts): the
    fields of ``values`` set, the others read back and kept (AM's ``update``), or with ``whole`` the others 0 (AM's
    ``write``). ``register`` is a :class:`Reg` name, as in :class:`RegUpdate`."""

    register: str
    values: Mapping[str, int]
    whole: bool = False

    @classmethod
    def of(cls, register: str, *, whole: bool = False, **values: int) -> FieldUpdate:
        return cls(register, MappingProxyType(values), whole)


# Steps 6 / 13 (section 4), each hub's *VM_CONTEXT0_CNTL (the rest of its value: enable_context, page_table_depth 3):
VM_CONTEXT0_CNTL_FAULT_ENABLES: Final = 0xFFFF  # bits 24:9, all the fault interrupt / default enables (AM's value)
# Each hub: AGP off, fault-retry, L1 TLB, L2 cache controls, identity aperture off, the
# invalidate ranges of engines 0-17. (The system aperture and the default pages depend on the board: the driver.)
HUB_SETUP: Final[tuple[RegUpdate, ...]] = (
    RegUpdate("{hub}MC_VM_AGP_BASE", 0),
    RegUpdate("{hub}MC_VM_AGP_BOT", 0xFF_FFFF),  # 0xFFFF_FFFF_FFFF >> 24: AGP off
    RegUpdate("{hub}MC_VM_AGP_TOP", 0),
    RegUpdate("{hub}VM_L2_PROTECTION_FAULT_CNTL2", 1 << 18, 1 << 18),  # active_page_migration_pte_read_retry
    # enable_l1_tlb, system_access_mode 3 [4:3], advanced driver model [6], unmapped access 0 [5], MTYPE UC 3 [13:11]
    RegUpdate("{hub}MC_VM_MX_L1_TLB_CNTL", 0x1859, 0x3879),
    # enable_l2_cache, default page out to system memory [11], context1_identity_access_mode 1 [20:19]; fragment
    # processing [1], pde0 tag mode [8], pde fault classification [18], identity fragment size [25:21] 0
    RegUpdate("{hub}VM_L2_CNTL", 0x8_0801, 0x3FC_0903),
    RegUpdate("{hub}VM_L2_CNTL2", 0x3, 0x3),  # invalidate_all_l1_tlbs, invalidate_l2_cache
    RegUpdate("{hub}VM_L2_CNTL3", 0x8013_0009),  # 4k / bigk associativity, bigk fragment size 6, bank_select 9
    RegUpdate("{hub}VM_L2_CNTL4", 0x1),  # l2_cache_4k_partition_count 1
    RegUpdate("{hub}VM_L2_CNTL5", 0x1FF << 5),  # walker_priority_client_id 0x1FF
    RegUpdate("{hub}VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32", _U32),  # LOW 0xF_FFFF_FFFF, HIGH 0: off
    RegUpdate("{hub}VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32", 0xF),
    RegUpdate("{hub}VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32", 0),
    RegUpdate("{hub}VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32", 0),
    RegUpdate("{hub}VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32", 0),
    RegUpdate("{hub}VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32", 0),
    *(RegUpdate(f"{{hub}}VM_INVALIDATE_ENG{engine}_ADDR_RANGE_{half}", value)
      for engine in range(18) for half, value in (("LO32", _U32), ("HI32", 0x1F))),  # 0x1F_FFFF_FFFF
)  # fmt: skip

# Step 7 (section 10): IH_RB_CNTL of ring 0 / ring 1 (rb_enable last, below; no write-pointer write-back, as AM),
# then the storm / flood controls.
_IH_RB_CNTL_COMMON: Final = MappingProxyType({"mc_space": 4, "wptr_overflow_clear": 1, "mc_snoop": 1,
                                              "rb_size": IH_RB_SIZE, "wptr_writeback_enable": 0})  # fmt: skip
IH_RB_SETUP: Final[tuple[FieldUpdate, FieldUpdate]] = (
    FieldUpdate.of("IH_RB_CNTL", whole=True, **_IH_RB_CNTL_COMMON, wptr_overflow_enable=1, rptr_rearm=1),
    FieldUpdate.of("IH_RB_CNTL_RING1", whole=True, **_IH_RB_CNTL_COMMON, rb_full_drain_enable=1),
)
IH_INTERRUPT_CONTROLS: Final[tuple[RegUpdate, ...]] = (
    RegUpdate("IH_STORM_CLIENT_LIST_CNTL", 1 << 18, 1 << 18),  # client18_is_storm_client
    RegUpdate("IH_INT_FLOOD_CNTL", 1 << 3, 1 << 3),  # flood_cntl_enable
    RegUpdate("IH_MSI_STORM_CTRL", 3, 0xFFF),  # delay 3
)
IH_ENABLE: Final[tuple[FieldUpdate, ...]] = (
    FieldUpdate.of("IH_RB_CNTL", rb_enable=1, enable_intr=1),
    FieldUpdate.of("IH_RB_CNTL_RING1", rb_enable=1),
)

# Step 15 (section 10): TCP / RLC misc (before the S2A ports), then GRBM_CNTL.
GFX_MISC: Final[tuple[RegUpdate, ...]] = (
    RegUpdate("TCP_CNTL", 1 << 29, 1 << 29),  # the golden bit Linux ORs in
    RegUpdate("RLC_CNTL", 0x1),  # rlc_enable_f32
    RegUpdate("RLC_SRM_CNTL", 0x3, 0x3),  # srm_enable, auto_incr_addr
    RegUpdate("RLC_SPM_MC_CNTL", 0xF),
)
GRBM_CNTL_READ_TIMEOUT: Final = RegUpdate("GRBM_CNTL", 0xFF, 0xFF)

# Step 17, each SDMA engine: watchdog, UTCL1, unhalt (halt 0, th1_reset 0), trap_enable.
SDMA_ENGINE: Final[tuple[RegUpdate | FieldUpdate, ...]] = (
    RegUpdate("SDMA{sdma}_WATCHDOG_CNTL", 100, 0xFF),  # queue_hang_count 100 (100 ms units: 10 s)
    RegUpdate("SDMA{sdma}_UTCL1_CNTL", 3 << 9 | 9, 0x3 << 9 | 0x1F),  # resp_mode 3, redo_delay 9
    RegUpdate("SDMA{sdma}_UTCL1_PAGE", 2 << 12 | 3 << 14 | 1 << 24, 0xF << 12 | 1 << 24),  # rd noa, wr bypass
    FieldUpdate.of("SDMA{sdma}_F32_CNTL", halt=0, th1_reset=0),
    FieldUpdate.of("SDMA{sdma}_CNTL", trap_enable=1),
)

# Step 19 (section 10): before RLC safe mode (HDP, MM ATC), then inside it (GFX clock gating).
CLOCK_GATING_SOC: Final[tuple[RegUpdate, ...]] = (
    RegUpdate("HDP_MEM_POWER_CTRL", 0x5, 0x5),  # atomic_mem_power_ctrl_en, atomic_mem_power_ds_en
    RegUpdate("MM_ATC_L2_MISC_CG", 1 << 18 | 1 << 19),  # enable, mem_ls_enable
)
CLOCK_GATING_GFX: Final[tuple[RegUpdate, ...]] = (
    # cgcg_en, cgls_en, cgls_rep_compansat_delay 0xF [7:2], cgcg_gfx_idle_threshold 0x36 [26:8]
    RegUpdate("RLC_CGCG_CGLS_CTRL", 0x36 << 8 | 0xF << 2 | 0x3, 0x7FF_FFFF),
    RegUpdate("CP_RB_WPTR_POLL_CNTL", 0x90 << 16 | 0x100),  # idle_poll_count 0x90, poll_frequency 0x100
    RegUpdate("CP_INT_CNTL", 0x7 << 18, 0x7 << 18),  # cmp_busy, cntx_busy, cntx_empty interrupts
    RegUpdate("SDMA0_RLC_CGCG_CTRL", 1 << 1, 1 << 1),  # cgcg_int_enable
    RegUpdate("SDMA1_RLC_CGCG_CTRL", 1 << 1, 1 << 1),
    # perfmon_clock_state 1 [10]; the fgcg / repeater / sclk / mgcg / cgls / cgcg overrides 0
    RegUpdate("RLC_CGTT_MGCG_OVERRIDE", 1 << 10, 0x73E),
)
