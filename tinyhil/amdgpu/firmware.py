"""The firmware seam: the named blobs an AMD GPU driver uploads, from ``/lib/firmware/amdgpu/`` or generated.

:class:`FirmwareSource` is the seam; :class:`DirectoryFirmware` reads the real files (Debian package
``firmware-amd-graphics`` from ``non-free-firmware``, Ubuntu ``linux-firmware``), and :class:`GeneratedFirmware`
makes files laid out as the real ones are (``docs/gfx1100.md`` section 7), for emulators that check
headers, not contents. Every blob either source returns has passed
:func:`tinyhil.spec.amdgpu_firmware.parse_firmware_header`.

Generated files: the common header and the versioned fields the real file carries (psp v2.0 and its component
table, smc v2.1, sdma v2.0, gfx v2.0, imu v1.0, rlc v2.3), then, from byte 256, each payload. Each payload is a
signed image as AMD's are (:func:`make_image`: the ``$PS1`` header, a deterministic body, a 256-byte zero
"signature"), so the emulated PSP checks them exactly as it checks the real ones.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

from tinyhil._check import check_int
from tinyhil.align import ceil_div
from tinyhil.errors import InvalidArgument, TinyHilError
from tinyhil.spec.amdgpu_firmware import (
    COMMON_HEADER_BYTES,
    FIRMWARE_DIR,
    FIRMWARE_PACKAGE,
    GFX1100_FIRMWARE,
    KEY_DATABASE_MAGIC,
    PSP_SOS_HEADER_BYTES,
    SIGNATURE_BYTES,
    SIGNED_IMAGE_MAGIC,
    FirmwareHeader,
    FirmwareKind,
    PspComponent,
    pack_psp_table,
    pack_signed_header,
    pack_versioned,
    parse_firmware_header,
)
from tinyhil.spec.gfx1100_psp import PspFwBinType

__all__ = ["DirectoryFirmware", "FirmwareMissing", "FirmwareSource", "GeneratedFirmware", "make_image"]

# PSP_FW_TYPE of the sOS file's components (section 7), in the bootloader's load order (section 11 step 8).
_SOS_COMPONENTS: Final = (PspFwBinType.KDB, PspFwBinType.SPL, PspFwBinType.SYS_DRV, PspFwBinType.SOC_DRV,
                          PspFwBinType.INTF_DRV, PspFwBinType.DBG_DRV, PspFwBinType.RAS_DRV, PspFwBinType.SOS,
                          PspFwBinType.TOC)  # fmt: skip
_UCODE_OFFSET: Final = 256  # where the real files' ucode arrays start
_PAYLOAD_BODY_BYTES: Final = 4096  # model: every generated payload's signed body
_SIGNATURE_TYPE: Final = 0  # RSA-2048, as every real payload
_FW_VERSION: Final = 1
_SMU_START_ADDR: Final = 0x20000  # the real smu_13_0_0.bin's ucode_start_addr
_MEC_START_ADDR: Final = 0x3000  # model: a plausible RS64 start address (the real file: 0x7_0000_0000_3000)


class FirmwareMissing(TinyHilError, FileNotFoundError):
    """A firmware file is not installed: ``name`` is the file, ``path`` where it was looked for, ``package`` what
    installs it."""

    def __init__(self, name: str, path: str, package: str) -> None:
        super().__init__(f"firmware {name} not found at {path}: install {package}")
        self.name = name
        self.path = path
        self.package = package


@runtime_checkable
class FirmwareSource(Protocol):
    """Named firmware blobs (``"gc_11_0_0_mec.bin"``), each with a checked common header."""

    def load(self, name: str) -> bytes:
        """The blob called ``name``.

        Raises:
            FirmwareMissing: no such blob here.
            InvalidArgument: the blob's header is bad (``parse_firmware_header``).
        """
        ...

    def available(self, name: str) -> bool:
        """Whether :meth:`load` would find ``name``."""
        ...


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise InvalidArgument(f"firmware name={name!r}, expected a file name such as {GFX1100_FIRMWARE[0]!r}")
    return name


class DirectoryFirmware:
    """The real firmware files, read from ``directory`` (default ``/lib/firmware/amdgpu``)."""

    def __init__(self, directory: str | Path = FIRMWARE_DIR) -> None:
        self.directory = Path(directory)

    def __repr__(self) -> str:
        return f"<DirectoryFirmware {self.directory}>"

    def available(self, name: str) -> bool:
        return (self.directory / _check_name(name)).is_file()

    def load(self, name: str) -> bytes:
        """Read and check ``name``.

        Raises:
            FirmwareMissing: the file is not installed (the message names the package that installs it).
            InvalidArgument: its header does not match the file.
        """
        path = self.directory / _check_name(name)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            raise FirmwareMissing(name, str(path), FIRMWARE_PACKAGE) from None
        parse_firmware_header(blob, name=name)
        return blob


def _body(label: str, nbytes: int) -> bytes:
    """Deterministic filler: SHA-256 in counter mode over ``label``."""
    blocks = ceil_div(nbytes, hashlib.sha256().digest_size)
    return b"".join(hashlib.sha256(f"{label}:{i}".encode()).digest() for i in range(blocks))[:nbytes]


def make_image(body: bytes, *, version: int = _FW_VERSION, key_database: bool = False) -> bytes:
    """A signed image of ``body``: the 256-byte ``$PS1`` header (zeros where the magic is for a ``key_database``),
    ``body``, then a zero signature (the emulated PSP cannot check one)."""
    check_int("version", version, min_value=0, max_value=0xFFFF_FFFF)
    magic = KEY_DATABASE_MAGIC if key_database else SIGNED_IMAGE_MAGIC
    header = pack_signed_header(len(body), version=version, signature_type=_SIGNATURE_TYPE, magic=magic)
    return header + bytes(body) + bytes(SIGNATURE_BYTES[_SIGNATURE_TYPE])


def _file(
    header_version: tuple[int, int], ip_version: tuple[int, int], header_bytes: int, table: bytes,
    images: list[bytes], ucode_images: int,
) -> bytes:  # fmt: skip
    """A file: common header (``header_bytes`` long as ``header_size_bytes`` says), ``table`` (the versioned
    fields, and the psp descriptors), then from byte 256 the ``images`` back to back; the ucode array is the first
    ``ucode_images`` of them."""
    payload = b"".join(images)
    ucode_size = sum(len(image) for image in images[:ucode_images])
    header = FirmwareHeader(_UCODE_OFFSET + len(payload), header_bytes, header_version, ip_version, _FW_VERSION,
                            ucode_size, _UCODE_OFFSET, 0)  # fmt: skip
    head = header.pack() + table
    if len(head) > _UCODE_OFFSET:
        raise InvalidArgument(f"generated header of {len(head):#x} bytes, expected at most {_UCODE_OFFSET:#x}")
    return head.ljust(_UCODE_OFFSET, b"\0") + payload


def _offsets(images: list[bytes]) -> list[int]:
    """The file offset of each image laid back to back from byte 256."""
    offsets, cursor = [], _UCODE_OFFSET
    for image in images:
        offsets.append(cursor)
        cursor += len(image)
    return offsets


class GeneratedFirmware:
    """Files laid out as the real gfx1100 files AM loads (``GFX1100_FIRMWARE``), with the same header versions and
    versioned fields; every payload is a signed image of ``body_bytes`` of filler.

    The sOS file lists all nine components of section 7 (the real one: six); the RLC file carries no restore lists
    (AM does not send them at v2.3).
    """

    def __init__(self, *, body_bytes: int = _PAYLOAD_BODY_BYTES) -> None:
        self.body_bytes = check_int("body_bytes", body_bytes, min_value=4, max_value=1 << 24)

    def __repr__(self) -> str:
        return f"<GeneratedFirmware body_bytes={self.body_bytes}>"

    def available(self, name: str) -> bool:
        return _check_name(name) in _FILES

    def _images(self, name: str, *labels: str) -> list[bytes]:
        return [make_image(_body(f"{name}:{label}", self.body_bytes)) for label in labels]

    def load(self, name: str) -> bytes:
        """The generated file ``name``.

        Raises:
            FirmwareMissing: ``name`` is not one of the gfx1100 files this generator makes.
        """
        if not self.available(name):
            raise FirmwareMissing(name, f"<generated: {', '.join(_FILES)}>", "nothing (not generated)")
        blob = _FILES[name](self, name)
        parse_firmware_header(blob, name=name)
        return blob

    def _sos(self, name: str) -> bytes:
        images = [make_image(_body(f"{name}:{fw_type.name}", self.body_bytes), key_database=fw_type is PspFwBinType.KDB)
                  for fw_type in _SOS_COMPONENTS]  # fmt: skip
        rows = zip(_SOS_COMPONENTS, _offsets(images), images, strict=True)
        components = [PspComponent(fw_type, _FW_VERSION, offset, len(image)) for fw_type, offset, image in rows]
        table = pack_psp_table(components, ucode_array_offset_bytes=_UCODE_OFFSET)
        return _file((2, 0), (13, 0), PSP_SOS_HEADER_BYTES, table, images, len(images))

    def _smu(self, name: str) -> bytes:
        fields = pack_versioned(FirmwareKind.SMC, (2, 1), ucode_start_addr=_SMU_START_ADDR)
        return _file((2, 1), (13, 0), COMMON_HEADER_BYTES + len(fields), fields, self._images(name, "ucode"), 1)

    def _sdma(self, name: str) -> bytes:
        ctx, ctl = images = self._images(name, "ctx", "ctl")
        fields = pack_versioned(FirmwareKind.SDMA, (2, 0), ctx_ucode_size_bytes=len(ctx),
                                ctl_ucode_offset=_offsets(images)[1], ctl_ucode_size_bytes=len(ctl))  # fmt: skip
        return _file((2, 0), (6, 0), COMMON_HEADER_BYTES + len(fields), fields, images, 2)

    def _mec(self, name: str) -> bytes:
        code, data = images = self._images(name, "code", "stack")
        fields = pack_versioned(FirmwareKind.GFX, (2, 0), ucode_size_bytes=len(code), ucode_offset_bytes=_UCODE_OFFSET,
                                data_size_bytes=len(data), data_offset_bytes=_offsets(images)[1],
                                ucode_start_addr_lo=_MEC_START_ADDR)  # fmt: skip
        return _file((2, 0), (11, 0), COMMON_HEADER_BYTES + len(fields), fields, images, 2)

    def _imu(self, name: str) -> bytes:
        iram, dram = images = self._images(name, "iram", "dram")
        fields = pack_versioned(FirmwareKind.IMU, (1, 0), imu_iram_ucode_size_bytes=len(iram),
                                imu_dram_ucode_size_bytes=len(dram), imu_dram_ucode_offset_bytes=len(iram))  # fmt: skip
        return _file((1, 0), (11, 0), COMMON_HEADER_BYTES + len(fields), fields, images, 2)

    def _rlc(self, name: str) -> bytes:
        labels = ("rlc_g", "rlc_iram_ucode", "rlc_dram_ucode", "rlcp_ucode", "rlcv_ucode")
        images = self._images(name, *labels)
        places = {label: (offset, len(image)) for label, offset, image in zip(labels, _offsets(images), images,
                                                                               strict=True)}  # fmt: skip
        sections = {f"{label}_{what}": places[label][i] for label in labels[1:]
                    for i, what in enumerate(("offset_bytes", "size_bytes"))}  # fmt: skip
        fields = pack_versioned(FirmwareKind.RLC, (2, 3), **sections)
        return _file((2, 3), (11, 0), COMMON_HEADER_BYTES + len(fields), fields, images, 1)


_FILES: Final = {
    "psp_13_0_0_sos.bin": GeneratedFirmware._sos,
    "smu_13_0_0.bin": GeneratedFirmware._smu,
    "sdma_6_0_0.bin": GeneratedFirmware._sdma,
    "gc_11_0_0_mec.bin": GeneratedFirmware._mec,
    "gc_11_0_0_imu.bin": GeneratedFirmware._imu,
    "gc_11_0_0_rlc.bin": GeneratedFirmware._rlc,
}
