"""gfx1100 IP discovery (section 3): the discovery binary at the top of VRAM, its signatures and tables.

Numbers cite ``docs/gfx1100.md`` "The register interface" (section in the comment). The table versions the model
writes are its own choice: :mod:`tinyhil.emulators.amdgpu.model_choices`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = [
    "BINARY_SIGNATURE",
    "DISCOVERY_TMR_OFFSET",
    "DISCOVERY_TMR_SIZE",
    "GC_INFO_SIGNATURE",
    "HARVEST_ENTRIES",
    "HARVEST_TABLE_SIGNATURE",
    "IP_DISCOVERY_SIGNATURE",
    "BinaryTable",
]

# --- section 3: IP discovery binary, at VRAM offset (MEMSIZE_MB << 20) - DISCOVERY_TMR_OFFSET, packed little-endian
DISCOVERY_TMR_OFFSET: Final = 64 << 10
DISCOVERY_TMR_SIZE: Final = 10 << 10
BINARY_SIGNATURE: Final = 0x28211407  # binary_header.binary_signature
IP_DISCOVERY_SIGNATURE: Final = 0x53445049  # "IPDS"
GC_INFO_SIGNATURE: Final = 0x4347  # "GC"
HARVEST_TABLE_SIGNATURE: Final = 0x56524148  # "HARV"
HARVEST_ENTRIES: Final = 32  # harvest_table: 32 x {u16 hw_id, u8 number_instance, u8 reserved}


class BinaryTable(IntEnum):
    """binary_header.table_info indices (section 3)."""

    IP_DISCOVERY = 0
    GC = 1
    HARVEST_INFO = 2
    VCN_INFO = 3
    MALL_INFO = 4
    NPS_INFO = 5
