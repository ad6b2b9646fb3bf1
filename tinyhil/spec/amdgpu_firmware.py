"""AMD GPU firmware files: the gfx1100 file names, their headers, and the signed images a driver hands the PSP.

Facts from ``docs/gfx1100.md`` section 7 (Linux ``amdgpu_ucode.h``) and the real files (docs/gfx1100.md,
"Facts looked up beyond the spec"). Every header is parsed here and nowhere else:

- :func:`parse_firmware_header`: the ``common_firmware_header`` every file starts with; the firmware sources run it on
  every file they return.
- :func:`psp_sos_components` and :func:`ip_firmware`: the versioned headers, giving the byte ranges (payloads) a
  driver sends to the PSP and which ``PSP_FW_TYPE`` / LOAD_IP_FW type each is sent as.
- :func:`parse_signed_image`: AMD's signed-image header every payload carries (the ``$PS1`` header: 256 bytes,
  the signed body, then the signature); the emulated PSP runs it on every image it is given.

Every offset a versioned header gives is a file offset, except the IMU's (from the ucode array), as AM reads them.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from tinyhil.errors import InvalidArgument
from tinyhil.spec.gfx1100_psp import PspFwType

__all__ = [
    "COMMON_HEADER_BYTES",
    "FIRMWARE_DIR",
    "FIRMWARE_PACKAGE",
    "GFX1100_FIRMWARE",
    "GFX1100_IP_FIRMWARE",
    "KEY_DATABASE_MAGIC",
    "PSP_SOS_DESC_BYTES",
    "PSP_SOS_HEADER_BYTES",
    "SIGNATURE_BYTES",
    "SIGNED_IMAGE_HEADER_BYTES",
    "SIGNED_IMAGE_MAGIC",
    "VERSIONED_FIELDS",
    "FirmwareHeader",
    "FirmwareKind",
    "IpFirmware",
    "PspComponent",
    "SignedImage",
    "UcodeSection",
    "ip_firmware",
    "pack_psp_table",
    "pack_signed_header",
    "pack_versioned",
    "parse_firmware_header",
    "parse_signed_image",
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
# psp_firmware_header_v2_0: +32 u32 psp_fw_bin_count, then a flexible array of descs {fw_type, fw_version,
# offset_bytes, size_bytes}: header_size_bytes is 36 (sizeof the struct), the descs follow it, before the ucode array.
_PSP_BIN_COUNT: Final = struct.Struct("<I")
_PSP_DESC: Final = struct.Struct("<IIII")
PSP_SOS_HEADER_BYTES: Final = COMMON_HEADER_BYTES + _PSP_BIN_COUNT.size
PSP_SOS_DESC_BYTES: Final = _PSP_DESC.size


class FirmwareKind(Enum):
    """Which versioned header an IP firmware file carries (section 7)."""

    SMC = "smc"
    SDMA = "sdma"
    GFX = "gfx"
    IMU = "imu"
    RLC = "rlc"


GFX1100_IP_FIRMWARE: Final[Mapping[str, FirmwareKind]] = {
    "smu_13_0_0.bin": FirmwareKind.SMC,
    "sdma_6_0_0.bin": FirmwareKind.SDMA,
    "gc_11_0_0_mec.bin": FirmwareKind.GFX,
    "gc_11_0_0_imu.bin": FirmwareKind.IMU,
    "gc_11_0_0_rlc.bin": FirmwareKind.RLC,
}

_RLC_V2_0: Final = ("ucode_feature_version jt_offset jt_size save_and_restore_offset clear_state_descriptor_offset "
                    "avail_scratch_ram_locations reg_restore_list_size reg_list_format_start "
                    "reg_list_format_separate_start starting_offsets_start reg_list_format_size_bytes "
                    "reg_list_format_array_offset_bytes reg_list_size_bytes reg_list_array_offset_bytes "
                    "reg_list_format_separate_size_bytes reg_list_format_separate_array_offset_bytes "
                    "reg_list_separate_size_bytes reg_list_separate_array_offset_bytes")  # fmt: skip
_RLC_V2_1: Final = _RLC_V2_0 + (
    " reg_list_format_direct_reg_list_length"
    + "".join(f" save_restore_list_{m}_ucode_ver save_restore_list_{m}_feature_ver save_restore_list_{m}_size_bytes"
              f" save_restore_list_{m}_offset_bytes" for m in ("cntl", "gpm", "srm"))
)  # fmt: skip
_RLC_V2_2: Final = _RLC_V2_1 + (" rlc_iram_ucode_size_bytes rlc_iram_ucode_offset_bytes rlc_dram_ucode_size_bytes"
                                " rlc_dram_ucode_offset_bytes")  # fmt: skip
_RLC_V2_3: Final = _RLC_V2_2 + "".join(f" rlc{c}_ucode_version rlc{c}_ucode_feature_version rlc{c}_ucode_size_bytes"
                                       f" rlc{c}_ucode_offset_bytes" for c in "pv")  # fmt: skip
# The u32 fields after the common header (Linux amdgpu_ucode.h), by (kind, header version): the versions gfx1100 uses.
VERSIONED_FIELDS: Final[Mapping[tuple[FirmwareKind, tuple[int, int]], tuple[str, ...]]] = {
    (FirmwareKind.SMC, (1, 0)): ("ucode_start_addr",),
    (FirmwareKind.SMC, (2, 0)): ("ucode_start_addr", "ppt_offset_bytes", "ppt_size_bytes"),
    (FirmwareKind.SMC, (2, 1)): ("ucode_start_addr", "pptable_count", "pptable_entry_offset"),
    (FirmwareKind.SDMA, (2, 0)): ("ucode_feature_version", "ctx_ucode_size_bytes", "ctx_jt_offset", "ctx_jt_size",
                                  "ctl_ucode_offset", "ctl_ucode_size_bytes", "ctl_jt_offset", "ctl_jt_size"),
    (FirmwareKind.GFX, (2, 0)): ("ucode_feature_version", "ucode_size_bytes", "ucode_offset_bytes", "data_size_bytes",
                                 "data_offset_bytes", "ucode_start_addr_lo", "ucode_start_addr_hi"),
    (FirmwareKind.IMU, (1, 0)): ("imu_iram_ucode_size_bytes", "imu_iram_ucode_offset_bytes",
                                 "imu_dram_ucode_size_bytes", "imu_dram_ucode_offset_bytes"),
    **{(FirmwareKind.RLC, (2, minor)): tuple(names.split())
       for minor, names in enumerate((_RLC_V2_0, _RLC_V2_1, _RLC_V2_2, _RLC_V2_3))},
}  # fmt: skip
# RLC payloads by header minor, in AM's order (AMFirmware): restore lists only at v2.1, IRAM/DRAM from v2.2,
# P/V at v2.3.
_RLC_LISTS: Final = (("save_restore_list_cntl", PspFwType.RLC_RESTORE_LIST_SRM_CNTL),
                     ("save_restore_list_gpm", PspFwType.RLC_RESTORE_LIST_GPM_MEM),
                     ("save_restore_list_srm", PspFwType.RLC_RESTORE_LIST_SRM_MEM))  # fmt: skip
_RLC_RAMS: Final = (("rlc_iram_ucode", PspFwType.RLC_IRAM), ("rlc_dram_ucode", PspFwType.RLC_DRAM_BOOT))
_RLC_PV: Final = (("rlcp_ucode", PspFwType.RLC_P), ("rlcv_ucode", PspFwType.RLC_V))

# AMD's signed-image header (PSPTool's HeaderFile; the real payloads): 0x10 magic, 0x14 size_signed (the body),
# 0x18 is_encrypted, 0x30 signed flag, 0x34 signature type, 0x38 signing key fingerprint (16 B), 0x60 version,
# 0x6C the whole image's size (header + body + signature). The signature follows the body.
SIGNED_IMAGE_HEADER_BYTES: Final = 0x100
SIGNED_IMAGE_MAGIC: Final = b"$PS1"
KEY_DATABASE_MAGIC: Final = bytes(4)  # the key database (sOS component KDB) has zeros where the magic is
SIGNATURE_BYTES: Final[Mapping[int, int]] = {0: 0x100, 2: 0x200}  # signature type -> bytes (PSPTool: SHA256, SHA384)
_SIGNED_FLAG: Final = 1  # every real payload has it: the PSP loads only signed images
_SIGNED: Final = struct.Struct("<16x4sII20xII16s24xI8xI")
_FINGERPRINT_BYTES: Final = 16
_SIGNATURE_TYPE_RSA2048: Final = 0
_MAX_FIELD: Final = 0xFFFF_FFFF


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
    """Parse and check the common header of ``blob``, a whole firmware file.

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
        InvalidArgument: the common header is bad (:func:`parse_firmware_header`), the header is not v2.0, the
            descriptor table overlaps the ucode array, or a component lies outside the ucode array.
    """
    view = memoryview(blob).cast("B")
    header = parse_firmware_header(view, name=name)
    if header.header_version != (2, 0):
        raise InvalidArgument(f"{name}: header version {header.header_version}, expected (2, 0) (psp v2.0)")
    if header.header_size_bytes < PSP_SOS_HEADER_BYTES:
        raise InvalidArgument(
            f"{name}: header_size_bytes={header.header_size_bytes:#x}, expected at least {PSP_SOS_HEADER_BYTES:#x} "
            "(psp v2.0 carries psp_fw_bin_count)"
        )
    (count,) = _PSP_BIN_COUNT.unpack_from(view, COMMON_HEADER_BYTES)
    table_end = PSP_SOS_HEADER_BYTES + count * PSP_SOS_DESC_BYTES
    if table_end > header.ucode_array_offset_bytes:
        raise InvalidArgument(
            f"{name}: psp_fw_bin_count={count}: descriptors {PSP_SOS_HEADER_BYTES:#x}..{table_end:#x}, expected them "
            f"before the ucode array at {header.ucode_array_offset_bytes:#x}"
        )
    ucode_end = header.ucode_array_offset_bytes + header.ucode_size_bytes
    components = []
    for index in range(count):
        fw_type, version, offset, size = _PSP_DESC.unpack_from(view, PSP_SOS_HEADER_BYTES + index * PSP_SOS_DESC_BYTES)
        start = header.ucode_array_offset_bytes + offset
        if start + size > ucode_end:
            raise InvalidArgument(
                f"{name}: component {index} (type {fw_type}) at {start:#x}+{size:#x} runs past the ucode array's end "
                f"{ucode_end:#x}"
            )
        components.append(PspComponent(fw_type, version, start, size))
    return tuple(components)


def pack_psp_table(components: Sequence[PspComponent], *, ucode_array_offset_bytes: int) -> bytes:
    """The psp v2.0 fields after the common header: ``psp_fw_bin_count`` and one descriptor per component
    (``offset_bytes`` are file offsets, as :func:`psp_sos_components` returns them; the table stores them from the
    ucode array)."""
    if any(c.offset_bytes < ucode_array_offset_bytes for c in components):
        raise InvalidArgument(f"components {components}, expected offsets from {ucode_array_offset_bytes:#x}")
    rows = (_PSP_DESC.pack(c.fw_type, c.fw_version, c.offset_bytes - ucode_array_offset_bytes, c.size_bytes)
            for c in components)  # fmt: skip
    return _PSP_BIN_COUNT.pack(len(components)) + b"".join(rows)


def pack_versioned(kind: FirmwareKind, version: tuple[int, int], **fields: int) -> bytes:
    """The versioned fields of a ``kind`` header ``version`` (those not given are 0), as they follow the common one.

    Raises:
        InvalidArgument: no such header version, an unknown field, or a value outside u32.
    """
    names = _field_names(kind, version, "pack")
    unknown = sorted(set(fields) - set(names))
    if unknown:
        raise InvalidArgument(f"{kind.value} v{version[0]}.{version[1]}: fields {unknown}, expected some of {names}")
    bad = {key: value for key, value in fields.items() if not 0 <= value <= _MAX_FIELD}
    if bad:
        raise InvalidArgument(f"{kind.value} v{version[0]}.{version[1]}: {bad}, expected u32 values")
    return struct.pack(f"<{len(names)}I", *(fields.get(field, 0) for field in names))


def _field_names(kind: FirmwareKind, version: tuple[int, int], name: str) -> tuple[str, ...]:
    names = VERSIONED_FIELDS.get((kind, version))
    if names is None:
        known = [v for k, v in VERSIONED_FIELDS if k is kind]
        raise InvalidArgument(f"{name}: {kind.value} header version {version}, expected one of {known}")
    return names


@dataclass(frozen=True, slots=True)
class UcodeSection:
    """One payload of an IP firmware file: the LOAD_IP_FW type it is sent as and its bytes' place in the file."""

    fw_type: PspFwType
    offset_bytes: int
    size_bytes: int

    def of(self, blob: bytes) -> bytes:
        """This section's bytes of ``blob`` (the file it was parsed from)."""
        return blob[self.offset_bytes : self.offset_bytes + self.size_bytes]


