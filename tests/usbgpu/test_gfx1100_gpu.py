"""``Gfx1100UsbGpu`` over MockUSB3 with Navi 31's register interface: the boot follows the spec's sequence (the
order of its waits in the register-access log is section 11's), the page tables reach the bridge, a second open
of a booted board takes the partial path and close leaves the board as section 12 says, and a GPU that is not a
gfx1100 is refused."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

from tinyhil.amdgpu import AmdQueue, QueueStopped, pm4_nop, sdma_copy_linear, sdma_fence, sdma_nop
from tinyhil.amdgpu.firmware import GeneratedFirmware
from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.emulators.amdgpu.errors import GpuMemoryFault
from tinyhil.emulators.amdgpu.gfx1100 import Gfx1100Function
from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.emulators.observe import Observer
from tinyhil.emulators.pcie.endpoint import PlainEndpoint
from tinyhil.errors import DeviceError, InvalidArgument, StateError
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.amdgpu import SYS_APERTURE, QueueKind
from tinyhil.spec.amdgpu_sdma import SdmaOp
from tinyhil.spec.asm2464 import PCIE_SRAM_BASE
from tinyhil.spec.gfx1100_gmc import PteFlag
from tinyhil.spec.gfx1100_ih import IH_RING_BYTES, IhClientId, IhSourceId
from tinyhil.spec.gfx1100_regs import Reg
from tinyhil.spec.gfx1100_smu import SmuDebugMsg
from tinyhil.spec.gfx1100_soc import BOOTED_SCRATCH_REG7
from tinyhil.spec.pci import Command
from tinyhil.usbgpu.gfx1100_gpu import Gfx1100UsbGpu, open_usb_gpu
from tinyhil.usbgpu.over_usb import UsbAmdDevice

# Section 11, the "waits for" column, in order: (step, register the driver polls).
SPEC_WAITS = (
    (4, Reg.SCRATCH_REG7),  # boot-state check: not the booted mark (cold)
    (4, Reg.MP0_SMN_C2PMSG_81),  # boot-state check: 0, no reset needed
    (8, Reg.MP0_SMN_C2PMSG_35),  # bootloader ready, before and after each component
    (8, Reg.MP0_SMN_C2PMSG_81),  # after SOS: sOS alive
    (9, Reg.MP0_SMN_C2PMSG_64),  # ring: bit 31, then status 0
    (11, Reg.MP1_SMN_C2PMSG_90),  # SMU: 1 for each message
    (12, Reg.CP_STAT),  # GFX idle
    (18, Reg.MP1_SMN_C2PMSG_90),  # clocks: SMU messages again
    (19, Reg.RLC_SAFE_MODE),  # bit 0 = 0
    (21, Reg.MMVM_INVALIDATE_ENG17_SEM),  # the TLB flush of section 4: semaphore, then acks
    (21, Reg.MMVM_INVALIDATE_ENG17_ACK),
    (21, Reg.GCVM_INVALIDATE_ENG17_ACK),
)
# A board whose sOS is alive but that no driver closed cleanly: step 4a's waits come before the cold boot's.
RESET_WAITS = (
    *SPEC_WAITS[:2],
    ("4a", Reg.MP1_SMN_C2PMSG_90),  # the SMU answers GetSmuVersion
    ("4a", Reg.MP1_SMN_C2PMSG_54),  # the debug mailbox answers Mode1Reset with 1
    *SPEC_WAITS[2:],
)
WAIT_REGISTERS = frozenset(reg for _, reg in RESET_WAITS)
# Section 10's table (and section 4's aperture) as a cold boot must write it: each register at least once.
SECTION_10 = (
    Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, Reg.RCC_DEV0_EPF2_STRAP2, Reg.S2A_DOORBELL_ENTRY_0_CTRL,
    Reg.S2A_DOORBELL_ENTRY_2_CTRL, Reg.S2A_DOORBELL_ENTRY_3_CTRL,
    *(Reg[f"IH_{name}{ring}"] for ring in ("", "_RING1") for name in ("RB_BASE", "RB_CNTL", "RB_RPTR", "RB_WPTR",
                                                                      "DOORBELL_RPTR")),
    Reg.IH_RB_BASE_HI, Reg.IH_RB_BASE_HI_RING1, Reg.IH_RB_WPTR_ADDR_LO, Reg.IH_RB_WPTR_ADDR_HI,
    Reg.IH_STORM_CLIENT_LIST_CNTL, Reg.IH_INT_FLOOD_CNTL, Reg.IH_MSI_STORM_CTRL,
    *(Reg[f"{hub}{name}"] for hub in ("GC", "MM") for name in (
        "MC_VM_AGP_BASE", "MC_VM_AGP_BOT", "MC_VM_AGP_TOP", "MC_VM_SYSTEM_APERTURE_LOW_ADDR",
        "MC_VM_SYSTEM_APERTURE_HIGH_ADDR", "MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB",
        "MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB", "VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32",
        "VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32", "MC_VM_MX_L1_TLB_CNTL", "VM_L2_CNTL", "VM_L2_CNTL2",
        "VM_L2_CNTL3", "VM_L2_CNTL4", "VM_L2_CNTL5", "VM_L2_PROTECTION_FAULT_CNTL2",
        "VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32", "VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32",
        "VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32", "VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32",
        "VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32", "VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32",
        *(f"VM_INVALIDATE_ENG{engine}_ADDR_RANGE_{half}" for engine in range(18) for half in ("LO32", "HI32")))),
    Reg.GRBM_CNTL, Reg.TCP_CNTL, Reg.RLC_CNTL, Reg.RLC_SRM_CNTL, Reg.RLC_SPM_MC_CNTL,
    Reg.HDP_MEM_POWER_CTRL, Reg.MM_ATC_L2_MISC_CG, Reg.RLC_SAFE_MODE, Reg.RLC_CGCG_CGLS_CTRL,
    Reg.CP_RB_WPTR_POLL_CNTL, Reg.CP_INT_CNTL, Reg.SDMA0_RLC_CGCG_CTRL, Reg.SDMA1_RLC_CGCG_CTRL,
    Reg.RLC_CGTT_MGCG_OVERRIDE, Reg.SCRATCH_REG7, Reg.SCRATCH_REG6,
    *(Reg[f"SDMA{engine}_{name}"] for engine in (0, 1) for name in ("WATCHDOG_CNTL", "UTCL1_CNTL", "UTCL1_PAGE")),
)  # fmt: skip
# Registers a cold boot writes and the partial path of section 12 skips (steps 5-11).
COLD_ONLY = (Reg.MP0_SMN_C2PMSG_35, Reg.MP0_SMN_C2PMSG_67, Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN)


class RegisterLog(Observer):
    def __init__(self) -> None:
        self.accesses: list[tuple[int, int, bool]] = []

    def gpu_register(self, address: int, value: int, write: bool) -> None:
        self.accesses.append((address, value, write))

    def waits(self) -> list[int]:
        """The polled registers read, in order, repeats of one poll collapsed."""
        order: list[int] = []
        for address, _, write in self.accesses:
            if not write and address in WAIT_REGISTERS and (not order or order[-1] != address):
                order.append(address)
        return order

    def written(self) -> set[int]:
        return {address for address, _, write in self.accesses if write}


@pytest.fixture
def usb() -> Iterator[MockUSB3]:
    with MockUSB3(vram_bytes=64 << 20) as board:
        yield board


def front_of(usb: MockUSB3) -> Gfx1100Function:
    function = usb.bridge.function
    assert isinstance(function, Gfx1100Function)
    return function


def open_gpu(usb: MockUSB3) -> Gfx1100UsbGpu:
    gpu = open_usb_gpu(Asm2464Controller(usb), firmware=GeneratedFirmware())
    assert isinstance(gpu, Gfx1100UsbGpu)
    return gpu


def test_a_cold_boot_waits_in_the_order_of_the_spec_table(usb: MockUSB3) -> None:
    log = RegisterLog()
    with front_of(usb).front.observe(log):
        gpu = open_gpu(usb)
    assert not gpu.boot.partial
    assert log.waits() == [int(reg) for _, reg in SPEC_WAITS]
    regs = front_of(usb).front.regs
    assert regs.stored(Reg.SCRATCH_REG7) == BOOTED_SCRATCH_REG7 and regs.stored(Reg.SCRATCH_REG6) == 1
    assert front_of(usb).front.psp.rlc_autoloaded


def test_the_page_table_maps_vram_at_its_offset_and_the_bridge_sram_through_system_ptes(usb: MockUSB3) -> None:
    gpu = open_gpu(usb)
    hub = front_of(usb).front.memory.gc_hub
    vram = hub.leaf(0x400000)
    assert (vram.system, vram.address, vram.nbytes) == (False, 0x400000, 2 << 20)
    sram = hub.leaf(SYS_APERTURE + PCIE_SRAM_BASE + 0x1234)
    assert (sram.system, sram.address, sram.nbytes) == (True, PCIE_SRAM_BASE + 0x1000, 0x1000)
    root = gpu.boot.layout.page_tables
    assert front_of(usb).front.regs.stored(Reg.GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32) == root | PteFlag.VALID


def test_sdma_copies_between_vram_and_the_bridge_sram_through_the_page_table(usb: MockUSB3) -> None:
    gpu = open_gpu(usb)
    sdma = gpu.create_queue(
        QueueKind.SDMA, ring_va=0x100000, ring_bytes=1 << 12, rptr_va=0x1000, wptr_va=0x1008, index=1
    )
    from tinyhil.amdgpu.sdma import sdma_copy_linear

    data = np.random.default_rng(3).integers(0, 256, 0x3000, dtype=np.uint8)
    front_of(usb).front.memory.vram[0x500000 : 0x500000 + data.size] = data.tobytes()
    sdma.submit(sdma_copy_linear(SYS_APERTURE + PCIE_SRAM_BASE + 0x800, 0x500000, data.size))
    sdma.wait_idle()
    assert bytes(usb.bridge.memory.sram[0x800 : 0x800 + data.size]) == data.tobytes()


def test_an_unmapped_gpu_address_is_a_protection_fault_the_driver_reports(usb: MockUSB3) -> None:
    gpu = open_gpu(usb)
    sdma = gpu.create_queue(QueueKind.SDMA, ring_va=0x100000, ring_bytes=1 << 12, rptr_va=0x1000, wptr_va=0x1008)
    from tinyhil.amdgpu.errors import QueueStopped
    from tinyhil.amdgpu.sdma import sdma_copy_linear

    unmapped = SYS_APERTURE + 0x40_0000  # between the SRAM and the admin window: no PTE
    sdma.submit(sdma_copy_linear(0x500000, unmapped, 64))
    with pytest.raises(QueueStopped, match="protection fault"):
        sdma.wait_idle()
    queue = usb.gpu.queues[0]
    assert queue.fault_va == unmapped


def test_a_second_open_of_a_booted_board_takes_the_partial_path_and_close_leaves_it_clean(usb: MockUSB3) -> None:
    first = UsbAmdDevice("first", usb, firmware=GeneratedFirmware())
    assert isinstance(first.gpu, Gfx1100UsbGpu) and not first.gpu.boot.partial
    buf = first.alloc(4096)
    first.copyin(buf, b"kept" * 1024)
    first.close()
    regs = front_of(usb).front.regs
    assert regs.stored(Reg.SCRATCH_REG7) == BOOTED_SCRATCH_REG7 and regs.stored(Reg.SCRATCH_REG6) == 0
    assert usb.gpu.queues == ()  # section 12 fini: SDMA off, HQDs dequeued
    log = RegisterLog()
    with front_of(usb).front.observe(log):
        second = UsbAmdDevice("second", usb, firmware=GeneratedFirmware())
    assert isinstance(second.gpu, Gfx1100UsbGpu) and second.gpu.boot.partial
    assert not log.written() & {int(reg) for reg in COLD_ONLY}  # no bootloader, no PSP ring, no SOC step
    again = second.alloc(4096)
    second.copyin(again, b"warm" * 1024)
    assert bytes(second.copyout(again)) == b"warm" * 1024
    second.close()


class ResetLog(RegisterLog):
    """The register log, and COMMAND.MASTER of the GPU function when the driver asked for the mode-1 reset."""

    def __init__(self, function: Gfx1100Function) -> None:
        super().__init__()
        self.function = function
        self.master_at_reset: list[bool] = []

    def gpu_register(self, address: int, value: int, write: bool) -> None:
        super().gpu_register(address, value, write)
        if write and address == Reg.MP1_SMN_C2PMSG_75:
            self.master_at_reset.append(bool(self.function.config.command & Command.MASTER))


def leave_open(usb: MockUSB3) -> None:
    open_gpu(usb)  # booted, never closed: SCRATCH_REG6 stays 1


def leave_crashed(usb: MockUSB3) -> None:
    UsbAmdDevice("crashed", usb, firmware=GeneratedFirmware()).close()
    front_of(usb).front.regs.store(Reg.SCRATCH_REG6, 1)  # what a driver that died after its boot leaves


@pytest.mark.parametrize("leave", [leave_open, leave_crashed], ids=["dropped without close", "SCRATCH_REG6 = 1"])
def test_a_board_left_warm_but_not_cleanly_closed_reopens_through_the_mode1_reset(
    usb: MockUSB3, leave: Callable[[MockUSB3], None]
) -> None:
    leave(usb)
    function = front_of(usb)
    assert function.front.psp.sos_alive
    log = ResetLog(function)
    with function.front.observe(log):
        device = UsbAmdDevice("after the reset", usb, firmware=GeneratedFirmware())
    gpu = device.gpu
    assert isinstance(gpu, Gfx1100UsbGpu) and not gpu.boot.partial
    flush = [int(reg) for step, reg in SPEC_WAITS if step == 21]  # the device maps its signal and profile memory
    assert log.waits() == [int(reg) for _, reg in RESET_WAITS] + flush * 2
    assert (Reg.MP1_SMN_C2PMSG_75, SmuDebugMsg.Mode1Reset, True) in log.accesses
    assert log.master_at_reset == [False]  # bus mastering off for the reset (section 11 step 4a) ...
    assert function.config.command & Command.MASTER  # ... and on again for the cold boot
    buf = device.alloc(4096)
    device.copyin(buf, b"reset" * 800)  # SDMA through the bridge: DMA needs bus mastering
    assert bytes(device.copyout(buf))[:4000] == b"reset" * 800
    device.close()


def test_a_board_whose_sos_is_alive_and_smu_is_silent_is_refused(usb: MockUSB3) -> None:
    open_gpu(usb)
    front_of(usb).front.smu.alive = False  # the SMU no longer answers (no mode-1 reset is possible)
    with pytest.raises(DeviceError, match=r"SMU does not answer GetSmuVersion.*power-cycle"):
        open_gpu(usb)


def test_a_cold_boot_writes_every_register_of_section_10(usb: MockUSB3) -> None:
    log = RegisterLog()
    with front_of(usb).front.observe(log):
        gpu = open_gpu(usb)
    missing = [Reg(reg).name for reg in SECTION_10 if reg not in log.written()]
    assert missing == []
    regs, fb_base = front_of(usb).front.regs, gpu.boot.fb_base
    for hub in ("GC", "MM"):  # section 4's values
        low, high = (regs.stored(Reg[f"{hub}MC_VM_SYSTEM_APERTURE_{end}_ADDR"]) << 18 for end in ("LOW", "HIGH"))
        assert (low, high + (256 << 10)) == (fb_base, fb_base + gpu.vram_bytes)  # all of VRAM, HIGH inclusive
        assert regs.stored(Reg[f"{hub}MC_VM_MX_L1_TLB_CNTL"]) == 0x1859
        assert regs.stored(Reg[f"{hub}VM_L2_CNTL"]) == 0x8_0801
        assert regs.stored(Reg[f"{hub}VM_L2_CNTL3"]) == 0x8013_0009
        assert regs.stored(Reg[f"{hub}MC_VM_AGP_BOT"]) == 0xFF_FFFF
    assert regs.stored(Reg.IH_RB_CNTL) & 1 and regs.stored(Reg.IH_RB_CNTL_RING1) & 1  # rb_enable, last
    assert regs.pair(Reg.IH_RB_BASE, Reg.IH_RB_BASE_HI) << 8 == gpu.boot.mc(gpu.boot.layout.ih_ring(0))
    assert front_of(usb).front.memory.mm_hub.aperture == (fb_base, fb_base + gpu.vram_bytes)


def test_the_partial_path_pulses_grbm_soft_reset_cp_and_cpc(usb: MockUSB3) -> None:
    cold = RegisterLog()
    with front_of(usb).front.observe(cold):
        UsbAmdDevice("first", usb, firmware=GeneratedFirmware()).close()
    assert Reg.GRBM_SOFT_RESET not in cold.written()
    warm = RegisterLog()
    with front_of(usb).front.observe(warm):
        second = UsbAmdDevice("second", usb, firmware=GeneratedFirmware())
    assert isinstance(second.gpu, Gfx1100UsbGpu) and second.gpu.boot.partial
    pulses = [value for address, value, write in warm.accesses if write and address == Reg.GRBM_SOFT_RESET]
    assert pulses == [1 << 0 | 1 << 18, 0]  # soft_reset_cp | soft_reset_cpc, then released (section 12)
    second.close()


def test_close_drains_the_ih_ring(usb: MockUSB3) -> None:
    gpu = open_gpu(usb)
    regs = front_of(usb).front.regs
    regs.store(Reg.IH_RB_WPTR, 0x120 | 1)  # the IH wrote 9 entries (byte offset 0x120) and flagged an overflow
    gpu.close()
    assert regs.stored(Reg.IH_RB_RPTR) == 0x120  # RPTR = WPTR's offset bits 17:2


def test_a_gpu_that_reads_0_at_rcc_config_memsize_is_refused_before_any_write() -> None:
    plain = PlainEndpoint(vram_bytes=64 << 20)  # BARs like a GPU's, registers that read 0
    with MockUSB3.over(Asm2464(function=plain)) as usb:
        with pytest.raises(DeviceError, match=r"RCC_CONFIG_MEMSIZE \(BAR5 0x378c\) reads 0.*not a gfx1100"):
            open_usb_gpu(Asm2464Controller(usb), firmware=GeneratedFirmware())
        assert not plain.registers.any() and not plain.doorbells.any(), "no boot step was attempted"
    with MockUSB3() as gfx1100:
        assert type(open_usb_gpu(Asm2464Controller(gfx1100), firmware=GeneratedFirmware())) is Gfx1100UsbGpu


def test_a_boot_sends_the_spec_s_23_smu_messages_and_31_with_shutdown(usb: MockUSB3) -> None:
    log = RegisterLog()
    with front_of(usb).front.observe(log):
        gpu = open_gpu(usb)
        booted = sum(1 for address, _, write in log.accesses if write and address == Reg.MP1_SMN_C2PMSG_66)
        gpu.close()
    total = sum(1 for address, _, write in log.accesses if write and address == Reg.MP1_SMN_C2PMSG_66)
    assert (booted, total) == (23, 31)  # section 13: a 2-level DPM answer, not tinygrad's ~394,000 echoes


# --- stopped queues reach the driver through IH ring 0 ---
def _sdma(gpu: Gfx1100UsbGpu, index: int = 0) -> AmdQueue:
    return gpu.create_queue(QueueKind.SDMA, ring_va=0x100000 + 0x10000 * index, ring_bytes=1 << 12,
                            rptr_va=0x1000 + 0x100 * index, wptr_va=0x1008 + 0x100 * index,
                            index=index)  # fmt: skip


def _compute(gpu: Gfx1100UsbGpu) -> AmdQueue:
    return gpu.create_queue(QueueKind.COMPUTE, ring_va=0x200000, ring_bytes=1 << 12, rptr_va=0x3000,
                            wptr_va=0x3008)  # fmt: skip


def _raises_within(usb: MockUSB3, gpu: Gfx1100UsbGpu, queue: AmdQueue) -> QueueStopped:
    """The QueueStopped ``queue.wait_idle()`` raises, checked to come long before the wait's timeout (virtual)."""
    started = usb.gpu.kernel.now_ns
    with pytest.raises(QueueStopped) as stopped:
        queue.wait_idle()
    elapsed_ns = usb.gpu.kernel.now_ns - started
    assert elapsed_ns < gpu.timeout_s * 1e9 / 1000, f"{elapsed_ns} ns: the stop surfaced only near the timeout"
    return stopped.value


