"""The firmware seam: the named blobs an AMD GPU driver uploads, from ``/lib/firmware/amdgpu/`` or generated.

:class:`FirmwareSource` is the seam; :class:`DirectoryFirmware` reads the real files (Debian package
``firmware-amd-graphics`` from ``non-free-firmware``, Ubuntu ``linux-firmware``), and :class:`GeneratedFirmware`
makes blobs with valid headers for emulators that check headers, not contents (``spec/amdgpu-registers.md``
section 7). Every blob either source returns has passed :func:`tinyhil.spec.amdgpu_firmware.parse_firmware_header`.

Generated files: the file's common header, then (psp sOS only) the v2.0 component table, then each payload. Each
payload is itself an *image* (:func:`make_image`: a common header whose ``size_bytes`` is the payload's size, then
a deterministic body): the emulated PSP checks that header where a real PSP checks AMD's signature.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument, TinyHilError
from tinyhil.spec.amdgpu_firmware import (
    COMMON_HEADER_BYTES,
    FIRMWARE_DIR,
    FIRMWARE_PACKAGE,
    GFX1100_FIRMWARE,
    PSP_SOS_DESC_BYTES,
    FirmwareHeader,
    parse_firmware_header,
)

__all__ = ["DirectoryFirmware", "FirmwareMissing", "FirmwareSource", "GeneratedFirmware", "make_image"]

# PSP_FW_TYPE of the sOS file's components (section 7), in the bootloader's load order (section 11 step 8).
_SOS_COMPONENTS: Final = (("KDB", 3), ("SPL", 5), ("SYS_DRV", 2), ("SOC_DRV", 7), ("INTF_DRV", 8), ("DBG_DRV", 9),
                          ("RAS_DRV", 10), ("SOS", 1), ("TOC", 4))  # fmt: skip
# (header version, ip version) of each generated file (section 7).
_FILE_HEADERS: Final[dict[str, tuple[tuple[int, int], tuple[int, int]]]] = {
    "psp_13_0_0_sos.bin": ((2, 0), (13, 0)),
    "smu_13_0_0.bin": ((2, 0), (13, 0)),
    "sdma_6_0_0.bin": ((2, 0), (6, 0)),
    "gc_11_0_0_mec.bin": ((2, 0), (11, 0)),
    "gc_11_0_0_imu.bin": ((1, 0), (11, 0)),
    "gc_11_0_0_rlc.bin": ((2, 0), (11, 0)),
}
_IMAGE_HEADER_VERSION: Final = (1, 0)
_PAYLOAD_BODY_BYTES: Final = 4096  # model: every generated payload's body
_ALIGN: Final = 256  # payloads start on 256-byte boundaries in generated files


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
    blocks = -(-nbytes // 32)
    return b"".join(hashlib.sha256(f"{label}:{i}".encode()).digest() for i in range(blocks))[:nbytes]


def make_image(body: bytes, *, ip_version: tuple[int, int] = (0, 0), ucode_version: int = 1) -> bytes:
    """An image: a common header (``size_bytes`` = the whole image, ucode = ``body``) followed by ``body``."""
    check_int("ucode_version", ucode_version, min_value=0, max_value=0xFFFF_FFFF)
    size = COMMON_HEADER_BYTES + len(body)
    header = FirmwareHeader(size, COMMON_HEADER_BYTES, _IMAGE_HEADER_VERSION, ip_version, ucode_version,
                            len(body), COMMON_HEADER_BYTES, 0)  # fmt: skip
    return header.pack() + bytes(body)


def _align(nbytes: int) -> int:
    return -(-nbytes // _ALIGN) * _ALIGN


class GeneratedFirmware:
    """Blobs with valid headers for the gfx1100 files AM loads (``GFX1100_FIRMWARE``); contents are filler.

    Each payload image carries ``body_bytes`` of filler. Only the psp sOS file gets its versioned (v2.0) fields;
    the other files carry the common header, their header version and one payload image as their ucode array.
    """

    def __init__(self, *, body_bytes: int = _PAYLOAD_BODY_BYTES) -> None:
        self.body_bytes = check_int("body_bytes", body_bytes, min_value=4, max_value=1 << 24)

    def __repr__(self) -> str:
        return f"<GeneratedFirmware body_bytes={self.body_bytes}>"

    def available(self, name: str) -> bool:
        return _check_name(name) in _FILE_HEADERS

    def load(self, name: str) -> bytes:
        """The generated file ``name``.

        Raises:
            FirmwareMissing: ``name`` is not one of the gfx1100 files this generator makes.
        """
        if not self.available(name):
            raise FirmwareMissing(name, f"<generated: {', '.join(_FILE_HEADERS)}>", "nothing (not generated)")
        header_version, ip_version = _FILE_HEADERS[name]
        labels = [label for label, _ in _SOS_COMPONENTS] if name.startswith("psp_") else [name]
        images = [make_image(_body(label, self.body_bytes), ip_version=ip_version) for label in labels]
        table = b""
        if name.startswith("psp_"):
            table = struct.pack("<I", len(images))
        header_bytes = _align(COMMON_HEADER_BYTES + len(table) + PSP_SOS_DESC_BYTES * len(images))
        offsets, cursor = [], 0
        for image in images:
            offsets.append(cursor)
            cursor = _align(cursor + len(image))
        if table:
            rows = zip(_SOS_COMPONENTS, offsets, images, strict=True)
            table += b"".join(
                struct.pack("<IIII", fw_type, 1, offset, len(image)) for (_, fw_type), offset, image in rows
            )
        payload = bytearray(cursor)
        for offset, image in zip(offsets, images, strict=True):
            payload[offset : offset + len(image)] = image
        size = header_bytes + len(payload)
        ucode_size = len(images[0]) if len(images) == 1 else len(payload)
        header = FirmwareHeader(size, header_bytes, header_version, ip_version, 1, ucode_size, header_bytes, 0)
        blob = (header.pack() + table).ljust(header_bytes, b"\0") + bytes(payload)
        parse_firmware_header(blob, name=name)
        return blob
