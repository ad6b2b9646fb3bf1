"""The PSP block (MP0 13.0.0): the bootloader, the sOS ring and its commands, and the firmware load (steps 8-10).

``docs/gfx1100.md``, steps 8-10. On a cold boot :meth:`PspBlock.init` sends every sOS component the firmware has
through the bootloader (C2PMSG_35/36), creates the ring (C2PMSG_64/69-71), then loads the TOC, the SMU firmware,
the TMR, the IP firmware of section 7 and starts the RLC autoload, each command's fence and status checked. The
MEC firmware's start address goes to :attr:`BootState.mec_start`. Firmware comes through the firmware seam
(:class:`~tinyhil.amdgpu.firmware.FirmwareSource`).
"""

from __future__ import annotations

import struct
from typing import Final

from tinyhil.errors import DeviceError
from tinyhil.spec.amdgpu_firmware import GFX1100_IP_FIRMWARE, IpFirmware, ip_firmware, psp_sos_components
from tinyhil.spec.gfx1100_psp import (
    PSP_BL_READY,
    PSP_CMD_BYTES,
    PSP_CMD_RESP_OFFSET,
    PSP_CMD_UNION_OFFSET,
    PSP_FRAME_DWORDS,
    PSP_MSG1_SHIFT,
    PSP_RESPONSE_READY,
    PSP_STATUS_MASK,
    GfxCmdId,
    GfxCtrlCmd,
    PspBootloaderCmd,
    PspFwBinType,
    PspFwType,
)
from tinyhil.spec.gfx1100_regs import Reg
from tinyhil.usbgpu.gfx1100.block import BootState
from tinyhil.usbgpu.gfx1100.layout import BOOT_BYTES, PSP_RING_BYTES

__all__ = ["PspBlock"]

_DWORD: Final = struct.Struct("<I")
_U32: Final = 0xFFFF_FFFF
_PSP_FW_ALIGN: Final = 16  # AM pads every payload to 16 bytes (section 7)
_CMD_ID_OFFSET: Final = 8  # psp_gfx_cmd_resp.cmd_id
_SOS_FILE: Final = "psp_13_0_0_sos.bin"
_SMU_FILE: Final = "smu_13_0_0.bin"
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