@pytest.mark.parametrize("index", [0, 1])
def test_an_sdma_packet_the_engine_does_not_know_stops_the_next_wait_naming_opcode_queue_and_offset(
    usb: MockUSB3, index: int
) -> None:
    gpu = open_gpu(usb)
    sdma = _sdma(gpu, index)
    sdma.submit(sdma_nop(), sdma_nop())  # 8 bytes run, then the bad header at ring offset 8
    sdma.wait_idle()
    sdma.submit(np.array([0x7F], np.uint32))
    error = _raises_within(usb, gpu, sdma)
    assert (error.queue, error.opcode, error.ring_offset) == (f"SDMA{index} queue 0", 0x7F, 8)
    assert (error.status, error.error_code) == (IhClientId.GFX, IhSourceId.SDMA_QUEUE_HANG)  # the IV, as it came
    assert error.fault_addr is None
    assert "opcode 0x7f (unknown" in str(error) and "ring offset 0x8" in str(error)
    assert gpu.stop_of(sdma) is error
    with pytest.raises(QueueStopped):  # the queue stays stopped for every later wait, until destroyed
        gpu.check_queues()
    gpu.destroy_queue(sdma)
    gpu.check_queues()


def test_a_pm4_packet_the_cp_does_not_know_stops_the_next_wait_naming_opcode_queue_and_offset(usb: MockUSB3) -> None:
    gpu = open_gpu(usb)
    compute = _compute(gpu)
    compute.submit(pm4_nop(2))  # header + 2 body dwords, then the bad header at byte 12
    compute.wait_idle()
    assert gpu.stop_of(compute) is None and compute.read_rptr() == compute.wptr
    compute.submit(np.array([3 << 30 | 0x7E << 8], np.uint32))  # type 3, opcode 0x7E
    error = _raises_within(usb, gpu, compute)
    assert (error.queue, error.opcode, error.ring_offset) == ("compute HQD me 1 pipe 0 queue 0", 0x7E, 12)
    assert (error.status, error.error_code) == (IhClientId.GFX, IhSourceId.CP_BAD_OPCODE_ERROR)
    assert gpu.stop_of(compute) is error


