"""The gfx1100 bring-up sequence over the bridge: discovery, GMC, IH, PSP, firmware, SMU, GFX/MEC, SDMA, clocks.

``spec/amdgpu-registers.md`` sections 4-12. :class:`Gfx1100Boot` runs the steps of section 11 against BAR5 (the
1 MB register BAR, registers beyond it through ``BIF_BX_PF0_RSMU_INDEX`` / ``_DATA``) and BAR0 (VRAM); firmware
comes through the firmware seam (:class:`~tinyhil.amdgpu.firmware.FirmwareSource`). A board that is already booted
(``SCRATCH_REG7`` reads the booted mark, ``SCRATCH_REG6`` 0, no protection fault) takes the partial path of
section 12; :meth:`Gfx1100Boot.shutdown` leaves it in that state. One whose sOS is alive but that no driver closed
cleanly gets step 4a's mode-1 reset first. Boot memory: the top :data:`BOOT_BYTES` of VRAM, as :class:`BootLayout`
says. The register values of sections 4 and 10 are tables of :mod:`tinyhil.spec.gfx1100_boot`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tinyhil.amdgpu.firmware import FirmwareSource
from tinyhil.errors import DeviceError, DeviceTimeout
from tinyhil.spec import gfx1100_boot as values
from tinyhil.spec.amdgpu_firmware import GFX1100_IP_FIRMWARE, IpFirmware, ip_firmware, psp_sos_components
from tinyhil.spec.gfx1100_boot import (
    BINARY_SIGNATURE,
    BOOTED_SCRATCH_REG7,
    DISCOVERY_TMR_OFFSET,
    FB_BLOCK_BYTES,
    IP_DISCOVERY_SIGNATURE,
    PSP_BL_READY,
    PSP_CMD_BYTES,
    PSP_CMD_RESP_OFFSET,
    PSP_CMD_UNION_OFFSET,
    PSP_FRAME_DWORDS,
    PSP_MSG1_SHIFT,
    PSP_RESPONSE_READY,
    PSP_STATUS_MASK,
    SMU_DPM_LEVEL_COUNT_INDEX,
    SMU_RESPONSE_FLAG,
    GfxCmdId,
    GfxCtrlCmd,
    PspBootloaderCmd,
    PspFwBinType,
    PspFwType,
    SmuClock,
    SmuDebugMsg,
    SmuMsg,
    SmuResult,
)
from tinyhil.spec.gfx1100_regs import (
    GRBM_SOFT_RESET_SOFT_RESET_CP,
    GRBM_SOFT_RESET_SOFT_RESET_CPC,
    IH_RB_WPTR_OFFSET,
    RLC_SAFE_MODE_CMD,
    Reg,
)
from tinyhil.usbgpu.gfx1100_bars import Gfx1100Registers

__all__ = ["BOOT_BYTES", "BootLayout", "Gfx1100Boot"]

BOOT_BYTES: Final = 32 << 20  # the driver's boot memory at the top of VRAM
_DWORD: Final = struct.Struct("<I")
_MB: Final = 1 << 20
_U32: Final = 0xFFFF_FFFF
_TABLE_INFO_OFFSET: Final = 12  # section 3: binary_header.table_info[0] (IP_DISCOVERY): u16 offset first
_PAGE_SHIFT: Final = 12
_CP_SOFT_RESET: Final = GRBM_SOFT_RESET_SOFT_RESET_CP.mask | GRBM_SOFT_RESET_SOFT_RESET_CPC.mask
_SMU_MAILBOX: Final = (Reg.MP1_SMN_C2PMSG_66, Reg.MP1_SMN_C2PMSG_82, Reg.MP1_SMN_C2PMSG_90)  # message, arg, answer
_SMU_DEBUG_MAILBOX: Final = (Reg.MP1_SMN_C2PMSG_75, Reg.MP1_SMN_C2PMSG_53, Reg.MP1_SMN_C2PMSG_54)
_PSP_RING_BYTES: Final = 0x10000  # section 11 step 9
_PSP_FW_ALIGN: Final = 16  # AM pads every payload to 16 bytes (section 7)
_STRAP2_CLEAR: Final = 1 << 7  # section 10: RCC_DEV0_EPF2_STRAP2 bit 7 cleared
_DOORBELL_APER_EN: Final = 1
_RLC_SAFE_MODE_ENTER: Final = 3  # section 10: cmd | message 1
_RLC_SAFE_MODE_EXIT: Final = 1
_CP_IDLE: Final = 0
_BOOTLOAD_COMPLETE: Final = 1 << 31
_SMU_TABLE_BYTES: Final = 16 << 10
_GRBM_ME_MEC: Final = 1 << 2  # GRBM_GFX_CNTL.meid = 1
_RS64_PIPE0_RESET: Final = 1 << 16
_RS64_PIPE0_ACTIVE: Final = 1 << 26
_SH_MEM_CONFIG: Final = 0xC00C  # section 9: AM's value
_SH_MEM_BASES: Final = 0x0001_0002
_VMIDS: Final = 16
_VM_CONTEXT0_CNTL: Final = 0x01FF_FE07  # section 4: enable_context, page_table_depth 3, fault bits
# S2A doorbell ports (section 10): enable[0], awid[6:1], range_offset[16:7] (dwords), range_size[24:17],
# awaddr_31_28[31:28]. Port 2 is SDMA's: range offset 0x200 dwords (BAR2 byte 0x800), 4 dwords (two u64 doorbells).
_S2A_SDMA: Final = 1 | 0xE << 1 | 0x200 << 7 | 4 << 17 | 3 << 28
_S2A_CP: Final = {Reg.S2A_DOORBELL_ENTRY_0_CTRL: 1 | 0x3 << 1, Reg.S2A_DOORBELL_ENTRY_3_CTRL: 1 | 0x6 << 1}  # awid 3/6
_MEC_DOORBELL_UPPER: Final = 0xF8  # section 9: AM's MEC doorbell range 0 .. 0xF8
# sOS components (PSP_FW_TYPE of the sos header) in the bootloader order of section 11 step 8. On MP0 13.0 the
# LOAD_TOS_SPL_TABLE command carries the KDB component again, as Linux psp_v13_0 and AM send it (not the SPL one).
_BOOTLOADER_ORDER: Final = ((PspFwBinType.KDB, PspBootloaderCmd.LOAD_KEY_DATABASE),
                            (PspFwBinType.KDB, PspBootloaderCmd.LOAD_TOS_SPL_TABLE),
                            (PspFwBinType.SYS_DRV, PspBootloaderCmd.LOAD_SYSDRV),
                            (PspFwBinType.SOC_DRV, PspBootloaderCmd.LOAD_SOCDRV),
                            (PspFwBinType.INTF_DRV, PspBootloaderCmd.LOAD_INTFDRV),
                            (PspFwBinType.DBG_DRV, PspBootloaderCmd.LOAD_DBGDRV),
                            (PspFwBinType.RAS_DRV, PspBootloaderCmd.LOAD_RASDRV),
                            (PspFwBinType.SOS, PspBootloaderCmd.LOAD_SOSDRV))  # fmt: skip
# The IP firmware files step 10 loads after SETUP_TMR, in order (the SMU's comes before the TMR).
_IP_FIRMWARE_AFTER_TMR: Final = ("sdma_6_0_0.bin", "gc_11_0_0_mec.bin", "gc_11_0_0_imu.bin", "gc_11_0_0_rlc.bin")
_RS64_START_SHIFT: Final = 2  # CP_MEC_RS64_PRGRM_CNTR_START(_HI) take the start address in dwords
_CLOCKS: Final = (SmuClock.UCLK, SmuClock.FCLK, SmuClock.SOCCLK, SmuClock.GFXCLK)  # section 11 step 18


@dataclass(frozen=True, slots=True)
class BootLayout:
    """The driver's boot memory (VRAM offsets), in the top :data:`BOOT_BYTES` of ``vram_bytes`` of VRAM.

    | offset from ``base`` | what |
    |---|---|
    | 0 | TMR (16 MB, 1 MB aligned) |
    | 16 MB | PSP "msg1" buffer (1 MB aligned) |
    | 17 MB | PSP ring (64 KB), command buffer, fence |
    | 18 MB | page tables (2 MB) |
    | 20 MB | SMU driver table (16 KB), MQD, EOP buffer |
    | 21 MB | IH rings 0 and 1 (256 KB each), ring 0's write-pointer page, the two scratch (default) pages |
    | ``BOOT_BYTES`` - 64 KB | the discovery binary (the GPU's) |
    """

    vram_bytes: int

    @property
    def base(self) -> int:
        return self.vram_bytes - BOOT_BYTES

    @property
    def tmr(self) -> int:
        return self.base

    @property
    def msg1(self) -> int:
        return self.base + 16 * _MB

    @property
    def psp_ring(self) -> int:
        return self.base + 17 * _MB

    @property
    def psp_cmd(self) -> int:
        return self.psp_ring + _PSP_RING_BYTES

    @property
    def psp_fence(self) -> int:
        return self.psp_cmd + PSP_CMD_BYTES

    @property
    def page_tables(self) -> int:
        return self.base + 18 * _MB

    @property
    def page_tables_end(self) -> int:
        return self.base + 20 * _MB

    @property
    def smu_table(self) -> int:
        return self.base + 20 * _MB

    @property
    def mqd(self) -> int:
        return self.smu_table + _SMU_TABLE_BYTES

    @property
    def eop(self) -> int:
        return self.mqd + 0x1000

    def ih_ring(self, ring: int) -> int:
        return self.base + 21 * _MB + ring * values.IH_RING_BYTES

    @property
    def ih_wptr(self) -> int:
        return self.ih_ring(2)

    def scratch(self, page: int) -> int:
        """The default page of the system aperture (0) and of protection faults (1)."""
        return self.ih_wptr + (1 + page << _PAGE_SHIFT)


class Gfx1100Boot:
    """The bring-up of section 11 (and the partial boot and shutdown of section 12) over :class:`Gfx1100Registers`.

    Raises (every step): DeviceError naming the step and what the GPU answered; DeviceTimeout for a wait.
    """

    def __init__(self, regs: Gfx1100Registers, firmware: FirmwareSource) -> None:
        self.regs = regs
        self.firmware = firmware
        self.layout = BootLayout(0)  # set by discover()
        self.fb_base = 0
        self.fb_top = 0  # MC address of the last 16 MB block of VRAM
        self.partial = False
        self._psp_fence = 0
        self.dpm_levels: dict[SmuClock, list[int]] = {}
        self.mec_start: int | None = None  # the MEC firmware's start address >> 2 (cold boot only)

    # --- steps 2-4 ---
    def discover(self) -> int:
        """Steps 2-3: VRAM size from 0xDE3, the discovery signatures, FB_BASE; returns the VRAM bytes."""
        regs = self.regs
        vram_bytes = regs.read(Reg.RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE) * _MB
        if vram_bytes < 2 * BOOT_BYTES:  # 0: no gfx1100 (Navi 31) answers, the only GPU the USB path drives
            gpu = ": not a gfx1100" if not vram_bytes else ""
            raise DeviceError(f"RCC_CONFIG_MEMSIZE (BAR5 {Reg.RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE * 4:#x}) reads "
                              f"{vram_bytes >> 20} MB, expected >= 64 MB{gpu}", op="boot")  # fmt: skip
        at = vram_bytes - DISCOVERY_TMR_OFFSET
        binary, offset = struct.unpack("<I8xH", regs.vram_read(at, _TABLE_INFO_OFFSET + 2))
        if binary != BINARY_SIGNATURE:
            raise DeviceError(f"discovery binary signature {binary:#x}, expected {BINARY_SIGNATURE:#x}", op="boot")
        ipds = _DWORD.unpack(regs.vram_read(at + offset, 4))[0]
        if ipds != IP_DISCOVERY_SIGNATURE:
            raise DeviceError(f"IP discovery signature {ipds:#x}, expected {IP_DISCOVERY_SIGNATURE:#x}", op="boot")
        self.fb_base = (regs.read(Reg.MMMC_VM_FB_LOCATION_BASE) & 0xFF_FFFF) * FB_BLOCK_BYTES
        self.fb_top = (regs.read(Reg.MMMC_VM_FB_LOCATION_TOP) & 0xFF_FFFF) * FB_BLOCK_BYTES
        self.layout = BootLayout(vram_bytes)
        return vram_bytes

    def booted(self) -> bool:
        """Step 4 / section 12: whether a driver booted this GPU and closed it cleanly (the partial path)."""
        regs = self.regs
        return (
            regs.read(Reg.SCRATCH_REG7) == BOOTED_SCRATCH_REG7
            and regs.read(Reg.SCRATCH_REG6) == 0
            and regs.read(Reg.GCVM_L2_PROTECTION_FAULT_STATUS) == 0
        )

    def mc(self, vram_offset: int) -> int:
        return self.fb_base + vram_offset

    # --- the whole sequence ---
    def boot(self, map_memory: Callable[[], None]) -> None:
        """Steps 2-20, cold or partial; ``map_memory`` writes the VMID 0 page tables (before step 6's context)."""
        self.discover()
        self.partial = self.booted()
        if self.regs.read(Reg.MP0_SMN_C2PMSG_81) != 0 and not self.partial:
            self.mode1_reset()
        map_memory()
        if not self.partial:
            self.regs.write(Reg.RCC_DEV0_EPF2_STRAP2, self.regs.read(Reg.RCC_DEV0_EPF2_STRAP2) & ~_STRAP2_CLEAR)
            self.regs.write(Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, _DOORBELL_APER_EN)
            self.hub("MM")
            self.ih()
            self.psp_bootloader()
            self.psp_ring()
            self.load_firmware()
            self.smu_start()
            self.regs.poll_reg(Reg.CP_STAT, _U32, _CP_IDLE, "GFX idle")
            self.regs.poll_reg(Reg.RLC_RLCS_BOOTLOAD_STATUS, _BOOTLOAD_COMPLETE, _BOOTLOAD_COMPLETE, "RLC autoload")
        else:
            self.dequeue_all()
            self.regs.write(Reg.GRBM_SOFT_RESET, _CP_SOFT_RESET)  # section 12: reset the MEC (cp + cpc pulse)
            self.regs.pause(values.CP_SOFT_RESET_S)
            self.regs.write(Reg.GRBM_SOFT_RESET, 0)
        self.hub("GC")
        self.mec_config()
        self.gfx_misc()
        self.mec_enable()
        self.sdma_engine()
        self.clocks(top=True)
        self.clock_gating()
        self.regs.write(Reg.SCRATCH_REG7, BOOTED_SCRATCH_REG7)
        self.regs.write(Reg.SCRATCH_REG6, 1)

    def shutdown(self) -> None:
        """Section 12 fini: queues off (the caller's), HQDs dequeued, clocks to level 0, SCRATCH_REG6 = 0 (clean)."""
        self.dequeue_all()
        self.clocks(top=False)
        self.regs.write(Reg.IH_RB_RPTR, self.regs.read(Reg.IH_RB_WPTR) & IH_RB_WPTR_OFFSET.mask)  # drain ring 0
        self.regs.write(Reg.SCRATCH_REG6, 0)

    def mode1_reset(self) -> None:
        """Step 4a (sOS alive, not closed cleanly): if the SMU answers GetSmuVersion, bus mastering off, the debug
        mailbox's Mode1Reset (C2PMSG_54 = 1), 0.5 s, bus mastering on: every block cold again, VRAM kept."""
        try:
            self.smu(SmuMsg.GetSmuVersion, timeout_s=values.SMU_ALIVE_TIMEOUT_S)
        except DeviceTimeout:
            raise DeviceError(
                "the PSP's sOS is alive but the board is not marked cleanly closed (SCRATCH_REG7/6) and the SMU does "
                "not answer GetSmuVersion: the mode-1 reset of section 11 step 4a needs it; power-cycle the board",
                op="boot",
            ) from None
        self.regs.set_bus_master(False)
        self.smu(SmuDebugMsg.Mode1Reset)
        self.regs.pause(values.MODE1_RESET_SETTLE_S)
        self.regs.set_bus_master(True)

    # --- steps 6, 13: a hub (section 4) ---
    def hub(self, hub: str) -> None:
        """Hub ``GC`` or ``MM``: the system aperture over all of VRAM (LOW = FB_BASE >> 18, HIGH = the 256 KB unit
        of FB_TOP's block's last byte), the two default pages, the settings of section 4, then the VMID 0 context."""
        regs, layout, shift = self.regs, self.layout, values.SYSTEM_APERTURE_SHIFT
        regs.write(Reg[f"{hub}MC_VM_SYSTEM_APERTURE_LOW_ADDR"], self.fb_base >> shift)
        regs.write(Reg[f"{hub}MC_VM_SYSTEM_APERTURE_HIGH_ADDR"], (self.fb_top + FB_BLOCK_BYTES - 1) >> shift)
        regs.write_pair(f"{hub}MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR", layout.scratch(0) >> _PAGE_SHIFT, "_LSB", "_MSB")
        regs.write_pair(f"{hub}VM_L2_PROTECTION_FAULT_DEFAULT_ADDR", layout.scratch(1) >> _PAGE_SHIFT)
        regs.apply(values.HUB_SETUP, hub=hub)
        end_page = (1 << 45 >> _PAGE_SHIFT) - 1  # the page table spans GPU addresses 0 .. 2**45 (tinyhil's layout)
        for name, value in (("START", 0), ("END", end_page), ("BASE", layout.page_tables | 1)):  # BASE: PDE valid
            regs.write_pair(f"{hub}VM_CONTEXT0_PAGE_TABLE_{name}_ADDR", value)
        regs.write(Reg[f"{hub}VM_CONTEXT0_CNTL"], _VM_CONTEXT0_CNTL)

    # --- step 7 ---
    def ih(self) -> None:
        """Step 7: both rings in boot memory (pointers 0, no doorbell), ring 0's write-pointer page, storm / flood
        controls, then rb_enable (no interrupt is taken on this path)."""
        regs, layout = self.regs, self.layout
        for ring, (suffix, cntl) in enumerate((("", values.IH_RB_CNTL_RING0), ("_RING1", values.IH_RB_CNTL_RING1))):
            regs.write_pair("IH_RB_BASE", self.mc(layout.ih_ring(ring)) >> 8, suffix, "_HI" + suffix)
            regs.write(Reg[f"IH_RB_CNTL{suffix}"], cntl)
            if not ring:
                regs.write_pair("IH_RB_WPTR_ADDR", self.mc(layout.ih_wptr), "_LO", "_HI")
            for pointer in ("IH_RB_WPTR", "IH_RB_RPTR", "IH_DOORBELL_RPTR"):
                regs.write(Reg[pointer + suffix], 0)
        regs.apply(values.IH_INTERRUPT_CONTROLS)
        regs.apply(values.IH_ENABLE)

    # --- steps 8-10: PSP ---
    def _components(self) -> dict[int, bytes]:
        blob = self.firmware.load("psp_13_0_0_sos.bin")
        return {c.fw_type: blob[c.offset_bytes : c.offset_bytes + c.size_bytes] for c in psp_sos_components(blob)}

    def _payload(self, name: str) -> tuple[IpFirmware, bytes]:
        """IP firmware file ``name`` and what its versioned header says to send from it (section 7), the same way
        for the real and the generated files."""
        blob = self.firmware.load(name)
        return ip_firmware(blob, GFX1100_IP_FIRMWARE[name], name=name), blob

    def _msg1(self, image: bytes) -> int:
        pad = -len(image) % _PSP_FW_ALIGN
        self.regs.vram_write(self.layout.msg1, image + bytes(pad))
        return self.mc(self.layout.msg1)

    def psp_bootloader(self) -> None:
        regs = self.regs
        components = self._components()
        for fw_type, command in _BOOTLOADER_ORDER:
            image = components.get(fw_type)
            if image is None:
                continue
            regs.poll_reg(Reg.MP0_SMN_C2PMSG_35, PSP_BL_READY, PSP_BL_READY, "PSP bootloader ready")
            address = self._msg1(image)
            regs.hdp_flush()
            regs.write(Reg.MP0_SMN_C2PMSG_36, address >> PSP_MSG1_SHIFT)
            regs.write(Reg.MP0_SMN_C2PMSG_35, command)
            answer = regs.poll_reg(Reg.MP0_SMN_C2PMSG_35, PSP_BL_READY, PSP_BL_READY, f"PSP {command.name}")
            if answer & PSP_STATUS_MASK:
                raise DeviceError(f"PSP bootloader {command.name}: status {answer & PSP_STATUS_MASK:#x}", op="boot")
        regs.poll(lambda: regs.read(Reg.MP0_SMN_C2PMSG_81) != 0, "PSP sOS alive (C2PMSG_81 != 0)")

    def psp_ring(self) -> None:
        regs = self.regs
        if regs.read(Reg.MP0_SMN_C2PMSG_71) != 0:
            regs.write(Reg.MP0_SMN_C2PMSG_64, GfxCtrlCmd.DESTROY_RINGS)
        regs.poll_reg(Reg.MP0_SMN_C2PMSG_64, PSP_RESPONSE_READY, PSP_RESPONSE_READY, "PSP sOS ready")
        ring = self.mc(self.layout.psp_ring)
        regs.write(Reg.MP0_SMN_C2PMSG_69, ring & _U32)
        regs.write(Reg.MP0_SMN_C2PMSG_70, ring >> 32)
        regs.write(Reg.MP0_SMN_C2PMSG_71, _PSP_RING_BYTES)
        regs.write(Reg.MP0_SMN_C2PMSG_64, GfxCtrlCmd.INIT_GPCOM_RING)
        answer = regs.poll_reg(Reg.MP0_SMN_C2PMSG_64, PSP_RESPONSE_READY, PSP_RESPONSE_READY, "PSP ring created")
        if answer & PSP_STATUS_MASK:
            raise DeviceError(f"PSP INIT_GPCOM_RING: status {answer & PSP_STATUS_MASK:#x}", op="boot")

    def psp_command(self, cmd_id: GfxCmdId, *union: int, what: str = "") -> int:
        """Submit one frame; returns the response's tmr_size once the fence lands with status 0."""
        regs, layout = self.regs, self.layout
        command = bytearray(PSP_CMD_BYTES)
        struct.pack_into("<I", command, 8, cmd_id)
        struct.pack_into(f"<{len(union)}I", command, PSP_CMD_UNION_OFFSET, *union)
        regs.vram_write(layout.psp_cmd, bytes(command))
        wptr = regs.read(Reg.MP0_SMN_C2PMSG_67)
        self._psp_fence = wptr + 1  # AM's fence value: old write pointer + 1
        cmd, fence = self.mc(layout.psp_cmd), self.mc(layout.psp_fence)
        frame = struct.pack("<6I", cmd & _U32, cmd >> 32, 0, fence & _U32, fence >> 32, self._psp_fence)
        regs.vram_write(layout.psp_ring + wptr * 4 % _PSP_RING_BYTES, frame.ljust(PSP_FRAME_DWORDS * 4, b"\0"))
        regs.hdp_flush()
        regs.write(Reg.MP0_SMN_C2PMSG_67, wptr + PSP_FRAME_DWORDS)
        value = self._psp_fence
        regs.poll(lambda: _DWORD.unpack(regs.vram_read(layout.psp_fence, 4))[0] == value, f"PSP fence of {what}")
        status, tmr_size = struct.unpack("<I12xI", regs.vram_read(layout.psp_cmd + PSP_CMD_RESP_OFFSET, 20))
        if status:
            raise DeviceError(f"PSP {cmd_id.name} {what}: status {status:#x}, expected 0", op="boot")
        return int(tmr_size)

    def load_ip_fw(self, fw_type: PspFwType, image: bytes) -> None:
        address = self._msg1(image)
        self.psp_command(GfxCmdId.LOAD_IP_FW, address & _U32, address >> 32, len(image), fw_type, what=fw_type.name)

    def load_firmware(self) -> None:
        """Step 10: TOC, SMU, TMR, the IP firmware of section 7 (SDMA TH1/TH0, MEC code/stack, IMU I/D, the RLC
        set of the RLC header's minor, RLC_G), then AUTOLOAD_RLC."""
        toc = self._components()[PspFwBinType.TOC]
        address = self._msg1(toc)
        tmr_size = self.psp_command(GfxCmdId.LOAD_TOC, address & _U32, address >> 32, len(toc), what="TOC")
        if not 0 < tmr_size <= BOOT_BYTES // 2:
            raise DeviceError(f"PSP LOAD_TOC: tmr_size {tmr_size:#x}, expected 1 .. {BOOT_BYTES // 2:#x}", op="boot")
        smu, blob = self._payload("smu_13_0_0.bin")
        for section in smu.sections:
            self.load_ip_fw(section.fw_type, section.of(blob))
        tmr = self.mc(self.layout.tmr)
        self.psp_command(GfxCmdId.SETUP_TMR, tmr & _U32, tmr >> 32, tmr_size, what="TMR")
        for name in _IP_FIRMWARE_AFTER_TMR:
            parsed, blob = self._payload(name)
            if parsed.ucode_start_addr is not None:
                self.mec_start = parsed.ucode_start_addr >> _RS64_START_SHIFT
            for section in parsed.sections:
                self.load_ip_fw(section.fw_type, section.of(blob))
        self.psp_command(GfxCmdId.AUTOLOAD_RLC, what="RLC autoload")

    # --- steps 11, 18: SMU ---
    def smu(self, message: SmuMsg | SmuDebugMsg, argument: int = 0, *, timeout_s: float | None = None) -> int:
        """Send one message (section 6; a SmuDebugMsg through the debug mailbox); returns the response argument."""
        regs = self.regs
        msg_reg, arg_reg, response_reg = _SMU_DEBUG_MAILBOX if isinstance(message, SmuDebugMsg) else _SMU_MAILBOX
        regs.write(response_reg, 0)
        regs.write(arg_reg, argument)
        regs.write(msg_reg, message)
        result = [0]

        def answered() -> bool:
            result[0] = regs.read(response_reg)
            return result[0] != 0

        regs.poll(answered, f"SMU {message.name}", timeout_s=timeout_s)
        if result[0] != SmuResult.OK:
            raise DeviceError(f"SMU {message.name}({argument:#x}): response {result[0]:#x}, expected 0x1", op="boot")
        return regs.read(arg_reg)

    def smu_start(self) -> None:
        table = self.mc(self.layout.smu_table)
        self.smu(SmuMsg.SetDriverDramAddrHigh, table >> 32)
        self.smu(SmuMsg.SetDriverDramAddrLow, table & _U32)
        self.smu(SmuMsg.EnableAllSmuFeatures)

    def clocks(self, *, top: bool) -> None:
        """Step 18 (``top``: every clock to its top DPM level) or fini (level 0)."""
        for clock in _CLOCKS:
            levels = self.dpm_levels.get(clock)
            if levels is None:
                count = self.smu(SmuMsg.GetDpmFreqByIndex, clock << 16 | SMU_DPM_LEVEL_COUNT_INDEX)
                freqs = (self.smu(SmuMsg.GetDpmFreqByIndex, clock << 16 | i) for i in range(count))
                levels = self.dpm_levels[clock] = [f & ~SMU_RESPONSE_FLAG for f in freqs]
            if not levels:
                raise DeviceError(f"SMU: {clock.name} has no DPM levels", op="boot")
            mhz = levels[-1] if top else levels[0]
            self.smu(SmuMsg.SetSoftMinByFreq, clock << 16 | mhz)
            self.smu(SmuMsg.SetSoftMaxByFreq, clock << 16 | mhz)

    # --- steps 14-17, 19 ---
    def mec_config(self) -> None:
        regs = self.regs
        regs.write(Reg.GRBM_GFX_CNTL, _GRBM_ME_MEC)
        start = regs.read(Reg.CP_MEC_RS64_PRGRM_CNTR_START) if self.mec_start is None else self.mec_start
        regs.write(Reg.CP_MEC_RS64_PRGRM_CNTR_START, start & _U32)
        regs.write(Reg.CP_MEC_RS64_PRGRM_CNTR_START_HI, start >> 32)
        regs.write(Reg.GRBM_GFX_CNTL, 0)
        regs.write(Reg.CP_MEC_RS64_CNTL, _RS64_PIPE0_RESET)
        regs.write(Reg.CP_MEC_RS64_CNTL, 0)

    def gfx_misc(self) -> None:
        regs = self.regs
        regs.apply(values.GFX_MISC)
        for port, value in _S2A_CP.items():
            regs.write(port, value)
        regs.apply((values.GRBM_CNTL_READ_TIMEOUT,))
        for vmid in range(_VMIDS):
            regs.write(Reg.GRBM_GFX_CNTL, vmid << 4)
            regs.write(Reg.SH_MEM_CONFIG, _SH_MEM_CONFIG)
            regs.write(Reg.SH_MEM_BASES, _SH_MEM_BASES)
        regs.write(Reg.GRBM_GFX_CNTL, 0)
        regs.write(Reg.CP_MEC_DOORBELL_RANGE_LOWER, 0)
        regs.write(Reg.CP_MEC_DOORBELL_RANGE_UPPER, _MEC_DOORBELL_UPPER)

    def mec_enable(self) -> None:
        self.regs.write(Reg.CP_MEC_RS64_CNTL, _RS64_PIPE0_ACTIVE)  # pipe0_reset 0, pipe0_active 1, halt 0

    def sdma_engine(self) -> None:
        for engine in (0, 1):  # watchdog, UTCL1, unhalt, trap_enable: both engines (the driver runs both)
            self.regs.apply(values.SDMA_ENGINE, sdma=engine)
        self.regs.write(Reg.S2A_DOORBELL_ENTRY_2_CTRL, _S2A_SDMA)

    def clock_gating(self) -> None:
        """Step 19: HDP and MM ATC power, then the GFX clock gating inside RLC safe mode."""
        regs, cmd = self.regs, RLC_SAFE_MODE_CMD.mask
        regs.apply(values.CLOCK_GATING_SOC)
        regs.write(Reg.RLC_SAFE_MODE, _RLC_SAFE_MODE_ENTER)
        regs.poll_reg(Reg.RLC_SAFE_MODE, cmd, 0, "RLC safe mode entered")
        regs.apply(values.CLOCK_GATING_GFX)
        regs.write(Reg.RLC_SAFE_MODE, _RLC_SAFE_MODE_EXIT)
        regs.poll_reg(Reg.RLC_SAFE_MODE, cmd, 0, "RLC safe mode left")

    def dequeue_all(self) -> None:
        """Dequeue the HQD this driver uses (me 1, pipe 0, queue 0) if it is active (section 9)."""
        regs = self.regs
        regs.write(Reg.GRBM_GFX_CNTL, _GRBM_ME_MEC)
        if regs.read(Reg.CP_HQD_ACTIVE) & 1:
            regs.write(Reg.CP_HQD_DEQUEUE_REQUEST, 2)
            regs.write(Reg.SPI_COMPUTE_QUEUE_RESET, 1)
            regs.poll_reg(Reg.CP_HQD_ACTIVE, 1, 0, "HQD dequeued")
        regs.write(Reg.GRBM_GFX_CNTL, 0)
