"""ASM2464-class USB-to-PCIe bridge (custom firmware): identity, vendor requests, XDATA map, SRAM geometry, TLPs.

Every name and number cites ``docs/asm2464.md``; the copyin constants cite ``docs/copyin.md``.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = [
    "ADMIN_WINDOW_BYTES",
    "ARM_DIRECTION_IN",
    "ARM_SECTORS_MASK",
    "ARM_SLOT_COUNT_SHIFT",
    "ARM_SLOT_START_MASK",
    "BRIDGE_CONFIGURATION",
    "BRIDGE_INTERFACE",
    "BRIDGE_VID_PIDS",
    "BULK_IN_EP",
    "BULK_OUT_EP",
    "BYTE_ENABLE_SHIFT",
    "CONFIG_REG_MASK",
    "CONTROL_EP",
    "CPL_BYTES",
    "CPL_FORMAT",
    "CPL_RELEASE_OFFSET",
    "CPL_STATUS_SHIFT",
    "CQ_WINDOW_BYTES",
    "ENDPOINTS",
    "GPU_BUS",
    "LTSSM_L0",
    "MAX_TIMEOUT_MS",
    "PCIE_ADMIN_WINDOW",
    "PCIE_CQ_WINDOW",
    "PCIE_POWER_ON",
    "PCIE_SRAM_BASE",
    "PCIE_SYS_BUF",
    "PCIE_SYS_BUF_STABLE",
    "PRODUCT_PREFIXES",
    "REQUEST_TYPE_IN",
    "REQUEST_TYPE_OUT",
    "RESIZABLE_BAR_CAP_OFFSET",
    "SECTOR_BYTES",
    "SLOTS",
    "SLOT_BYTES",
    "SLOT_SECTORS",
    "SRAM_BYTES",
    "SRAM_WINDOW_BYTES",
    "STREAM_PACKET_BYTES_USB2",
    "STREAM_PACKET_BYTES_USB3",
    "STREAM_WEDGE_BYTES",
    "SYS_BUF_BYTES",
    "TLP_BYTE_ENABLE_ALL",
    "TLP_FMT_4DW",
    "TLP_FMT_DATA",
    "TLP_REQUEST_FORMAT",
    "TLP_RETRIES",
    "TLP_TYPE_MASK",
    "TLP_TYPE_MSG",
    "TLP_TYPE_MSG_MASK",
    "WINDOW_BYTES",
    "WINDOW_SLOTS",
    "XDATA_BYTES",
    "XDATA_READ_MAX_USB2",
    "XDATA_READ_MAX_USB3",
    "CplStatus",
    "FmtType",
    "Request",
    "RetStatus",
    "TlpMode",
    "Xdata",
    "config_address",
]

# --- Identity and link (docs/asm2464.md "Identity and endpoints") ---
BRIDGE_VID_PIDS: Final = ((0xADD1, 0x0001), (0x3801, 0x0001))
PRODUCT_PREFIXES: Final = ("custom", "AS2462")
BULK_OUT_EP: Final = 0x02
BULK_IN_EP: Final = 0x81
CONTROL_EP: Final = 0x00  # EP0, the default control endpoint (USB 2.0 chapter 9)
ENDPOINTS: Final = (CONTROL_EP, BULK_OUT_EP, BULK_IN_EP)  # every endpoint of the bridge
BRIDGE_CONFIGURATION: Final = 1
BRIDGE_INTERFACE: Final = 0
LTSSM_L0: Final = 0x78  # XDATA 0xB450 reads this when the PCIe link is up
# The longest one transfer to the bridge may wait, on real and emulated boards alike: 2 hours. libusb takes up to
# 2**32 - 1 ms (49.7 days), but nothing a caller passes may make the host wait for days. The host-side check
# (tinyhil.usb.check_timeout_ms) and the emulator's virtual wait cap (WAIT_CAP_NS) both derive from it, so whatever
# the host lets through the emulator runs.
MAX_TIMEOUT_MS: Final = 2 * 3600 * 1000

# --- Vendor control requests (docs/asm2464.md "Vendor requests") ---
REQUEST_TYPE_OUT: Final = 0x40
REQUEST_TYPE_IN: Final = 0xC0
XDATA_READ_MAX_USB3: Final = 512
XDATA_READ_MAX_USB2: Final = 64
XDATA_BYTES: Final = 0x10000  # wValue is the 16-bit XDATA address (bank 0)
PCIE_POWER_ON: Final = 0x0001  # 0xF3 wValue bit 0


class Request(IntEnum):
    """bRequest values of the custom firmware."""

    XDATA_READ = 0xE4  # IN: wValue address, wLength bytes
    XDATA_WRITE = 0xE5  # OUT: wValue address, wIndex the byte
    TLP = 0xF0  # OUT: issue a TLP / start a stream; IN: completion of the last single TLP
    SRAM_ARM = 0xF2  # OUT: arm the SRAM DMA engine for the next bulk transfer
    PCIE_POWER = 0xF3  # OUT: wValue bit 0 powers PCIe on


class TlpMode(IntEnum):
    """wIndex of an 0xF0 OUT request."""

    SINGLE = 0
    STREAM_WRITE = 1
    STREAM_READ = 2


class FmtType(IntEnum):
    """TLP fmt/type byte (wValue low byte of 0xF0 OUT)."""

    MRD32 = 0x00
    MRD64 = 0x20
    MWR32 = 0x40
    MWR64 = 0x60
    CFGRD0 = 0x04
    CFGRD1 = 0x05
    CFGWR0 = 0x44
    CFGWR1 = 0x45


class CplStatus(IntEnum):
    """Completion status, bits 7:5 of the 0xF0 IN byte 4."""

    SC = 0b000  # successful completion
    UR = 0b001  # unsupported request
    CRS = 0b010  # configuration request retry status
    CA = 0b100  # completer abort


class RetStatus(IntEnum):
    """Byte 7 of the 0xF0 IN completion: the firmware's own status of the TLP exchange."""

    OK = 0x00
    ERROR = 0x01
    TIMEOUT = 0xFF