def test_a_fault_on_an_unmapped_va_names_its_page_and_the_queue_and_clears_the_fault_status(usb: MockUSB3) -> None:
    gpu = open_gpu(usb)
    sdma = _sdma(gpu)
    unmapped = SYS_APERTURE + 0x40_0123  # between the SRAM and the admin window: no PTE
    sdma.submit(sdma_copy_linear(0x500000, unmapped, 64))
    error = _raises_within(usb, gpu, sdma)
    assert error.fault_addr == unmapped & ~0xFFF  # the IV carries the page
    assert (error.queue, error.status, error.error_code) == ("SDMA0 queue 0", IhClientId.GFX, IhSourceId.UTCL2_FAULT)
    assert (error.opcode, error.ring_offset) == (SdmaOp.COPY_LINEAR, 0)
    assert f"{unmapped & ~0xFFF:#x}" in str(error) and "protection fault" in str(error)
    assert gpu.stop_of(sdma) is error
    regs = front_of(usb).front.regs
    assert regs.stored(Reg.GCVM_L2_PROTECTION_FAULT_STATUS) == 0  # the driver cleared it, as Linux does
    assert regs.stored(Reg.IH_RB_RPTR) == regs.stored(Reg.IH_RB_WPTR) == 32  # one IV, read


def test_a_fault_before_close_leaves_the_board_for_the_partial_path(usb: MockUSB3) -> None:
    gpu = open_gpu(usb)
    sdma = _sdma(gpu)
    sdma.submit(sdma_copy_linear(0x500000, SYS_APERTURE + 0x40_0000, 64))
    _raises_within(usb, gpu, sdma)
    gpu.close()
    again = open_gpu(usb)
    assert again.boot.partial and again.ih.read_offset == 32  # the ring is read on from where close drained it
    again.check_queues()


