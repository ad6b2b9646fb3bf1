"""The PSP (MP0 13.0.0): bootloader mailbox, sOS ring, command frames with fence and status, firmware images, TMR.

``docs/gfx1100.md`` section 5. Registers (absolute dwords): C2PMSG_33 IFWI ready, C2PMSG_35/36 bootloader
command and buffer (>> 20), C2PMSG_64 ring control and response, C2PMSG_67 ring write pointer (dwords),
C2PMSG_69/70/71 ring base and size, C2PMSG_81 sOS alive. Addresses the PSP is given are MC addresses or VMID 0
VAs of the MM hub.

Firmware images: every image the PSP is given (a bootloader component, the TOC, a LOAD_IP_FW payload) is an AMD
signed image, checked with :func:`tinyhil.spec.amdgpu_firmware.parse_signed_image` (magic, signed flag, signature
type, the size field against header + body + signature, and that the image fits the size the command gives; the
bootloader, given no size, reads it from the header). A bad image gets a status, as on hardware. The model cannot
check AMD's signature (it has no keys): a real PSP also verifies it. Model choices (docs/gfx1100.md): a bootloader
failure reads back as C2PMSG_35 = ready | the low 16 bits of the status; LOAD_SOSDRV needs LOAD_SYSDRV first;
LOAD_IP_FW (except the SMU's, which AM sends before SETUP_TMR) needs the TMR; SETUP_TMR needs LOAD_TOC; AUTOLOAD_RLC
needs RLC_G; LOAD_TOC answers a TMR size of 16 MB.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import Final

from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu_firmware import SIGNED_IMAGE_HEADER_BYTES, parse_signed_image
from tinyhil.spec.gfx1100_psp import (
    PSP_BL_READY,
    PSP_CMD_BYTES,
    PSP_CMD_RESP_OFFSET,
    PSP_CMD_UNION_OFFSET,
    PSP_FRAME_DWORDS,
    PSP_IFWI_READY,
    PSP_MSG1_SHIFT,
    PSP_RESPONSE_READY,
    PSP_STATUS_MASK,
    GfxCmdId,
    GfxCtrlCmd,
    PspBootloaderCmd,
    PspFwType,
    PspStatus,
)
from tinyhil.spec.gfx1100_regs import Reg

from ..errors import GpuMemoryFault
from .gmc import Gmc
from .regfile import RegisterFile

__all__ = ["Psp"]

_log = logging.getLogger("tinyhil.emulators.amdgpu.gfx1100")
_FRAME: Final = struct.Struct("<IIIIII")  # cmd_buf_addr lo/hi, cmd_buf_size, fence_addr lo/hi, fence_value
_UNION: Final = struct.Struct("<IIII")  # the first four u32 of the command union
_U32: Final = struct.Struct("<I")
_TMR_SIZE_OFFSET: Final = PSP_CMD_RESP_OFFSET + 16
_TMR_BYTES: Final = 16 << 20  # model: LOAD_TOC's answer (section 15: the real value was not determined)
_TMR_ALIGN: Final = 1 << 20
_MAX_IMAGE_BYTES: Final = 64 << 20  # model: a larger "image" is a bad argument, not an allocation
_BL_COMMANDS: Final = frozenset(int(c) for c in PspBootloaderCmd)
# Bootloader commands whose image may be the key database (zeros for a magic): Linux and AM on MP0 13.0 send the KDB
# component with LOAD_TOS_SPL_TABLE too.
_KEY_DATABASE_COMMANDS: Final = frozenset({PspBootloaderCmd.LOAD_KEY_DATABASE, PspBootloaderCmd.LOAD_TOS_SPL_TABLE})


class Psp:
    """The PSP's registers and state; the front end routes C2PMSG_35 / 64 / 67 writes here."""

    def __init__(self, regs: RegisterFile, memory: Gmc, on_fw_loaded: Callable[[PspFwType | int], None]):
        self.regs = regs
        self.memory = memory
        self.on_fw_loaded = on_fw_loaded
        regs.set_reset_value(Reg.MP0_SMN_C2PMSG_33, PSP_IFWI_READY)
        regs.set_reset_value(Reg.MP0_SMN_C2PMSG_35, PSP_BL_READY)
        regs.on_write(Reg.MP0_SMN_C2PMSG_35, self._bootloader)
        regs.on_write(Reg.MP0_SMN_C2PMSG_64, self._control)
        regs.on_write(Reg.MP0_SMN_C2PMSG_67, self._submit)
        self.reset()

    def reset(self) -> None:
        """Cold state (section 5 protocol step 1): bootloader ready, no sOS, no ring, nothing loaded."""
        self.components: list[PspBootloaderCmd] = []
        self.sos_alive = False
        self.ring: tuple[int, int] | None = None  # (address, bytes)
        self.wptr = 0  # dwords
        self.toc_loaded = False
        self.tmr: tuple[int, int] | None = None  # (MC address, bytes)
        self.firmware: list[int] = []  # fw_type of each LOAD_IP_FW accepted, in order
        self.rlc_autoloaded = False
        self.commands: list[tuple[int, int]] = []  # (cmd_id, status) of every ring command

    # --- memory as the PSP sees it (MM hub) ---
    def _read(self, address: int, nbytes: int) -> bytes:
        return bytes(self.memory.mm.read(address, nbytes))

    def _image(self, address: int, nbytes: int | None, *, key_database: bool = False) -> PspStatus:
        """Check the signed image at ``address`` (``nbytes``: the size the command gave; None: its header's)."""
        name = f"PSP image at {address:#x}"
        try:
            if nbytes is None:
                header = self._read(address, SIGNED_IMAGE_HEADER_BYTES)
                nbytes = parse_signed_image(header, name=name, key_database=key_database, header_only=True).image_bytes
            if not SIGNED_IMAGE_HEADER_BYTES <= nbytes <= _MAX_IMAGE_BYTES:
                _log.info("PSP: image at %#x of %#x bytes, expected %#x..%#x", address, nbytes,
                          SIGNED_IMAGE_HEADER_BYTES, _MAX_IMAGE_BYTES)  # fmt: skip
                return PspStatus.TEE_ERROR_BAD_PARAMETERS
            parse_signed_image(self._read(address, nbytes), name=name, key_database=key_database)
        except GpuMemoryFault as fault:
            _log.info("PSP: image at %#x unreadable: %s", address, fault)
            return PspStatus.TEE_ERROR_BAD_PARAMETERS
        except InvalidArgument as error:
            _log.info("PSP: image rejected: %s", error)
            return PspStatus.TEE_ERROR_BAD_FORMAT
        return PspStatus.SUCCESS

    # --- bootloader (C2PMSG_35) ---
    def _bootloader(self, value: int) -> None:
        regs = self.regs
        if value not in _BL_COMMANDS:
            regs.store(Reg.MP0_SMN_C2PMSG_35, PSP_BL_READY | PspStatus.PSP_ERR_UNKNOWN_COMMAND & PSP_STATUS_MASK)
            return
        command = PspBootloaderCmd(value)
        address = regs.stored(Reg.MP0_SMN_C2PMSG_36) << PSP_MSG1_SHIFT
        status = self._image(address, None, key_database=command in _KEY_DATABASE_COMMANDS)
        needs_sysdrv = command is PspBootloaderCmd.LOAD_SOSDRV and PspBootloaderCmd.LOAD_SYSDRV not in self.components
        if status is PspStatus.SUCCESS and needs_sysdrv:
            status = PspStatus.TEE_ERROR_BAD_STATE
        if status is PspStatus.SUCCESS:
            self.components.append(command)
            if command is PspBootloaderCmd.LOAD_SOSDRV:
                self.sos_alive = True
                regs.store(Reg.MP0_SMN_C2PMSG_81, 1)
                regs.store(Reg.MP0_SMN_C2PMSG_64, PSP_RESPONSE_READY)
        regs.store(Reg.MP0_SMN_C2PMSG_35, PSP_BL_READY | status & PSP_STATUS_MASK)

    # --- ring control (C2PMSG_64) ---
    def _control(self, value: int) -> None:
        regs = self.regs
        if not self.sos_alive:
            return  # no sOS to answer: the register keeps what was written (no response bit)
        status = PspStatus.SUCCESS
        if value == GfxCtrlCmd.INIT_GPCOM_RING:
            size = regs.stored(Reg.MP0_SMN_C2PMSG_71)
            base = regs.pair(Reg.MP0_SMN_C2PMSG_69, Reg.MP0_SMN_C2PMSG_70)
            if not size or size % (PSP_FRAME_DWORDS * 4):
                status = PspStatus.TEE_ERROR_BAD_PARAMETERS
            else:
                self.ring, self.wptr = (base, size), 0
        elif value == GfxCtrlCmd.DESTROY_RINGS:
            self.ring, self.wptr = None, 0
            regs.store(Reg.MP0_SMN_C2PMSG_71, 0)
        elif value not in {int(c) for c in GfxCtrlCmd}:
            status = PspStatus.PSP_ERR_UNKNOWN_COMMAND
        regs.store(Reg.MP0_SMN_C2PMSG_64, PSP_RESPONSE_READY | status & PSP_STATUS_MASK)

    # --- command submission (C2PMSG_67) ---
    def _submit(self, wptr: int) -> None:
        if self.ring is None:
            _log.info("PSP: C2PMSG_67 = %#x with no ring", wptr)
            return
        base, size = self.ring
        while self.wptr + PSP_FRAME_DWORDS <= wptr:
            frame_at = base + (self.wptr * 4) % size
            self.wptr += PSP_FRAME_DWORDS
            try:
                frame = _FRAME.unpack(self._read(frame_at, _FRAME.size))
                self._frame(frame)
            except GpuMemoryFault as fault:
                _log.info("PSP: frame at %#x dropped: %s", frame_at, fault)

    def _frame(self, frame: tuple[int, ...]) -> None:
        cmd_lo, cmd_hi, _, fence_lo, fence_hi, fence_value = frame
        cmd_addr = cmd_lo | cmd_hi << 32
        command = self._read(cmd_addr, PSP_CMD_BYTES)
        cmd_id = _U32.unpack_from(command, 8)[0]
        union = _UNION.unpack_from(command, PSP_CMD_UNION_OFFSET)
        status, tmr_size = self._execute(cmd_id, union)
        self.commands.append((cmd_id, int(status)))
        response = _U32.pack(int(status))
        mm = self.memory.mm
        mm.write(cmd_addr + PSP_CMD_RESP_OFFSET, response)
        if tmr_size is not None:
            mm.write(cmd_addr + _TMR_SIZE_OFFSET, _U32.pack(tmr_size))
        mm.write(fence_lo | fence_hi << 32, _U32.pack(fence_value))

    def _execute(self, cmd_id: int, union: tuple[int, int, int, int]) -> tuple[PspStatus, int | None]:
        lo, hi, size, kind = union
        address = lo | hi << 32
        if cmd_id == GfxCmdId.LOAD_TOC:
            status = self._image(address, size)
            self.toc_loaded = status is PspStatus.SUCCESS
            return status, _TMR_BYTES if self.toc_loaded else None
        if cmd_id == GfxCmdId.SETUP_TMR:
            if not self.toc_loaded:
                return PspStatus.TEE_ERROR_BAD_STATE, None
            vram_end = self.memory.fb_base + self.memory.vram_bytes
            if address % _TMR_ALIGN or size < _TMR_BYTES or not self.memory.fb_base <= address <= vram_end - size:
                return PspStatus.TEE_ERROR_BAD_PARAMETERS, None
            self.tmr = (address, size)
            return PspStatus.SUCCESS, None
        if cmd_id == GfxCmdId.DESTROY_TMR:
            self.tmr = None
            return PspStatus.SUCCESS, None
        if cmd_id == GfxCmdId.LOAD_IP_FW:
            if self.tmr is None and kind != PspFwType.SMU:
                return PspStatus.TEE_ERROR_BAD_STATE, None
            status = self._image(address, size)
            if status is PspStatus.SUCCESS:
                self.firmware.append(kind)
                self.on_fw_loaded(kind)
            return status, None
        if cmd_id == GfxCmdId.AUTOLOAD_RLC:
            if PspFwType.RLC_G not in self.firmware:
                return PspStatus.TEE_ERROR_BAD_STATE, None
            self.rlc_autoloaded = True
            return PspStatus.SUCCESS, None
        return PspStatus.PSP_ERR_UNKNOWN_COMMAND, None
