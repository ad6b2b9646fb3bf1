"""A raw-register driver for the gfx1100 front end, written from ``docs/gfx1100.md`` alone.

Used by ``tests/emulators/amdgpu/gfx1100/``.

It uses no tinyhil driver: every access is a BAR0 / BAR2 / BAR5 read or write with the register numbers of
``tinyhil.spec.gfx1100_regs`` and the values of the spec's tables. VRAM layout of the tests (64 MB):

| VRAM offset | what |
|---|---|
| 0x0 | PDB2 (the root page table); further tables from 0x10000 |
| 0x100000 / 0x110000 / 0x120000 | PSP ring / command buffer / fence |
| 0x200000 | PSP "msg1" buffer (1 MB aligned) |
| 0x400000 | SDMA ring (16 KB), 0x404000 rptr write-back, 0x404100 wptr shadow |
| 0x500000 | MEC ring (4 KB), 0x501000 rptr report, 0x501100 wptr shadow |
| 0x600000.. | data pages |
| 0x800000 | IH ring 0 (``IH_RING_BYTES``), 0x810000 its write-pointer write-back |
| 0x1000000 | TMR (16 MB) |
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from support.system_bus import FakePcie
from tinyhil.amdgpu.firmware import FirmwareSource, GeneratedFirmware
from tinyhil.emulators.amdgpu.gfx1100 import Gfx1100Front
from tinyhil.spec.amdgpu_firmware import GFX1100_IP_FIRMWARE, ip_firmware, psp_sos_components
from tinyhil.spec.amdgpu_sdma import SDMA_COPY_LINEAR_COUNT, SDMA_HEADER_OP, SdmaOp
from tinyhil.spec.gfx1100_gmc import VMID0_VA_START, PteFlag
from tinyhil.spec.gfx1100_psp import (
    PSP_BL_READY,
    PSP_CMD_RESP_OFFSET,
    PSP_RESPONSE_READY,
    GfxCmdId,
    GfxCtrlCmd,
    PspBootloaderCmd,
    PspFwType,
)
from tinyhil.spec.gfx1100_regs import BAR5_DWORDS, Reg
from tinyhil.spec.gfx1100_smu import SmuClock, SmuMsg

VRAM_BYTES = 64 << 20
PSP_RING, PSP_CMD, PSP_FENCE, MSG1 = 0x100000, 0x110000, 0x120000, 0x200000
SDMA_RING, SDMA_RPTR, SDMA_WPTR, SDMA_RING_BYTES = 0x400000, 0x404000, 0x404100, 0x4000
MEC_RING, MEC_RPTR, MEC_WPTR = 0x500000, 0x501000, 0x501100
DATA = 0x600000
TMR = 0x1000000
IH_RING, IH_WPTR, IH_RING_BYTES = 0x800000, 0x810000, 0x100  # a ring of 8 IVs
SDMA_DOORBELL, MEC_DOORBELL = 0x800, 0x18  # BAR2 byte offsets (sections 8, 9)
WAIT_NS = 100_000_000
# sOS components by PSP_FW_TYPE, in the bootloader order of section 11 step 8 (on MP0 13.0 LOAD_TOS_SPL_TABLE
# sends the KDB component again).
BOOTLOADER_ORDER = (
    (3, PspBootloaderCmd.LOAD_KEY_DATABASE),
    (3, PspBootloaderCmd.LOAD_TOS_SPL_TABLE),
    (2, PspBootloaderCmd.LOAD_SYSDRV),
    (7, PspBootloaderCmd.LOAD_SOCDRV),
    (8, PspBootloaderCmd.LOAD_INTFDRV),
    (9, PspBootloaderCmd.LOAD_DBGDRV),
    (10, PspBootloaderCmd.LOAD_RASDRV),
    (1, PspBootloaderCmd.LOAD_SOSDRV),
)
TOC_TYPE = 4
# LOAD_IP_FW order of section 11 step 10 after SMU and SETUP_TMR, with the file that carries each (the RLC set of a
# v2.3 RLC header: IRAM, DRAM_BOOT, RLC_P, RLC_V, then RLC_G).
IP_FW_ORDER = (
    (PspFwType.SDMA_UCODE_TH1, "sdma_6_0_0.bin"),
    (PspFwType.SDMA_UCODE_TH0, "sdma_6_0_0.bin"),
    (PspFwType.RS64_MEC, "gc_11_0_0_mec.bin"),
    (PspFwType.RS64_MEC_P0_STACK, "gc_11_0_0_mec.bin"),
    (PspFwType.IMU_I, "gc_11_0_0_imu.bin"),
    (PspFwType.IMU_D, "gc_11_0_0_imu.bin"),
    (PspFwType.RLC_IRAM, "gc_11_0_0_rlc.bin"),
    (PspFwType.RLC_DRAM_BOOT, "gc_11_0_0_rlc.bin"),
    (PspFwType.RLC_P, "gc_11_0_0_rlc.bin"),
    (PspFwType.RLC_V, "gc_11_0_0_rlc.bin"),
    (PspFwType.RLC_G, "gc_11_0_0_rlc.bin"),
)


def copy_linear(dst: int, src: int, nbytes: int) -> bytes:
    """SDMA COPY_LINEAR (docs/amdgpu.md): header, byte count - 1, parameters, source, destination."""
    words = (SDMA_HEADER_OP.put(SdmaOp.COPY_LINEAR), SDMA_COPY_LINEAR_COUNT.put(nbytes - 1), 0, src & 0xFFFF_FFFF,
             src >> 32, dst & 0xFFFF_FFFF, dst >> 32)  # fmt: skip
    return struct.pack("<7I", *words)


@dataclass
class RawDriver:
    """Register-level bring-up steps of section 11, each written from the spec's tables."""

    front: Gfx1100Front
    pcie: FakePcie
    next_table: int = 0x10000
    psp_wptr: int = 0
    fence_value: int = 0
    firmware: FirmwareSource = field(default_factory=GeneratedFirmware)

    # --- BAR access ---
    def w(self, reg: int, value: int) -> None:
        bar5 = self.front.bar5
        if reg < BAR5_DWORDS:
            bar5.write(reg * 4, struct.pack("<I", value))
        else:  # section 2.3: beyond the 1 MB BAR through RSMU_INDEX (a byte address) / RSMU_DATA
            bar5.write(Reg.BIF_BX_PF0_RSMU_INDEX * 4, struct.pack("<I", reg * 4))
            bar5.write(Reg.BIF_BX_PF0_RSMU_DATA * 4, struct.pack("<I", value))

    def r(self, reg: int) -> int:
        bar5 = self.front.bar5
        if reg < BAR5_DWORDS:
            return int(struct.unpack("<I", bar5.read(reg * 4, 4))[0])
        bar5.write(Reg.BIF_BX_PF0_RSMU_INDEX * 4, struct.pack("<I", reg * 4))
        return int(struct.unpack("<I", bar5.read(Reg.BIF_BX_PF0_RSMU_DATA * 4, 4))[0])

    def poll(self, condition: Callable[[], bool], what: str, tries: int = 100) -> None:
        for _ in range(tries):
            if condition():
                return
        raise AssertionError(f"timed out waiting for {what}")

    @property
    def fb_base(self) -> int:
        return (self.r(Reg.MMMC_VM_FB_LOCATION_BASE) & 0xFFFFFF) << 24

    def mc(self, vram_offset: int) -> int:
        return self.fb_base + vram_offset

    def put(self, vram_offset: int, data: bytes) -> None:
        self.front.vram_write(vram_offset, data)

    def get(self, vram_offset: int, nbytes: int) -> bytes:
        return self.front.vram_read(vram_offset, nbytes)

    def hdp_flush(self) -> None:
        self.front.bar5.write(self.r(Reg.BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL), b"\0\0\0\0")

    # --- GMC (section 4) ---
    def setup_vmid0(self, hub: str) -> None:
        """The hub's system aperture (LOW = FB_BASE >> 18, HIGH = FB_TOP >> 18: MC addresses bypass the table),
        then its VMID 0 context (section 4)."""
        p = "GCVM" if hub == "gc" else "MMVM"
        fb_top = (self.r(Reg.MMMC_VM_FB_LOCATION_TOP) & 0xFFFFFF) << 24
        self.w(Reg[f"{p[:2]}MC_VM_SYSTEM_APERTURE_LOW_ADDR"], self.fb_base >> 18)
        self.w(Reg[f"{p[:2]}MC_VM_SYSTEM_APERTURE_HIGH_ADDR"], fb_top >> 18)
        self.w(Reg[f"{p}_CONTEXT0_PAGE_TABLE_START_ADDR_LO32"], 0)
        self.w(Reg[f"{p}_CONTEXT0_PAGE_TABLE_START_ADDR_HI32"], 0x2)
        self.w(Reg[f"{p}_CONTEXT0_PAGE_TABLE_END_ADDR_LO32"], 0xFFFF_FFFF)
        self.w(Reg[f"{p}_CONTEXT0_PAGE_TABLE_END_ADDR_HI32"], 0x7)
        self.w(Reg[f"{p}_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32"], 0x0 | PteFlag.VALID)  # root table at VRAM 0
        self.w(Reg[f"{p}_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32"], 0)
        self.w(Reg[f"{p}_CONTEXT0_CNTL"], 0x01FF_FE07)

    def map_page(
        self, va: int, address: int, *, system: bool = False, valid: bool = True, writeable: bool = True
    ) -> None:
        """Map the 4 KB page at ``va`` to VRAM offset (or PCIe bus address, ``system``) ``address``."""
        offset = va - VMID0_VA_START
        table = 0
        for level in (3, 2, 1):
            index = offset >> (12 + 9 * level) & 0x1FF
            entry = int.from_bytes(self.get(table + 8 * index, 8), "little")
            if not entry & PteFlag.VALID:
                entry = self.next_table | PteFlag.VALID
                self.put(self.next_table, bytes(4096))
                self.next_table += 4096
                self.put(table + 8 * index, entry.to_bytes(8, "little"))
            table = entry & 0x0000_FFFF_FFFF_FFC0
        flags = PteFlag.READABLE | (PteFlag.WRITEABLE if writeable else 0) | (PteFlag.VALID if valid else 0)
        flags |= PteFlag.SYSTEM if system else 0
        pte = address | flags
        self.put(table + 8 * (offset >> 12 & 0x1FF), pte.to_bytes(8, "little"))

    def flush_tlb(self) -> None:
        """AM's flush_tlb (section 4): HDP flush, then the MM hub (with its semaphore) and the GC hub."""
        self.hdp_flush()
        self.poll(lambda: self.r(Reg.MMVM_INVALIDATE_ENG17_SEM) & 1 == 1, "MM hub semaphore")
        self.w(Reg.MMVM_INVALIDATE_ENG17_REQ, 0x00F8_0001)
        self.poll(lambda: self.r(Reg.MMVM_INVALIDATE_ENG17_ACK) & 1 == 1, "MM hub ack")
        self.w(Reg.MMVM_INVALIDATE_ENG17_SEM, 0)
        self.w(Reg.GCVM_INVALIDATE_ENG17_REQ, 0x00F8_0001)
        self.poll(lambda: self.r(Reg.GCVM_INVALIDATE_ENG17_ACK) & 1 == 1, "GC hub ack")

    # --- IH (section 10, step 7) ---
    def ih_up(self, *, ring_bytes: int = IH_RING_BYTES, writeback: bool = False, overflow: bool = True) -> None:
        """Ring 0 at VRAM ``IH_RING`` (its MC address >> 8), write-back address ``IH_WPTR``, pointers 0, then
        rb_enable | enable_intr (IH_RB_CNTL: rb_size = log2 dwords [5:1], wptr_writeback_enable [8],
        wptr_overflow_enable [16], enable_intr [17], mc_space 4 [30:28])."""
        self.w(Reg.IH_RB_BASE, self.mc(IH_RING) >> 8 & 0xFFFF_FFFF)
        self.w(Reg.IH_RB_BASE_HI, self.mc(IH_RING) >> 40)
        cntl = 4 << 28 | ((ring_bytes // 4).bit_length() - 1) << 1 | int(writeback) << 8 | int(overflow) << 16
        self.w(Reg.IH_RB_CNTL, cntl)
        self.w(Reg.IH_RB_WPTR_ADDR_LO, self.mc(IH_WPTR) & 0xFFFF_FFFF)
        self.w(Reg.IH_RB_WPTR_ADDR_HI, self.mc(IH_WPTR) >> 32)
        self.w(Reg.IH_RB_WPTR, 0)
        self.w(Reg.IH_RB_RPTR, 0)
        self.w(Reg.IH_RB_CNTL, cntl | 1 | 1 << 17)

    def ih_entries(self, first: int, count: int) -> list[bytes]:
        """``count`` 32-byte ring entries from ring byte offset ``first`` (wrapping)."""
        ring = self.get(IH_RING, IH_RING_BYTES)
        return [bytes(ring[(first + 32 * i) % IH_RING_BYTES :][:32]) for i in range(count)]

    # --- PSP (sections 5, 11 steps 8-10) ---
    def bootloader(self, command: int, image: bytes) -> int:
        self.poll(lambda: self.r(Reg.MP0_SMN_C2PMSG_35) & PSP_BL_READY != 0, "bootloader ready")
        self.put(MSG1, image)
        self.hdp_flush()
        self.w(Reg.MP0_SMN_C2PMSG_36, self.mc(MSG1) >> 20)
        self.w(Reg.MP0_SMN_C2PMSG_35, command)
        self.poll(lambda: self.r(Reg.MP0_SMN_C2PMSG_35) & PSP_BL_READY != 0, "bootloader done")
        return self.r(Reg.MP0_SMN_C2PMSG_35)

    def sos_components(self) -> dict[int, bytes]:
        blob = self.firmware.load("psp_13_0_0_sos.bin")
        return {c.fw_type: blob[c.offset_bytes : c.offset_bytes + c.size_bytes] for c in psp_sos_components(blob)}

    def boot_sos(self) -> None:
        components = self.sos_components()
        for fw_type, command in BOOTLOADER_ORDER:  # each only if present (the real file has no SOC_DRV .. RAS_DRV)
            if fw_type in components:
                assert self.bootloader(command, components[fw_type]) == PSP_BL_READY, command.name
        assert self.r(Reg.MP0_SMN_C2PMSG_81) != 0

    def create_ring(self) -> None:
        assert self.r(Reg.MP0_SMN_C2PMSG_71) == 0
        self.poll(lambda: self.r(Reg.MP0_SMN_C2PMSG_64) & PSP_RESPONSE_READY != 0, "sOS ready")
        self.w(Reg.MP0_SMN_C2PMSG_69, self.mc(PSP_RING) & 0xFFFF_FFFF)
        self.w(Reg.MP0_SMN_C2PMSG_70, self.mc(PSP_RING) >> 32)
        self.w(Reg.MP0_SMN_C2PMSG_71, 0x10000)
        self.w(Reg.MP0_SMN_C2PMSG_64, GfxCtrlCmd.INIT_GPCOM_RING)
        self.poll(lambda: self.r(Reg.MP0_SMN_C2PMSG_64) & PSP_RESPONSE_READY != 0, "ring created")
        assert self.r(Reg.MP0_SMN_C2PMSG_64) & 0x8000_FFFF == PSP_RESPONSE_READY

    def psp_command(self, cmd_id: int, *union: int) -> tuple[int, int]:
        """Submit one command frame; returns (status, tmr_size) once the fence lands."""
        command = bytearray(1024)
        struct.pack_into("<I", command, 8, cmd_id)
        struct.pack_into(f"<{len(union)}I", command, 28, *union)
        self.put(PSP_CMD, bytes(command))
        self.fence_value += 1
        frame = struct.pack("<IIIIII", self.mc(PSP_CMD) & 0xFFFF_FFFF, self.mc(PSP_CMD) >> 32, 0,
                            self.mc(PSP_FENCE) & 0xFFFF_FFFF, self.mc(PSP_FENCE) >> 32, self.fence_value)  # fmt: skip
        self.put(PSP_RING + self.psp_wptr * 4, frame.ljust(64, b"\0"))
        self.hdp_flush()
        self.psp_wptr = self.r(Reg.MP0_SMN_C2PMSG_67) + 16
        self.w(Reg.MP0_SMN_C2PMSG_67, self.psp_wptr)
        self.poll(lambda: struct.unpack("<I", self.get(PSP_FENCE, 4))[0] == self.fence_value, "PSP fence")
        status, tmr_size = struct.unpack_from("<I12xI", self.get(PSP_CMD + PSP_CMD_RESP_OFFSET, 20))
        return status, tmr_size

    def load_fw(self, fw_type: int, image: bytes) -> int:
        self.put(MSG1, image)
        mc = self.mc(MSG1)
        return self.psp_command(GfxCmdId.LOAD_IP_FW, mc & 0xFFFF_FFFF, mc >> 32, len(image), fw_type)[0]

    def payload(self, name: str, fw_type: int = PspFwType.SMU) -> bytes:
        """The section of file ``name`` sent as ``fw_type`` (section 7's versioned headers)."""
        blob = self.firmware.load(name)
        sections = ip_firmware(blob, GFX1100_IP_FIRMWARE[name], name=name).sections
        return next(section.of(blob) for section in sections if section.fw_type == fw_type)

    def load_firmware(self) -> None:
        toc = self.sos_components()[TOC_TYPE]
        self.put(MSG1, toc)
        status, tmr_size = self.psp_command(GfxCmdId.LOAD_TOC, self.mc(MSG1) & 0xFFFF_FFFF, self.mc(MSG1) >> 32,
                                            len(toc))  # fmt: skip
        assert status == 0 and 0 < tmr_size <= 0x130_0000
        assert self.load_fw(PspFwType.SMU, self.payload("smu_13_0_0.bin")) == 0
        assert self.psp_command(GfxCmdId.SETUP_TMR, self.mc(TMR) & 0xFFFF_FFFF, self.mc(TMR) >> 32, tmr_size)[0] == 0
        for fw_type, name in IP_FW_ORDER:
            assert self.load_fw(fw_type, self.payload(name, fw_type)) == 0, fw_type.name
        assert self.psp_command(GfxCmdId.AUTOLOAD_RLC)[0] == 0

    # --- SMU (section 6) ---
    def smu(self, message: int, argument: int = 0) -> tuple[int, int]:
        self.w(Reg.MP1_SMN_C2PMSG_90, 0)
        self.w(Reg.MP1_SMN_C2PMSG_82, argument)
        self.w(Reg.MP1_SMN_C2PMSG_66, message)
        self.poll(lambda: self.r(Reg.MP1_SMN_C2PMSG_90) != 0, f"SMU message {message:#x}")
        return self.r(Reg.MP1_SMN_C2PMSG_90), self.r(Reg.MP1_SMN_C2PMSG_82)

    def smu_boot(self) -> None:
        """Section 11 steps 11 and 18."""
        for message, argument in ((SmuMsg.SetDriverDramAddrHigh, 0x80), (SmuMsg.SetDriverDramAddrLow, 0x0300_0000),
                                  (SmuMsg.EnableAllSmuFeatures, 0)):  # fmt: skip
            assert self.smu(message, argument)[0] == 1
        for clock in (SmuClock.UCLK, SmuClock.FCLK, SmuClock.SOCCLK, SmuClock.GFXCLK):
            result, count = self.smu(SmuMsg.GetDpmFreqByIndex, clock << 16 | 0xFF)
            assert result == 1
            levels = [self.smu(SmuMsg.GetDpmFreqByIndex, clock << 16 | i)[1] & 0x7FFF_FFFF for i in range(count)]
            assert self.smu(SmuMsg.SetSoftMinByFreq, clock << 16 | levels[-1])[0] == 1
            assert self.smu(SmuMsg.SetSoftMaxByFreq, clock << 16 | levels[-1])[0] == 1

    # --- whole sequences ---
    def boot(self) -> None:
        """Section 11 steps 2-13 and 20, as far as the minimal sequence needs."""
        assert self.r(Reg.RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE) == VRAM_BYTES >> 20
        assert self.r(Reg.SCRATCH_REG7) != 0xA000_0008 and self.r(Reg.MP0_SMN_C2PMSG_81) == 0  # cold
        self.w(Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, 1)
        self.setup_vmid0("mm")
        self.boot_sos()
        self.create_ring()
        self.load_firmware()
        self.smu_boot()
        assert self.r(Reg.CP_STAT) == 0 and self.r(Reg.RLC_RLCS_BOOTLOAD_STATUS) >> 31 == 1
        self.setup_vmid0("gc")
        self.w(Reg.SCRATCH_REG7, 0xA000_0008)
        self.w(Reg.SCRATCH_REG6, 1)

    def sdma_up(self, ring_va: int, rptr_va: int, wptr_va: int) -> None:
        """Section 8 (and step 17's unhalt and S2A port 2)."""
        self.w(Reg.SDMA0_F32_CNTL, 0)  # halt = 0, th1_reset = 0
        # S2A port 2: enable, awid 0xE, range offset 0x200 dwords (byte 0x800), size 4, awaddr[31:28] 3
        self.w(Reg.S2A_DOORBELL_ENTRY_2_CTRL, 1 | 0xE << 1 | 0x200 << 7 | 4 << 17 | 3 << 28)
        self.w(Reg.SDMA0_QUEUE0_MINOR_PTR_UPDATE, 1)
        for reg in ("RB_RPTR", "RB_RPTR_HI", "RB_WPTR", "RB_WPTR_HI"):
            self.w(Reg[f"SDMA0_QUEUE0_{reg}"], 0)
        self.w(Reg.SDMA0_QUEUE0_RB_BASE, ring_va >> 8 & 0xFFFF_FFFF)
        self.w(Reg.SDMA0_QUEUE0_RB_BASE_HI, ring_va >> 40)
        self.w(Reg.SDMA0_QUEUE0_RB_RPTR_ADDR_LO, rptr_va & 0xFFFF_FFFF)
        self.w(Reg.SDMA0_QUEUE0_RB_RPTR_ADDR_HI, rptr_va >> 32)
        self.w(Reg.SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO, wptr_va & 0xFFFF_FFFF)
        self.w(Reg.SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI, wptr_va >> 32)
        self.w(Reg.SDMA0_QUEUE0_DOORBELL_OFFSET, SDMA_DOORBELL)
        self.w(Reg.SDMA0_QUEUE0_DOORBELL, 1 << 28)
        self.w(Reg.SDMA0_QUEUE0_MINOR_PTR_UPDATE, 0)
        rb_size = (SDMA_RING_BYTES // 4).bit_length() - 1
        self.w(Reg.SDMA0_QUEUE0_RB_CNTL, 1 | rb_size << 1 | 1 << 11 | 1 << 12 | 4 << 16 | 1 << 23)
        self.w(Reg.SDMA0_QUEUE0_IB_CNTL, 1)

    def sdma_submit(self, packet: bytes, wptr: int = 0) -> int:
        """Write ``packet`` at ring byte ``wptr``, then the wptr shadow, then ring the doorbell; the new wptr."""
        self.put(SDMA_RING + wptr, packet)
        wptr += len(packet)
        self.put(SDMA_WPTR, wptr.to_bytes(8, "little"))
        self.doorbell(SDMA_DOORBELL, wptr)
        return wptr

    def sdma_rptr(self) -> int:
        """The read pointer the engine wrote back (bytes)."""
        return int.from_bytes(self.get(SDMA_RPTR, 8), "little")

    def doorbell(self, offset: int, value: int) -> None:
        self.hdp_flush()
        self.front.doorbell_write(offset, value.to_bytes(8, "little"))

    def run_until(self, condition: Callable[[], bool], what: str) -> None:
        self.front.gpu.wait(condition, WAIT_NS, what=what)