def test_ivs_that_wrap_the_ih_ring_are_all_read_and_each_stopped_queue_keeps_its_report(usb: MockUSB3) -> None:
    gpu = open_gpu(usb)
    first, second = _sdma(gpu, 0), _sdma(gpu, 1)
    regs, last = front_of(usb).front.regs, IH_RING_BYTES - 32
    for reg in (Reg.IH_RB_WPTR, Reg.IH_RB_RPTR):
        regs.store(reg, last)  # the next IV goes in the ring's last slot, the one after at offset 0
    gpu.ih.read_offset = last
    first.submit(np.array([0x7F], np.uint32))
    second.submit(sdma_copy_linear(0x500000, SYS_APERTURE + 0x40_0000, 64))
    usb.gpu.kernel.run_for(1_000_000)  # both engines stop before the driver looks
    assert regs.stored(Reg.IH_RB_WPTR) == 32
    with pytest.raises(QueueStopped, match="SDMA0 queue 0"):  # the first report, of the first queue that stopped
        gpu.check_queues()
    assert regs.stored(Reg.IH_RB_RPTR) == 32 and gpu.ih.read_offset == 32
    stops = [(s.error_code, s.fault_addr) for s in (gpu.stop_of(first), gpu.stop_of(second)) if s is not None]
    assert stops == [(IhSourceId.SDMA_QUEUE_HANG, None), (IhSourceId.UTCL2_FAULT, SYS_APERTURE + 0x40_0000)]
    gpu.destroy_queue(first)
    with pytest.raises(
        QueueStopped, match=f"SDMA1 queue 0: GC hub protection fault at GPU address {SYS_APERTURE + 0x40_0000:#x}"
    ):
        gpu.check_queues()