class PspBlock:
    """The PSP's bootloader and sOS: an :class:`~tinyhil.usbgpu.gfx1100.block.IpBlock`."""

    name = "psp"

    def __init__(self, state: BootState) -> None:
        self.state = state
        self._fence = 0

    def init(self) -> None:
        if not self.state.partial:
            self.bootloader()
            self.ring()
            self.load_firmware()

    def gate_clocks(self) -> None:
        pass

    def fini(self) -> None:
        pass

    def _components(self) -> dict[int, bytes]:
        blob = self.state.firmware.load(_SOS_FILE)
        return {c.fw_type: blob[c.offset_bytes : c.offset_bytes + c.size_bytes] for c in psp_sos_components(blob)}

    def _payload(self, name: str) -> tuple[IpFirmware, bytes]:
        """IP firmware file ``name`` and what its versioned header says to send from it (section 7), the same way
        for the real and the generated files."""
        blob = self.state.firmware.load(name)
        return ip_firmware(blob, GFX1100_IP_FIRMWARE[name], name=name), blob

    def _msg1(self, image: bytes) -> int:
        state = self.state
        pad = -len(image) % _PSP_FW_ALIGN
        state.regs.vram_write(state.layout.msg1, image + bytes(pad))
        return state.mc(state.layout.msg1)

    def bootloader(self) -> None:
        """Step 8: each sOS component through the bootloader, then wait for the sOS (C2PMSG_81)."""
        regs = self.state.regs
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

    def ring(self) -> None:
        """Step 9: destroy a ring left by an earlier driver, then create the GPCOM ring in boot memory."""
        regs = self.state.regs
        if regs.read(Reg.MP0_SMN_C2PMSG_71) != 0:
            regs.write(Reg.MP0_SMN_C2PMSG_64, GfxCtrlCmd.DESTROY_RINGS)
        regs.poll_reg(Reg.MP0_SMN_C2PMSG_64, PSP_RESPONSE_READY, PSP_RESPONSE_READY, "PSP sOS ready")
        ring = self.state.mc(self.state.layout.psp_ring)
        regs.write(Reg.MP0_SMN_C2PMSG_69, ring & _U32)
        regs.write(Reg.MP0_SMN_C2PMSG_70, ring >> 32)
        regs.write(Reg.MP0_SMN_C2PMSG_71, PSP_RING_BYTES)
        regs.write(Reg.MP0_SMN_C2PMSG_64, GfxCtrlCmd.INIT_GPCOM_RING)
        answer = regs.poll_reg(Reg.MP0_SMN_C2PMSG_64, PSP_RESPONSE_READY, PSP_RESPONSE_READY, "PSP ring created")
        if answer & PSP_STATUS_MASK:
            raise DeviceError(f"PSP INIT_GPCOM_RING: status {answer & PSP_STATUS_MASK:#x}", op="boot")

    def command(self, cmd_id: GfxCmdId, *union: int, what: str = "") -> int:
        """Submit one frame; returns the response's tmr_size once the fence lands with status 0."""
        state = self.state
        regs, layout = state.regs, state.layout
        command = bytearray(PSP_CMD_BYTES)
        struct.pack_into("<I", command, _CMD_ID_OFFSET, cmd_id)
        struct.pack_into(f"<{len(union)}I", command, PSP_CMD_UNION_OFFSET, *union)
        regs.vram_write(layout.psp_cmd, bytes(command))
        wptr = regs.read(Reg.MP0_SMN_C2PMSG_67)
        self._fence = wptr + 1  # AM's fence value: old write pointer + 1
        cmd, fence = state.mc(layout.psp_cmd), state.mc(layout.psp_fence)
        frame = struct.pack("<6I", cmd & _U32, cmd >> 32, 0, fence & _U32, fence >> 32, self._fence)
        regs.vram_write(layout.psp_ring + wptr * 4 % PSP_RING_BYTES, frame.ljust(PSP_FRAME_DWORDS * 4, b"\0"))
        regs.hdp_flush()
        regs.write(Reg.MP0_SMN_C2PMSG_67, wptr + PSP_FRAME_DWORDS)
        value = self._fence
        regs.poll(lambda: _DWORD.unpack(regs.vram_read(layout.psp_fence, 4))[0] == value, f"PSP fence of {what}")
        status, tmr_size = struct.unpack("<I12xI", regs.vram_read(layout.psp_cmd + PSP_CMD_RESP_OFFSET, 20))
        if status:
            raise DeviceError(f"PSP {cmd_id.name} {what}: status {status:#x}, expected 0", op="boot")
        return int(tmr_size)

    def load_ip_fw(self, fw_type: PspFwType, image: bytes) -> None:
        address = self._msg1(image)
        self.command(GfxCmdId.LOAD_IP_FW, address & _U32, address >> 32, len(image), fw_type, what=fw_type.name)

    def load_firmware(self) -> None:
        """Step 10: TOC, SMU, TMR, the IP firmware of section 7 (SDMA TH1/TH0, MEC code/stack, IMU I/D, the RLC
        set of the RLC header's minor, RLC_G), then AUTOLOAD_RLC."""
        state = self.state
        toc = self._components()[PspFwBinType.TOC]
        address = self._msg1(toc)
        tmr_size = self.command(GfxCmdId.LOAD_TOC, address & _U32, address >> 32, len(toc), what="TOC")
        if not 0 < tmr_size <= BOOT_BYTES // 2:
            raise DeviceError(f"PSP LOAD_TOC: tmr_size {tmr_size:#x}, expected 1 .. {BOOT_BYTES // 2:#x}", op="boot")
        smu, blob = self._payload(_SMU_FILE)
        for section in smu.sections:
            self.load_ip_fw(section.fw_type, section.of(blob))
        tmr = state.mc(state.layout.tmr)
        self.command(GfxCmdId.SETUP_TMR, tmr & _U32, tmr >> 32, tmr_size, what="TMR")
        for name in _IP_FIRMWARE_AFTER_TMR:
            parsed, blob = self._payload(name)
            if parsed.ucode_start_addr is not None:
                state.mec_start = parsed.ucode_start_addr >> _RS64_START_SHIFT
            for section in parsed.sections:
                self.load_ip_fw(section.fw_type, section.of(blob))
        self.command(GfxCmdId.AUTOLOAD_RLC, what="RLC autoload")
