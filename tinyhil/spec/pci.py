"""PCI/PCIe configuration-space layout: the standard register offsets and bits (PCI Local Bus 3.0, PCIe Base 4.0).

Shared by the PCIe bring-up driver and the PCIe models; ``docs/asm2464.md`` relies on these standard layouts ("BAR
sizing works the standard way", "a resizable-BAR capability sits at config offset 0x100").
"""

from __future__ import annotations

from enum import IntEnum, IntFlag
from typing import Final

__all__ = [
    "BAR_COUNT_TYPE0",
    "BAR_MEM_ADDRESS_MASK",
    "BAR_MEM_TYPE_MASK",
    "BRIDGE_WINDOW_ALIGN",
    "CLASS_DISPLAY_VGA",
    "CONFIG_SPACE_BYTES",
    "EXT_CAP_ID_MASK",
    "EXT_CAP_ID_REBAR",
    "EXT_CAP_NEXT_MASK",
    "EXT_CAP_NEXT_SHIFT",
    "HEADER_TYPE_BRIDGE",
    "HEADER_TYPE_LAYOUT_MASK",
    "HEADER_TYPE_NORMAL",
    "REBAR_CTRL_BAR_INDEX_MASK",
    "REBAR_CTRL_BAR_SIZE_MASK",
    "REBAR_CTRL_BAR_SIZE_SHIFT",
    "REBAR_CTRL_NBAR_MASK",
    "REBAR_CTRL_NBAR_SHIFT",
    "REBAR_ENTRY_BYTES",
    "REBAR_MIN_SIZE_BYTES",
    "REBAR_SIZES_SHIFT",
    "VENDOR_ID_AMD",
    "BarBits",
    "Command",
    "Config",
    "Rebar",
    "Status",
]

CONFIG_SPACE_BYTES: Final = 0x1000  # PCIe extended configuration space per function
BAR_COUNT_TYPE0: Final = 6
HEADER_TYPE_NORMAL: Final = 0x00
HEADER_TYPE_BRIDGE: Final = 0x01
HEADER_TYPE_LAYOUT_MASK: Final = 0x7F  # bits 6:0 of HEADER_TYPE; bit 7 says multi-function
VENDOR_ID_AMD: Final = 0x1002  # PCI-SIG vendor id of AMD/ATI
CLASS_DISPLAY_VGA: Final = 0x030000  # class code: display controller, VGA compatible


class Config(IntEnum):
    """Configuration-space register offsets (type 0 and type 1 headers share 0x00-0x0F)."""

    VENDOR_ID = 0x00
    DEVICE_ID = 0x02
    COMMAND = 0x04
    STATUS = 0x06
    REVISION_ID = 0x08
    CLASS_PROG = 0x09
    CLASS_DEVICE = 0x0A
    CACHE_LINE_SIZE = 0x0C
    LATENCY_TIMER = 0x0D
    HEADER_TYPE = 0x0E
    BIST = 0x0F
    BASE_ADDRESS_0 = 0x10  # type 0: six BARs 0x10-0x27; type 1: two BARs 0x10-0x17
    SUBSYSTEM_VENDOR_ID = 0x2C
    SUBSYSTEM_ID = 0x2E
    ROM_ADDRESS = 0x30
    CAPABILITY_LIST = 0x34
    INTERRUPT_LINE = 0x3C
    INTERRUPT_PIN = 0x3D
    # type 1 (bridge) header
    PRIMARY_BUS = 0x18
    SECONDARY_BUS = 0x19
    SUBORDINATE_BUS = 0x1A
    SEC_LATENCY_TIMER = 0x1B
    IO_BASE = 0x1C
    IO_LIMIT = 0x1D
    SEC_STATUS = 0x1E
    MEMORY_BASE = 0x20
    MEMORY_LIMIT = 0x22
    PREF_MEMORY_BASE = 0x24
    PREF_MEMORY_LIMIT = 0x26
    PREF_BASE_UPPER32 = 0x28
    PREF_LIMIT_UPPER32 = 0x2C
    IO_BASE_UPPER16 = 0x30
    IO_LIMIT_UPPER16 = 0x32
    BRIDGE_ROM_ADDRESS = 0x38
    BRIDGE_CONTROL = 0x3E


class Command(IntFlag):
    """COMMAND register bits."""

    IO = 0x001
    MEMORY = 0x002
    MASTER = 0x004
    PARITY = 0x040
    SERR = 0x100
    INTX_DISABLE = 0x400


class Status(IntFlag):
    """STATUS register bits (the error bits are write-1-to-clear)."""

    CAP_LIST = 0x0010
    SIG_TARGET_ABORT = 0x0800
    REC_TARGET_ABORT = 0x1000
    REC_MASTER_ABORT = 0x2000
    SIG_SYSTEM_ERROR = 0x4000
    DETECTED_PARITY = 0x8000


class BarBits(IntFlag):
    """Low bits of a memory BAR (read-only type bits)."""

    SPACE_IO = 0x1
    TYPE_64 = 0x4  # bits 2:1 = 0b10: 64-bit BAR, the next dword holds bits 63:32
    PREFETCH = 0x8


BAR_MEM_TYPE_MASK: Final = 0x6  # bits 2:1 of a memory BAR: 0b00 32-bit, 0b10 64-bit
BAR_MEM_ADDRESS_MASK: Final = 0xFFFF_FFF0  # the address bits of a memory BAR's low dword
BRIDGE_WINDOW_ALIGN: Final = 1 << 20  # type 1 memory windows hold address bits 31:20: 1 MB granularity

# Extended capability header (PCIe Base 4.0 section 7.6.3): ID in bits 15:0, next offset in bits 31:20.
EXT_CAP_ID_MASK: Final = 0xFFFF
EXT_CAP_NEXT_SHIFT: Final = 20
EXT_CAP_NEXT_MASK: Final = 0xFFC  # the next offset is dword aligned


# Resizable BAR extended capability (PCIe Base 4.0 section 7.8.6): a header dword, then per BAR a capability dword
# (bit n, n >= 4, set: size 1 MB << (n - 4) supported) and a control dword (bits 2:0 BAR index, bits 7:5 number of
# resizable BARs in the first entry, bits 13:8 the BAR size as log2(size / 1 MB)).
EXT_CAP_ID_REBAR: Final = 0x0015


class Rebar(IntEnum):
    """Offsets inside the resizable-BAR capability of entry 0; entry ``i`` adds ``i * REBAR_ENTRY_BYTES``."""

    CAP = 0x04  # supported sizes
    CTRL = 0x08  # BAR index, number of resizable BARs (entry 0), current size


REBAR_ENTRY_BYTES: Final = 8
REBAR_MIN_SIZE_BYTES: Final = 1 << 20
REBAR_SIZES_SHIFT: Final = 4
REBAR_CTRL_BAR_INDEX_MASK: Final = 0x7
REBAR_CTRL_NBAR_MASK: Final = 0x7 << 5
REBAR_CTRL_NBAR_SHIFT: Final = 5
REBAR_CTRL_BAR_SIZE_SHIFT: Final = 8
REBAR_CTRL_BAR_SIZE_MASK: Final = 0x3F << 8