def test_an_overflowed_ih_ring_is_read_on_from_the_oldest_iv_and_its_overflow_cleared(usb: MockUSB3) -> None:
    gpu = open_gpu(usb)
    regs = front_of(usb).front.regs
    regs.store(Reg.IH_RB_WPTR, 0x40 | 1)  # rb_overflow: the ring (all zero IVs: client 0, not acted on) is full
    log = RegisterLog()
    with front_of(usb).front.observe(log):
        gpu.check_queues()
    cntl = regs.stored(Reg.IH_RB_CNTL)
    writes = [(address, value) for address, value, write in log.accesses if write]
    assert writes == [(Reg.IH_RB_RPTR, 0x40), (Reg.IH_RB_CNTL, cntl | 1 << 31), (Reg.IH_RB_CNTL, cntl)]
    assert regs.stored(Reg.IH_RB_WPTR) == 0x40  # wptr_overflow_clear cleared rb_overflow


# --- the heap mapped per allocation (heap_va): map / unmap, 2 MB leaves or 4 KB PTEs, the TLB flush ---
HEAP_VA = 0x400000


def open_heap_gpu(usb: MockUSB3) -> Gfx1100UsbGpu:
    return open_usb_gpu(Asm2464Controller(usb), firmware=GeneratedFirmware(), heap_va=HEAP_VA)


