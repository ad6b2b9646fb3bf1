"""AMD GPU firmware files: the gfx1100 file names and the ``common_firmware_header`` every file starts with.

Facts from ``spec/amdgpu-registers.md`` section 7 (Linux ``amdgpu_ucode.h``). :func:`parse_firmware_header` is the
one check of a header: the driver runs it on every file it loads, and the emulated PSP runs it on every image it
is asked to load (a PSP answers a bad image with a status, so it turns the error into one).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from tinyhil.errors import InvalidArgument

__all__ = [
    "COMMON_HEADER_BYTES",
    "FIRMWARE_DIR",
    "FIRMWARE_PACKAGE",
    "GFX1100_FIRMWARE",
    "PSP_SOS_DESC_BYTES",
    "FirmwareHeader",
    "PspComponent",
    "parse_firmware_header",
    "psp_sos_components",
]

FIRMWARE_DIR: Final = "/lib/firmware/amdgpu"
FIRMWARE_PACKAGE: Final = "firmware-amd-graphics (Debian non-free-firmware; Ubuntu: linux-firmware)"
# The files AM loads for gfx1100 (section 7), in its load order.
GFX1100_FIRMWARE: Final = (
    "psp_13_0_0_sos.bin",
    "smu_13_0_0.bin",
    "sdma_6_0_0.bin",
    "gc_11_0_0_mec.bin",
    "gc_11_0_0_imu.bin",
    "gc_11_0_0_rlc.bin",
)

# common_firmware_header (32 B at file offset 0): size_bytes, header_size_bytes, header_version_major/minor,
# ip_version_major/minor, ucode_version, ucode_size_bytes, ucode_array_offset_bytes, crc32.
_COMMON: Final = struct.Struct("<IIHHHHIIII")
COMMON_HEADER_BYTES: Final = _COMMON.size
# psp_firmware_header_v2_0: +32 u32 psp_fw_bin_count, +36 descs of {fw_type, fw_version, offset_bytes, size_bytes}.
_PSP_BIN_COUNT: Final = struct.Struct("<I")
_PSP_DESC: Final = struct.Struct("<IIII")
PSP_SOS_DESC_BYTES: Final = _PSP_DESC.size


@dataclass(frozen=True, slots=True)
class FirmwareHeader:
    """A parsed ``common_firmware_header`` (byte counts and offsets from the start of the blob)."""

    size_bytes: int
    header_size_bytes: int
    header_version: tuple[int, int]
    ip_version: tuple[int, int]
    ucode_version: int
    ucode_size_bytes: int
    ucode_array_offset_bytes: int
    crc32: int

    def pack(self) -> bytes:
        """The 32 header bytes."""
        return _COMMON.pack(
            self.size_bytes,
            self.header_size_bytes,
            *self.header_version,
            *self.ip_version,
            self.ucode_version,
            self.ucode_size_bytes,
            self.ucode_array_offset_bytes,
            self.crc32,
        )


def parse_firmware_header(blob: bytes | memoryview, *, name: str = "firmware") -> FirmwareHeader:
    """Parse and check the common header of ``blob``, a whole firmware image.

    Raises:
        InvalidArgument: ``blob`` is shorter than a header, its ``size_bytes`` is not its length (Linux rejects such a
            file), the header size is outside the blob, or the ucode array runs past the end.
    """
    view = memoryview(blob).cast("B")
    if view.nbytes < COMMON_HEADER_BYTES:
        raise InvalidArgument(f"{name}: {view.nbytes} bytes, expected at least a {COMMON_HEADER_BYTES}-byte header")
    fields = _COMMON.unpack_from(view)
    header = FirmwareHeader(
        fields[0], fields[1], (fields[2], fields[3]), (fields[4], fields[5]), fields[6], fields[7], fields[8], fields[9]
    )
    if header.size_bytes != view.nbytes:
        raise InvalidArgument(f"{name}: size_bytes={header.size_bytes:#x}, expected the blob size {view.nbytes:#x}")
    if not COMMON_HEADER_BYTES <= header.header_size_bytes <= view.nbytes:
        raise InvalidArgument(
            f"{name}: header_size_bytes={header.header_size_bytes:#x}, expected {COMMON_HEADER_BYTES:#x}.."
            f"{view.nbytes:#x}"
        )
    if header.ucode_array_offset_bytes + header.ucode_size_bytes > view.nbytes:
        raise InvalidArgument(
            f"{name}: ucode {header.ucode_array_offset_bytes:#x}+{header.ucode_size_bytes:#x} runs past the end "
            f"{view.nbytes:#x}"
        )
    return header


@dataclass(frozen=True, slots=True)
class PspComponent:
    """One component of a PSP sOS file (psp header v2.0): ``PSP_FW_TYPE`` and where its bytes are in the file."""

    fw_type: int
    fw_version: int
    offset_bytes: int
    size_bytes: int


def psp_sos_components(blob: bytes | memoryview, *, name: str = "psp sos") -> tuple[PspComponent, ...]:
    """The components listed by a PSP sOS file's v2.0 header; offsets are from the start of the file
    (``ucode_array_offset_bytes`` + the descriptor's offset).

    Raises:
        InvalidArgument: the common header is bad (:func:`parse_firmware_header`), the header is not v2.0, or a
            descriptor or component lies outside the file.
    """
    view = memoryview(blob).cast("B")
    header = parse_firmware_header(view, name=name)
    if header.header_version != (2, 0):
        raise InvalidArgument(f"{name}: header version {header.header_version}, expected (2, 0) (psp v2.0)")
    (count,) = _PSP_BIN_COUNT.unpack_from(view, COMMON_HEADER_BYTES)
    descs_at = COMMON_HEADER_BYTES + _PSP_BIN_COUNT.size
    if descs_at + count * PSP_SOS_DESC_BYTES > header.header_size_bytes:
        raise InvalidArgument(f"{name}: psp_fw_bin_count={count}, expected descriptors inside the header")
    components = []
    for index in range(count):
        fw_type, version, offset, size = _PSP_DESC.unpack_from(view, descs_at + index * PSP_SOS_DESC_BYTES)
        start = header.ucode_array_offset_bytes + offset
        if start + size > view.nbytes:
            raise InvalidArgument(f"{name}: component {index} at {start:#x}+{size:#x} runs past {view.nbytes:#x}")
        components.append(PspComponent(fw_type, version, start, size))
    return tuple(components)