# 0xF0 OUT: wValue = fmt_type | byte_enable << 8; data stage <III = addr_lo, addr_hi, value (or dword count)
BYTE_ENABLE_SHIFT: Final = 8
TLP_BYTE_ENABLE_ALL: Final = 0xF  # all four bytes of a dword (stream modes move whole dwords)
TLP_REQUEST_FORMAT: Final = "<III"
# 0xF0 IN: 8 bytes = u32 data, completion-header high byte, byte count, reserved, ret_status
CPL_BYTES: Final = 8
CPL_FORMAT: Final = "<IBBxB"
CPL_STATUS_SHIFT: Final = 5  # completion status is bits 7:5 of the header high byte
# fmt/type byte layout (PCIe base spec, TLP header byte 0): Fmt[2:0] in bits 7:5, Type[4:0] in bits 4:0
TLP_FMT_DATA: Final = 0x40  # Fmt bit 1: the TLP carries data (writes, MsgD); memory writes are posted
TLP_FMT_4DW: Final = 0x20  # Fmt bit 0: 4-DW header (64-bit address)
TLP_TYPE_MASK: Final = 0x1F
TLP_TYPE_MSG_MASK: Final = 0x18  # Type 10rrr: a message (posted, no completion)
TLP_TYPE_MSG: Final = 0x10
TLP_RETRIES: Final = 10  # the driver retries ret_status ERROR/TIMEOUT at most this many times
STREAM_PACKET_BYTES_USB3: Final = 1024
STREAM_PACKET_BYTES_USB2: Final = 512
CONFIG_REG_MASK: Final = 0xFFC
RESIZABLE_BAR_CAP_OFFSET: Final = 0x100
GPU_BUS: Final = 4  # buses 0-3 are bridges; the GPU is 4:0.0