def _vram_entry(usb: MockUSB3, gpu: Gfx1100UsbGpu, va: int) -> tuple[int, int]:
    """``(level, entry)`` of ``va``'s leaf slot, walked from the root through the emulator's VRAM: level 1 is its
    PDB0 entry (a 2 MB leaf or invalid), level 0 its PTE."""
    vram, table = front_of(usb).front.memory.vram, gpu.boot.layout.page_tables
    for level in (3, 2, 1, 0):
        at = table + 8 * (va >> (12 + 9 * level) & 511)
        entry = int.from_bytes(vram[at : at + 8], "little")
        if level == 0 or not entry & PteFlag.VALID or entry & PteFlag.PDE_IS_PTE:
            return level, entry
        table = entry & 0x0000_FFFF_FFFF_FFC0
    raise AssertionError("unreachable")


def _invalidations(log: RegisterLog) -> tuple[int, int]:
    """How many invalidate requests the driver wrote to the MM and the GC hub's engine 17."""
    writes = [address for address, _, write in log.accesses if write]
    return writes.count(Reg.MMVM_INVALIDATE_ENG17_REQ), writes.count(Reg.GCVM_INVALIDATE_ENG17_REQ)


def test_a_heap_driver_maps_only_the_vram_below_the_heap_at_boot(usb: MockUSB3) -> None:
    gpu = open_heap_gpu(usb)
    assert _vram_entry(usb, gpu, HEAP_VA - 0x200000)[1] & PteFlag.VALID  # the copy ring's 2 MB
    for va in (HEAP_VA, HEAP_VA + 0x1000, gpu.heap_end - 0x1000):
        assert not _vram_entry(usb, gpu, va)[1] & PteFlag.VALID
    assert _vram_entry(usb, gpu, SYS_APERTURE + PCIE_SRAM_BASE)[1] & PteFlag.SYSTEM  # the bridge stays mapped


