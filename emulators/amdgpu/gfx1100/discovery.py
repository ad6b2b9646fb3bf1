"""The IP discovery binary the firmware leaves at VRAM - 64 KB (``docs/gfx1100.md`` section 3).

Layout written here (all packed little-endian):

| offset | what |
|---|---|
| 0 | binary_header (60 B): signature, version 1.0, checksum of bytes ``[10, binary_size)``, size, table_info[6] |
| 64 | IP discovery table: ip_discovery_header v4 (80 B, u32 bases), one die_header, the IP entries of section 2.2 |
| next 64-aligned | GC table: gpu_info_header + gc_info v1.0 (19 u32) |
| next 64-aligned | harvest table: header "HARV" + 32 empty entries |

Each table's checksum is the u16 wrapping byte sum of its bytes (the IP table: ``ihdr.size`` bytes; GC:
``header.size``; harvest: the whole table), stored in its table_info, as Linux's ``amdgpu_discovery.c`` checks.
"""

from __future__ import annotations

import struct
from typing import Final

import numpy as np

from tinyhil.align import round_up
from tinyhil.spec.amdgpu_pm4 import GFX1100_SHADER_ENGINES
from tinyhil.spec.gfx1100_discovery import (
    BINARY_SIGNATURE,
    DISCOVERY_TMR_SIZE,
    GC_INFO_SIGNATURE,
    HARVEST_ENTRIES,
    HARVEST_TABLE_SIGNATURE,
    IP_DISCOVERY_SIGNATURE,
    BinaryTable,
)
from tinyhil.spec.gfx1100_regs import IP_BASES, IP_VERSIONS

from ..model_choices import DISCOVERY_VERSION_MAJOR, DISCOVERY_VERSION_MINOR, IP_DISCOVERY_VERSION

__all__ = ["GC_INFO", "build_discovery", "checksum16"]

_BINARY_HEADER: Final = struct.Struct("<IHHHH")  # signature, version major/minor, checksum, size; + table_info[6]
_TABLE_INFO: Final = struct.Struct("<HHHH")  # offset, checksum, size, padding
_BINARY_HEADER_BYTES: Final = _BINARY_HEADER.size + _TABLE_INFO.size * len(BinaryTable)  # 60
_CHECKSUMMED_FROM: Final = 10  # the binary checksum covers [10, binary_size): everything after itself
_IP_HEADER: Final = struct.Struct("<IHHIH")  # signature, version, size, id, num_dies; die_info[16]; flags, reserved
_DIE_INFO: Final = struct.Struct("<HH")
_MAX_DIES: Final = 16
_IP_HEADER_BYTES: Final = _IP_HEADER.size + _DIE_INFO.size * _MAX_DIES + 2  # 80
_DIE_HEADER: Final = struct.Struct("<HH")  # die_id, num_ips
_IP_ENTRY: Final = struct.Struct("<HBBBBBB")  # hw_id, instance, num_base_address, major, minor, revision, sub/var
_GPU_INFO_HEADER: Final = struct.Struct("<IHHI")  # table_id, version major/minor, size
_HARVEST_HEADER: Final = struct.Struct("<II")  # signature, version
_TABLE_ALIGN: Final = 64
_IP_TABLE_OFFSET: Final = 64
# gc_info v1.0 (section 3), in struct order. Model values for Navi 31: 96 CU as 6 SE x 2 SA x 8 CU (CU per SA =
# 2 x (wgp0 + wgp1)); the split, GPR and cache figures are not verified against a real dump (section 15).
GC_INFO: Final[tuple[tuple[str, int], ...]] = (
    ("gc_num_se", GFX1100_SHADER_ENGINES),
    ("gc_num_wgp0_per_sa", 4),
    ("gc_num_wgp1_per_sa", 0),
    ("gc_num_rb_per_se", 4),
    ("gc_num_gl2c", 24),
    ("gc_num_gprs", 1536),
    ("gc_num_max_gs_thds", 32),
    ("gc_gs_table_depth", 32),
    ("gc_gsprim_buff_depth", 1792),
    ("gc_parameter_cache_depth", 1024),
    ("gc_double_offchip_lds_buffer", 1),
    ("gc_wave_size", 32),
    ("gc_max_waves_per_simd", 16),
    ("gc_max_scratch_slots_per_cu", 32),
    ("gc_lds_size", 64),
    ("gc_num_sc_per_se", 2),
    ("gc_num_sa_per_se", 2),
    ("gc_num_packer_per_sc", 4),
    ("gc_num_gl2a", 4),
)


def checksum16(data: bytes | bytearray | memoryview) -> int:
    """The u16 wrapping sum of ``data``'s bytes (Linux ``amdgpu_discovery_verify_checksum``)."""
    return int(np.frombuffer(data, np.uint8).sum(dtype=np.uint64)) & 0xFFFF


def _ip_table() -> bytes:
    entries = []
    for hw_ip, (major, minor, revision) in IP_VERSIONS.items():
        bases = IP_BASES[hw_ip]
        entries.append(_IP_ENTRY.pack(hw_ip, 0, len(bases), major, minor, revision, 0))
        entries.append(struct.pack(f"<{len(bases)}I", *bases))
    die_offset = _IP_TABLE_OFFSET + _IP_HEADER_BYTES
    body = _DIE_HEADER.pack(0, len(IP_VERSIONS)) + b"".join(entries)
    size = _IP_HEADER_BYTES + len(body)
    dies = _DIE_INFO.pack(0, die_offset) + bytes(_DIE_INFO.size * (_MAX_DIES - 1))
    header = _IP_HEADER.pack(IP_DISCOVERY_SIGNATURE, IP_DISCOVERY_VERSION, size, 0, 1) + dies + b"\0\0"
    return header + body


def _gc_table() -> bytes:
    values = [value for _, value in GC_INFO]
    size = _GPU_INFO_HEADER.size + 4 * len(values)
    return _GPU_INFO_HEADER.pack(GC_INFO_SIGNATURE, 1, 0, size) + struct.pack(f"<{len(values)}I", *values)


def _harvest_table() -> bytes:
    return _HARVEST_HEADER.pack(HARVEST_TABLE_SIGNATURE, 0) + bytes(4 * HARVEST_ENTRIES)


def build_discovery() -> bytes:
    """The discovery binary (at most ``DISCOVERY_TMR_SIZE`` bytes) with valid signatures and checksums."""
    tables = {BinaryTable.IP_DISCOVERY: _ip_table(), BinaryTable.GC: _gc_table(),
              BinaryTable.HARVEST_INFO: _harvest_table()}  # fmt: skip
    blob = bytearray(_IP_TABLE_OFFSET)
    infos: dict[BinaryTable, tuple[int, int, int]] = {}
    for table, data in tables.items():
        offset = round_up(len(blob), _TABLE_ALIGN)
        blob.extend(bytes(offset - len(blob)))
        infos[table] = (offset, checksum16(data), len(data))
        blob.extend(data)
    assert len(blob) <= DISCOVERY_TMR_SIZE  # fixed content, well under 10 KB
    info_bytes = b"".join(_TABLE_INFO.pack(*infos.get(table, (0, 0, 0)), 0) for table in BinaryTable)
    header = _BINARY_HEADER.pack(BINARY_SIGNATURE, DISCOVERY_VERSION_MAJOR, DISCOVERY_VERSION_MINOR, 0, len(blob))
    blob[:_BINARY_HEADER_BYTES] = header + info_bytes
    struct.pack_into("<H", blob, 8, checksum16(blob[_CHECKSUMMED_FROM:]))
    return bytes(blob)
