"""``Gfx1100UsbGpu`` over MockUSB3 with Navi 31's register interface: the boot follows the spec's sequence (the
order of its waits in the register-access log is section 11's), the page tables reach the bridge, a second open
of a booted board takes the partial path and close leaves the board as section 12 says, and the driver is chosen
by what BAR5 answers."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tinyhil.amdgpu.firmware import GeneratedFirmware
from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.emulators.amdgpu.gfx1100 import Gfx1100Function
from tinyhil.emulators.observe import Observer
from tinyhil.errors import DeviceError
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.amdgpu import SYS_APERTURE, QueueKind
from tinyhil.spec.asm2464 import PCIE_SRAM_BASE
from tinyhil.spec.gfx1100_boot import BOOTED_SCRATCH_REG7, PteFlag
from tinyhil.spec.gfx1100_regs import Reg
from tinyhil.usbgpu.amd_device import UsbAmdDevice
from tinyhil.usbgpu.gfx1100_gpu import Gfx1100UsbGpu, open_usb_gpu
from tinyhil.usbgpu.usb_gpu import UsbGpu

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
WAIT_REGISTERS = frozenset(reg for _, reg in SPEC_WAITS)
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
    with MockUSB3(interface="gfx1100", vram_bytes=64 << 20) as board:
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
    sdma = gpu.create_queue(QueueKind.SDMA, ring_va=0x100000, ring_bytes=1 << 12, rptr_va=0x1000, wptr_va=0x1008,
                            doorbell_index=0, index=1)  # fmt: skip
    from tinyhil.amdgpu.sdma import sdma_copy_linear

    data = np.random.default_rng(3).integers(0, 256, 0x3000, dtype=np.uint8)
    front_of(usb).front.memory.vram[0x500000 : 0x500000 + data.size] = data.tobytes()
    sdma.submit(sdma_copy_linear(SYS_APERTURE + PCIE_SRAM_BASE + 0x800, 0x500000, data.size))
    sdma.wait_idle()
    assert bytes(usb.bridge.memory.sram[0x800 : 0x800 + data.size]) == data.tobytes()


def test_an_unmapped_gpu_address_is_a_protection_fault_the_driver_reports(usb: MockUSB3) -> None:
    gpu = open_gpu(usb)
    sdma = gpu.create_queue(QueueKind.SDMA, ring_va=0x100000, ring_bytes=1 << 12, rptr_va=0x1000, wptr_va=0x1008,
                            doorbell_index=0)  # fmt: skip
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


def test_a_board_whose_psp_is_up_but_not_cleanly_booted_is_refused(usb: MockUSB3) -> None:
    gpu = open_gpu(usb)  # booted: SCRATCH_REG6 = 1 until a clean close
    assert gpu.boot.booted() is False
    with pytest.raises(DeviceError, match="mode-1 reset"):
        open_gpu(usb)


def test_the_driver_is_chosen_by_what_bar5_answers() -> None:
    with MockUSB3(interface="bar5") as bar5:
        assert type(open_usb_gpu(Asm2464Controller(bar5), firmware=GeneratedFirmware())) is UsbGpu
    with MockUSB3() as gfx1100:  # the default on gfx1100
        assert type(open_usb_gpu(Asm2464Controller(gfx1100), firmware=GeneratedFirmware())) is Gfx1100UsbGpu


def test_a_boot_sends_the_spec_s_23_smu_messages_and_31_with_shutdown(usb: MockUSB3) -> None:
    log = RegisterLog()
    with front_of(usb).front.observe(log):
        gpu = open_gpu(usb)
        booted = sum(1 for address, _, write in log.accesses if write and address == Reg.MP1_SMN_C2PMSG_66)
        gpu.close()
    total = sum(1 for address, _, write in log.accesses if write and address == Reg.MP1_SMN_C2PMSG_66)
    assert (booted, total) == (23, 31)  # section 13: a 2-level DPM answer, not tinygrad's ~394,000 echoes