def config_address(bus: int, dev: int, fn: int, reg: int) -> int:
    """The 0xF0 config-request address: ``bus << 24 | dev << 19 | fn << 16 | (reg & 0xFFC)``."""
    return bus << 24 | dev << 19 | fn << 16 | (reg & CONFIG_REG_MASK)


# --- XDATA map (docs/asm2464.md "XDATA map") ---
class Xdata(IntEnum):
    """XDATA addresses the emulator models."""

    BULK_OUT_LANDING = 0x7000  # bulk OUT landing buffer (stream mode)
    SRAM_WINDOW = 0x8000  # 0x8000-0x8FFF: 4 KB window onto SRAM at PCIe 0x200000
    SYS_BUF = 0xA000  # 0xA000-0xAFFF: window onto PCIe 0x820000
    DRAIN_FENCE = 0xA800  # the copyin drain fence, PCIe 0x820800 (docs/copyin.md)
    ADMIN_QUEUES = 0xB000  # 0xB000-0xB1FF: window onto PCIe 0x800000
    TLP_REGS = 0xB210  # 0xB210-0xB29F: TLP engine registers
    LTSSM = 0xB450  # link state
    COMPLETION_QUEUE = 0xB800  # 0xB800-0xBFFF: window onto PCIe 0x822000
    SRAM_ENGINE_BASE = 0xF000  # SRAM base as the 0xF2 engine addresses it (slot 0)


# PCIe addresses the GPU reaches (docs/asm2464.md "XDATA map", docs/copyin.md)
PCIE_SRAM_BASE: Final = 0x200000  # SRAM at 0x200000-0x27FFFF
PCIE_ADMIN_WINDOW: Final = 0x800000
PCIE_SYS_BUF: Final = 0x820000
PCIE_SYS_BUF_STABLE: Final = 0x820800  # sys_buf from here on is not clobbered by in-flight 0xF2 transfers
PCIE_CQ_WINDOW: Final = 0x822000
CPL_RELEASE_OFFSET: Final = 12  # the completion-queue entry at PCIE_CQ_WINDOW + 12 releases a copyout bulk IN

# --- SRAM and the 0xF2 engine (docs/asm2464.md "SRAM, slots and windows") ---
SRAM_BYTES: Final = 512 * 1024
SLOTS: Final = 32
SLOT_BYTES: Final = 0x4000
SECTOR_BYTES: Final = 512
ARM_SECTORS_MASK: Final = 0x7FFF  # wValue bits 0-14: sectors
ARM_DIRECTION_IN: Final = 0x8000  # wValue bit 15: device-to-host
ARM_SLOT_START_MASK: Final = 0xFF  # wIndex low byte: the start slot
ARM_SLOT_COUNT_SHIFT: Final = 8  # wIndex high byte: the slot count (0 means 1)
SLOT_SECTORS: Final = SLOT_BYTES // SECTOR_BYTES  # 32 sectors per slot: an arm of n slots holds at most n*32
WINDOW_SLOTS: Final = 16  # docs/copyin.md: a copyin window is 16 slots, window 0 = slots 0-15, window 1 = 16-31
WINDOW_BYTES: Final = WINDOW_SLOTS * SLOT_BYTES  # 256 KB
STREAM_WEDGE_BYTES: Final = 4 << 20  # quirk 3: upstream saw a single 0xF0 stream of 4 MB wedge the bridge

# --- XDATA geometry (docs/asm2464.md "XDATA map"): the size of each window ---
SRAM_WINDOW_BYTES: Final = 0x1000  # 0x8000-0x8FFF (and 0xF000-0xFFFF) onto SRAM bytes 0-0xFFF
SYS_BUF_BYTES: Final = 0x1000  # 0xA000-0xAFFF onto PCIe 0x820000-0x820FFF
ADMIN_WINDOW_BYTES: Final = 0x200  # 0xB000-0xB1FF onto PCIe 0x800000-0x8001FF
CQ_WINDOW_BYTES: Final = 0x800  # 0xB800-0xBFFF onto PCIe 0x822000-0x8227FF