@dataclass(frozen=True, slots=True)
class IpFirmware:
    """What a driver sends from one IP firmware file: its sections in AM's LOAD_IP_FW order, and (gfx v2.0, RS64)
    the ucode start address (a byte address; CP_MEC_RS64_PRGRM_CNTR_START takes it >> 2)."""

    header: FirmwareHeader
    fields: Mapping[str, int]
    sections: tuple[UcodeSection, ...]
    ucode_start_addr: int | None = None


def ip_firmware(blob: bytes | memoryview, kind: FirmwareKind, *, name: str = "firmware") -> IpFirmware:
    """Parse the versioned header of an IP firmware file and list what AM sends from it (section 7):

    - SMC v1.0 / 2.0 / 2.1: the ucode array as SMU.
    - SDMA v2.0: ``ctl_ucode_offset`` + ``ctl_ucode_size_bytes`` as TH1, then the ucode array's first
      ``ctx_ucode_size_bytes`` as TH0.
    - GFX v2.0: the ucode array's first ``ucode_size_bytes`` as RS64_MEC, ``data_offset_bytes`` +
      ``data_size_bytes`` as RS64_MEC_P0_STACK.
    - IMU v1.0: the ucode array's first ``imu_iram_ucode_size_bytes`` as IMU_I, the next
      ``imu_dram_ucode_size_bytes`` as IMU_D.
    - RLC v2.0-2.3: (v2.1 only) the three restore lists; (v2.2+) IRAM, DRAM_BOOT; (v2.3) RLC_P, RLC_V; then the
      ucode array as RLC_G.

    Raises:
        InvalidArgument: the common header is bad, the header version is not one of ``VERSIONED_FIELDS``, the
            versioned fields run past ``header_size_bytes``, or a section is empty or runs past the file.
    """
    view = memoryview(blob).cast("B")
    header = parse_firmware_header(view, name=name)
    names = _field_names(kind, header.header_version, name)
    fields_end = COMMON_HEADER_BYTES + 4 * len(names)
    if fields_end > header.header_size_bytes:
        raise InvalidArgument(
            f"{name}: header_size_bytes={header.header_size_bytes:#x}, expected at least {fields_end:#x} for a "
            f"{kind.value} v{header.header_version[0]}.{header.header_version[1]} header"
        )
    fields = dict(zip(names, struct.unpack_from(f"<{len(names)}I", view, COMMON_HEADER_BYTES), strict=True))
    ucode = header.ucode_array_offset_bytes
    start: int | None = None
    ranges: list[tuple[PspFwType, int, int]]
    if kind is FirmwareKind.SMC:
        ranges = [(PspFwType.SMU, ucode, header.ucode_size_bytes)]
    elif kind is FirmwareKind.SDMA:
        ranges = [(PspFwType.SDMA_UCODE_TH1, fields["ctl_ucode_offset"], fields["ctl_ucode_size_bytes"]),
                  (PspFwType.SDMA_UCODE_TH0, ucode, fields["ctx_ucode_size_bytes"])]  # fmt: skip
    elif kind is FirmwareKind.GFX:
        ranges = [(PspFwType.RS64_MEC, ucode, fields["ucode_size_bytes"]),
                  (PspFwType.RS64_MEC_P0_STACK, fields["data_offset_bytes"], fields["data_size_bytes"])]  # fmt: skip
        start = fields["ucode_start_addr_lo"] | fields["ucode_start_addr_hi"] << 32
    elif kind is FirmwareKind.IMU:
        iram = fields["imu_iram_ucode_size_bytes"]
        ranges = [(PspFwType.IMU_I, ucode, iram), (PspFwType.IMU_D, ucode + iram, fields["imu_dram_ucode_size_bytes"])]
    else:
        minor = header.header_version[1]
        pieces: tuple[tuple[str, PspFwType], ...] = _RLC_LISTS if minor == 1 else ()
        pieces += (_RLC_RAMS if minor >= 2 else ()) + (_RLC_PV if minor == 3 else ())
        ranges = [(t, fields[f"{p}_offset_bytes"], fields[f"{p}_size_bytes"]) for p, t in pieces]
        ranges.append((PspFwType.RLC_G, ucode, header.ucode_size_bytes))
    for fw_type, offset, size in ranges:
        if size == 0 or offset + size > view.nbytes:
            raise InvalidArgument(
                f"{name}: {fw_type.name} section at {offset:#x}+{size:#x}, expected a non-empty range inside the "
                f"{view.nbytes:#x}-byte file"
            )
    return IpFirmware(header, fields, tuple(UcodeSection(*r) for r in ranges), start)


