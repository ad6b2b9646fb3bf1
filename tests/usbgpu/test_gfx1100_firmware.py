"""``MOCKUSB+AMD`` over the real firmware files (``/lib/firmware/amdgpu/``): the driver sends what AM sends from them
(checked against the files' headers read here, section 7), the emulated PSP accepts every payload, and the device
copies bit-exactly; and over the generated files, the same kinds of payload in the same order."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support.firmware import REAL_FIRMWARE

from tinyhil.amdgpu.firmware import DirectoryFirmware, FirmwareSource, GeneratedFirmware
from tinyhil.emulators.amdgpu.gfx1100 import Gfx1100Function
from tinyhil.emulators.amdgpu.gfx1100.psp import Psp
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.amdgpu_firmware import FIRMWARE_DIR
from tinyhil.spec.gfx1100_psp import PspBootloaderCmd, PspFwType
from tinyhil.usbgpu.gfx1100.psp import PspBlock
from tinyhil.usbgpu.gfx1100_gpu import Gfx1100UsbGpu
from tinyhil.usbgpu.over_usb import UsbAmdDevice

# Section 11 step 10 for an RLC v2.3 header: the LOAD_IP_FW types in order.
IP_FW_TYPES = [PspFwType.SMU, PspFwType.SDMA_UCODE_TH1, PspFwType.SDMA_UCODE_TH0, PspFwType.RS64_MEC,
               PspFwType.RS64_MEC_P0_STACK, PspFwType.IMU_I, PspFwType.IMU_D, PspFwType.RLC_IRAM,
               PspFwType.RLC_DRAM_BOOT, PspFwType.RLC_P, PspFwType.RLC_V, PspFwType.RLC_G]  # fmt: skip


def u32s(blob: bytes, offset: int, count: int) -> tuple[int, ...]:
    return struct.unpack_from(f"<{count}I", blob, offset)


def expected_payloads(directory: str) -> list[tuple[int, bytes]]:
    """What AM's AMFirmware sends from the files, read here from the header layouts of section 7."""

    def read(name: str) -> tuple[bytes, int, int]:
        blob = Path(directory, name).read_bytes()
        size, offset = u32s(blob, 20, 2)  # ucode_size_bytes, ucode_array_offset_bytes
        return blob, offset, size

    smu, at, size = read("smu_13_0_0.bin")
    out: list[tuple[int, bytes]] = [(PspFwType.SMU, smu[at : at + size])]
    sdma, at, _ = read("sdma_6_0_0.bin")
    ctx_size, _, _, ctl_offset, ctl_size = u32s(sdma, 36, 5)
    out += [(PspFwType.SDMA_UCODE_TH1, sdma[ctl_offset : ctl_offset + ctl_size]),
            (PspFwType.SDMA_UCODE_TH0, sdma[at : at + ctx_size])]  # fmt: skip
    mec, at, _ = read("gc_11_0_0_mec.bin")
    code_size, _, data_size, data_offset = u32s(mec, 36, 4)
    out += [(PspFwType.RS64_MEC, mec[at : at + code_size]),
            (PspFwType.RS64_MEC_P0_STACK, mec[data_offset : data_offset + data_size])]  # fmt: skip
    imu, at, _ = read("gc_11_0_0_imu.bin")
    iram, _, dram, _ = u32s(imu, 32, 4)
    out += [(PspFwType.IMU_I, imu[at : at + iram]), (PspFwType.IMU_D, imu[at + iram : at + iram + dram])]
    rlc, at, size = read("gc_11_0_0_rlc.bin")
    assert struct.unpack_from("<HH", rlc, 8) == (2, 3), "the RLC header this test expects"
    iram_size, iram_offset, dram_size, dram_offset = u32s(rlc, 156, 4)
    rlcp_size, rlcp_offset = u32s(rlc, 180, 2)
    rlcv_size, rlcv_offset = u32s(rlc, 196, 2)
    rlc_set = ((PspFwType.RLC_IRAM, iram_offset, iram_size), (PspFwType.RLC_DRAM_BOOT, dram_offset, dram_size),
               (PspFwType.RLC_P, rlcp_offset, rlcp_size), (PspFwType.RLC_V, rlcv_offset, rlcv_size),
               (PspFwType.RLC_G, at, size))  # fmt: skip
    out += [(fw_type, rlc[offset : offset + nbytes]) for fw_type, offset, nbytes in rlc_set]
    return out


@pytest.fixture
def usb() -> Iterator[MockUSB3]:
    board = MockUSB3()
    try:
        yield board
    finally:
        board.close()


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bytes]]:
    """Every LOAD_IP_FW payload the driver sends, as it hands it to the PSP command."""
    log: list[tuple[int, bytes]] = []
    original = PspBlock.load_ip_fw

    def load_ip_fw(self: PspBlock, fw_type: PspFwType, image: bytes) -> None:
        log.append((fw_type, bytes(image)))
        original(self, fw_type, image)

    monkeypatch.setattr(PspBlock, "load_ip_fw", load_ip_fw)
    return log


def booted(usb: MockUSB3, firmware: FirmwareSource) -> UsbAmdDevice:
    device = UsbAmdDevice("MOCKUSB+AMD", usb, firmware=firmware)
    assert isinstance(device.gpu, Gfx1100UsbGpu) and not device.gpu.boot.partial
    return device


def psp_of(usb: MockUSB3) -> Psp:
    function = usb.bridge.function
    assert isinstance(function, Gfx1100Function)
    return function.front.psp


@REAL_FIRMWARE
def test_mockusb_amd_boots_over_the_real_files_and_copies_bit_exactly(
    usb: MockUSB3, sent: list[tuple[int, bytes]]
) -> None:
    device = booted(usb, DirectoryFirmware())
    try:
        assert sent == expected_payloads(FIRMWARE_DIR)
        psp = psp_of(usb)
        assert psp.firmware == IP_FW_TYPES
        # The real sOS file has KDB, SPL, SYS_DRV, SOS, TOC, RL: the bootloader sends KDB twice (MP0 13.0), SYS, SOS.
        assert psp.components == [PspBootloaderCmd.LOAD_KEY_DATABASE, PspBootloaderCmd.LOAD_TOS_SPL_TABLE,
                                  PspBootloaderCmd.LOAD_SYSDRV, PspBootloaderCmd.LOAD_SOSDRV]  # fmt: skip
        assert all(status == 0 for _, status in psp.commands) and psp.rlc_autoloaded
        mec = Path(FIRMWARE_DIR, "gc_11_0_0_mec.bin").read_bytes()
        start_lo, start_hi = u32s(mec, 52, 2)
        assert isinstance(device.gpu, Gfx1100UsbGpu)
        assert device.gpu.boot.mec_start == (start_lo | start_hi << 32) >> 2
        data = np.random.default_rng(11).integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()
        buf = device.alloc(len(data))
        device.copyin(buf, data)
        assert bytes(device.copyout(buf)) == data
    finally:
        device.close()


def test_mockusb_amd_boots_over_the_generated_files_with_the_same_payload_kinds(
    usb: MockUSB3, sent: list[tuple[int, bytes]]
) -> None:
    device = booted(usb, GeneratedFirmware())
    try:
        assert [fw_type for fw_type, _ in sent] == IP_FW_TYPES
        assert psp_of(usb).firmware == IP_FW_TYPES
        assert all(image[0x10:0x14] == b"$PS1" for _, image in sent)
        buf = device.alloc(1 << 20)
        device.copyin(buf, b"gen!" * (1 << 18))
        assert bytes(device.copyout(buf)) == b"gen!" * (1 << 18)
    finally:
        device.close()