def test_map_makes_a_range_reachable_and_unmap_faults_the_next_access_after_one_tlb_flush(usb: MockUSB3) -> None:
    gpu = open_heap_gpu(usb)
    sdma = _sdma(gpu)
    va = 0x601000
    gpu.map(va, 0x2000)
    sdma.submit(sdma_fence(va + 0x1010, 0x1234_5678))
    sdma.wait_idle()  # the TLB now holds the page: only the flush makes the unmap visible
    assert bytes(front_of(usb).front.memory.vram[va + 0x1010 : va + 0x1014]) == (0x1234_5678).to_bytes(4, "little")
    log = RegisterLog()
    with front_of(usb).front.observe(log):
        gpu.unmap(va, 0x2000)
    assert _invalidations(log) == (1, 1)
    sdma.submit(sdma_fence(va + 0x1010, 1))
    error = _raises_within(usb, gpu, sdma)
    assert error.fault_addr == va + 0x1000  # the page of the access
    assert (error.status, error.error_code) == (IhClientId.GFX, IhSourceId.UTCL2_FAULT)
    assert f"{va + 0x1000:#x}" in str(error)


def test_a_whole_aligned_2mb_slot_is_one_leaf_and_the_rest_4kb_ptes(usb: MockUSB3) -> None:
    gpu = open_heap_gpu(usb)
    log = RegisterLog()
    with front_of(usb).front.observe(log):
        gpu.map(0x800000, 0x200000)  # aligned: one 2 MB leaf
        gpu.map(0xC01000, 0x400000)  # 0xC01000 .. 0x1001000: PTEs, one leaf (0xE00000), PTEs
    assert _invalidations(log) == (2, 2)  # one flush per map
    leaf = int(PteFlag.VALID | PteFlag.READABLE | PteFlag.WRITEABLE | PteFlag.EXECUTE)
    assert _vram_entry(usb, gpu, 0x800000) == (1, 0x800000 | leaf | PteFlag.PDE_IS_PTE)
    assert _vram_entry(usb, gpu, 0x9FF000) == (1, 0x800000 | leaf | PteFlag.PDE_IS_PTE)
    assert _vram_entry(usb, gpu, 0xE00000) == (1, 0xE00000 | leaf | PteFlag.PDE_IS_PTE)
    for va in (0xC01000, 0xDFF000, 0x1000000):
        assert _vram_entry(usb, gpu, va) == (0, va | leaf)
    for va in (0xC00000, 0x1001000):  # the pages either side stay unmapped
        assert _vram_entry(usb, gpu, va) == (0, 0)
    hub = front_of(usb).front.memory.gc_hub
    assert (hub.leaf(0x900000).nbytes, hub.leaf(0xC02000).nbytes) == (0x200000, 0x1000)
    gpu.unmap(0xC01000, 0x400000)
    assert [_vram_entry(usb, gpu, va) for va in (0xC01000, 0xE00000, 0x1000000)] == [(0, 0), (1, 0), (0, 0)]