@dataclass(frozen=True, slots=True)
class SignedImage:
    """A parsed signed-image header: ``image_bytes`` = header + signed body + signature (a payload may carry
    padding after it: the real MEC stack section does)."""

    magic: bytes
    size_signed: int
    encrypted: bool
    signature_bytes: int
    fingerprint: bytes
    version: int
    image_bytes: int


def parse_signed_image(
    payload: bytes | memoryview, *, name: str = "image", key_database: bool = False, header_only: bool = False
) -> SignedImage:
    """Parse and check the signed-image header of ``payload`` (what a driver hands the PSP). The signature itself
    is not checked (nothing here has AMD's keys).

    ``key_database``: the payload may be the key database, whose magic field is zeros. ``header_only``: ``payload``
    is just the header (the PSP reads it first to learn the image's size); otherwise the image must fit in it.

    Raises:
        InvalidArgument: shorter than the header, a wrong magic, not signed, an unknown signature type, a size field
            (0x6C) that is not header + body + signature, or an image longer than ``payload``.
    """
    view = memoryview(payload).cast("B")
    if view.nbytes < SIGNED_IMAGE_HEADER_BYTES:
        raise InvalidArgument(
            f"{name}: {view.nbytes:#x} bytes, expected at least the {SIGNED_IMAGE_HEADER_BYTES:#x}-byte signed-image "
            "header"
        )
    magic, size_signed, encrypted, signed, sig_type, fingerprint, version, size_field = _SIGNED.unpack_from(view)
    magics = (SIGNED_IMAGE_MAGIC, KEY_DATABASE_MAGIC) if key_database else (SIGNED_IMAGE_MAGIC,)
    if magic not in magics:
        raise InvalidArgument(f"{name}: magic {magic!r} at 0x10, expected {' or '.join(map(repr, magics))}")
    if signed != _SIGNED_FLAG:
        raise InvalidArgument(f"{name}: signed flag {signed:#x} at 0x30, expected {_SIGNED_FLAG} (a signed image)")
    signature_bytes = SIGNATURE_BYTES.get(sig_type)
    if signature_bytes is None:
        raise InvalidArgument(f"{name}: signature type {sig_type} at 0x34, expected one of {sorted(SIGNATURE_BYTES)}")
    image_bytes = SIGNED_IMAGE_HEADER_BYTES + size_signed + signature_bytes
    if size_field != image_bytes:
        raise InvalidArgument(
            f"{name}: image size {size_field:#x} at 0x6c, expected {image_bytes:#x} (header 0x100 + size_signed "
            f"{size_signed:#x} + signature {signature_bytes:#x})"
        )
    if not header_only and image_bytes > view.nbytes:
        raise InvalidArgument(f"{name}: a {image_bytes:#x}-byte image, expected at most the payload's {view.nbytes:#x}")
    return SignedImage(bytes(magic), size_signed, encrypted == 1, signature_bytes, bytes(fingerprint), version,
                       image_bytes)  # fmt: skip


