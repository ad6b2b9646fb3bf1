"""The IP discovery binary at VRAM - 64 KB, read back the way Linux's amdgpu_discovery.c reads it.

The reader below is written from the layout facts of docs/gfx1100.md section 3 (not from any driver):
signatures, the binary checksum over ``[10, binary_size)``, and each table's checksum from its table_info.
"""

from __future__ import annotations

import struct

import pytest
from support.gfx1100 import VRAM_BYTES, RawDriver

from tinyhil.emulators.amdgpu.gfx1100 import GC_INFO, build_discovery
from tinyhil.spec.gfx1100_regs import IP_BASES, IP_VERSIONS, HwIp, Reg


class DiscoveryError(ValueError):
    pass


def checksum(data: bytes) -> int:
    return sum(data) & 0xFFFF


def read_discovery(blob: bytes) -> dict[str, object]:
    """A Linux-style reader: verify the signatures and checksums, then list the IPs and the GC info."""
    signature, _, _, binary_checksum, binary_size = struct.unpack_from("<IHHHH", blob, 0)
    if signature != 0x28211407:
        raise DiscoveryError(f"binary signature {signature:#x}")
    if checksum(blob[10:binary_size]) != binary_checksum:
        raise DiscoveryError("binary checksum")
    tables = [struct.unpack_from("<HHHH", blob, 12 + 8 * i) for i in range(6)]
    ip_offset, ip_checksum = tables[0][0], tables[0][1]
    ip_signature, version, ip_size, _, num_dies = struct.unpack_from("<IHHIH", blob, ip_offset)
    if ip_signature != 0x53445049:
        raise DiscoveryError("IP table signature")
    if checksum(blob[ip_offset : ip_offset + ip_size]) != ip_checksum:
        raise DiscoveryError("IP table checksum")
    ips: dict[tuple[int, int], tuple[tuple[int, int, int], tuple[int, ...]]] = {}
    for die in range(num_dies):
        _, die_offset = struct.unpack_from("<HH", blob, ip_offset + 14 + 4 * die)
        _, num_ips = struct.unpack_from("<HH", blob, die_offset)
        cursor = die_offset + 4
        for _ in range(num_ips):
            hw_id, instance, count, major, minor, revision, _ = struct.unpack_from("<HBBBBBB", blob, cursor)
            bases = struct.unpack_from(f"<{count}I", blob, cursor + 8)
            ips[(hw_id, instance)] = ((major, minor, revision), bases)
            cursor += 8 + 4 * count
    gc_offset, gc_checksum = tables[1][0], tables[1][1]
    table_id, gc_major, _, gc_size = struct.unpack_from("<IHHI", blob, gc_offset)
    if table_id != 0x4347 or checksum(blob[gc_offset : gc_offset + gc_size]) != gc_checksum:
        raise DiscoveryError("GC table")
    gc = struct.unpack_from(f"<{(gc_size - 12) // 4}I", blob, gc_offset + 12)
    harvest_offset, harvest_checksum = tables[2][0], tables[2][1]
    if struct.unpack_from("<I", blob, harvest_offset)[0] != 0x56524148:
        raise DiscoveryError("harvest signature")
    if checksum(blob[harvest_offset : harvest_offset + 8 + 4 * 32]) != harvest_checksum:
        raise DiscoveryError("harvest checksum")
    return {"version": version, "ips": ips, "gc_version": gc_major, "gc": gc}


def test_the_binary_at_vram_minus_64k_passes_a_linux_style_reader(raw: RawDriver) -> None:
    megabytes = raw.r(Reg.RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE)
    assert megabytes << 20 == VRAM_BYTES
    found = read_discovery(raw.get((megabytes << 20) - (64 << 10), 10 << 10))
    ips = found["ips"]
    assert isinstance(ips, dict)
    for hw_ip, version in IP_VERSIONS.items():
        assert ips[(hw_ip, 0)] == (version, IP_BASES[hw_ip])
    assert ips[(HwIp.GC, 0)][1][1] == 0xA000 and ips[(HwIp.MP0, 0)][1][0] == 0x16000
    gc = found["gc"]
    assert isinstance(gc, tuple) and gc == tuple(value for _, value in GC_INFO)
    se, wgp0, wgp1, sa = gc[0], gc[1], gc[2], gc[16]
    assert se * sa * 2 * (wgp0 + wgp1) == 96  # Navi 31's CU count, as AM derives it


@pytest.mark.parametrize("offset", [11, 70, 200, 400, 520])
def test_corrupting_any_byte_fails_the_reader(offset: int) -> None:
    blob = bytearray(build_discovery())
    read_discovery(bytes(blob))
    blob[offset] ^= 0x01
    with pytest.raises(DiscoveryError):
        read_discovery(bytes(blob))