def test_a_2mb_slot_that_has_a_ptb_keeps_it_and_a_remap_after_unmap_works(usb: MockUSB3) -> None:
    gpu = open_heap_gpu(usb)
    sdma = _sdma(gpu)
    gpu.map(0x600000, 0x1000)
    gpu.unmap(0x600000, 0x1000)
    gpu.map(0x600000, 0x200000)  # the whole slot, but it has a PTB: 512 PTEs, not a leaf
    assert _vram_entry(usb, gpu, 0x600000)[0] == _vram_entry(usb, gpu, 0x7FF000)[0] == 0
    sdma.submit(sdma_fence(0x7FF000, 5))
    sdma.wait_idle()
    assert bytes(front_of(usb).front.memory.vram[0x7FF000:0x7FF004]) == (5).to_bytes(4, "little")


def test_map_and_unmap_refuse_bad_ranges_and_change_nothing(usb: MockUSB3) -> None:
    gpu = open_heap_gpu(usb)
    gpu.map(0x600000, 0x2000)
    tables = slice(gpu.boot.layout.page_tables, gpu.boot.layout.page_tables_end)
    before = bytes(front_of(usb).front.memory.vram[tables])
    with pytest.raises(StateError, match="0x600000 is mapped already"):
        gpu.map(0x5FF000, 0x3000)  # its first page is free, its second is not
    with pytest.raises(StateError, match="0x602000 is not mapped"):
        gpu.unmap(0x600000, 0x3000)
    with pytest.raises(InvalidArgument, match="whole 0x1000-byte pages"):
        gpu.map(0x600800, 0x1000)
    with pytest.raises(InvalidArgument, match="heap_va=0x400000"):
        gpu.map(0x200000, 0x1000)
    with pytest.raises(InvalidArgument, match=f"inside 0..{gpu.heap_end:#x}"):
        gpu.map(gpu.heap_end - 0x1000, 0x2000)
    assert bytes(front_of(usb).front.memory.vram[tables]) == before
    with pytest.raises(InvalidArgument, match="mapped all of VRAM at boot"):
        open_gpu(usb).map(0x600000, 0x1000)


def test_the_device_maps_each_allocation_and_unmaps_it_when_freed(usb: MockUSB3) -> None:
    device = UsbAmdDevice("mapped", usb, firmware=GeneratedFirmware())
    try:
        hub = front_of(usb).front.memory.gc_hub
        buf = device.alloc(0x3000)
        assert hub.leaf(buf.addr + 0x2000).nbytes == 0x1000
        device.free(buf)
        with pytest.raises(GpuMemoryFault, match=f"{buf.addr:#x}"):
            hub.leaf(buf.addr)
        again = device.alloc(0x3000)
        assert again.addr == buf.addr  # the allocator reuses the range: mapped again
        device.fill(again, 0x5A)
        assert device.copyout(again) == b"\x5a" * 0x3000
    finally:
        device.close()