def pack_signed_header(
    size_signed: int, *, version: int = 0, signature_type: int = _SIGNATURE_TYPE_RSA2048,
    fingerprint: bytes = bytes(_FINGERPRINT_BYTES), magic: bytes = SIGNED_IMAGE_MAGIC,
) -> bytes:  # fmt: skip
    """The 256-byte signed-image header of a ``size_signed``-byte body (not encrypted, signed flag set); the image
    is this header, the body, then ``SIGNATURE_BYTES[signature_type]`` of signature.

    Raises:
        InvalidArgument: an unknown signature type, a fingerprint that is not 16 bytes, or a size outside u32.
    """
    signature_bytes = SIGNATURE_BYTES.get(signature_type)
    if signature_bytes is None:
        raise InvalidArgument(f"signature_type={signature_type}, expected one of {sorted(SIGNATURE_BYTES)}")
    if len(fingerprint) != _FINGERPRINT_BYTES or len(magic) != len(SIGNED_IMAGE_MAGIC):
        raise InvalidArgument(f"fingerprint={fingerprint!r}, magic={magic!r}: expected 16 and 4 bytes")
    image_bytes = SIGNED_IMAGE_HEADER_BYTES + size_signed + signature_bytes
    if size_signed < 0 or image_bytes > _MAX_FIELD or not 0 <= version <= _MAX_FIELD:
        raise InvalidArgument(f"size_signed={size_signed:#x}, version={version:#x}: expected u32 values")
    header = _SIGNED.pack(magic, size_signed, 0, _SIGNED_FLAG, signature_type, fingerprint, version, image_bytes)
    return header.ljust(SIGNED_IMAGE_HEADER_BYTES, b"\0")
