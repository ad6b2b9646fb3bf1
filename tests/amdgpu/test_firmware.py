"""The firmware seam: the real directory source, the generated blobs, and the one header check both sides use."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tinyhil.amdgpu.firmware import DirectoryFirmware, FirmwareMissing, FirmwareSource, GeneratedFirmware, make_image
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu_firmware import (
    FIRMWARE_DIR,
    GFX1100_FIRMWARE,
    parse_firmware_header,
    psp_sos_components,
)


@pytest.mark.parametrize("source", [DirectoryFirmware(), GeneratedFirmware()], ids=repr)
def test_both_sources_implement_the_seam(source: object) -> None:
    assert isinstance(source, FirmwareSource)


@pytest.mark.parametrize("name", GFX1100_FIRMWARE)
def test_generated_files_have_valid_headers_and_valid_payload_images(name: str) -> None:
    blob = GeneratedFirmware().load(name)
    header = parse_firmware_header(blob, name=name)
    assert header.size_bytes == len(blob) and header.header_size_bytes <= header.ucode_array_offset_bytes
    if name.startswith("psp_"):
        components = psp_sos_components(blob)
        assert [c.fw_type for c in components] == [3, 5, 2, 7, 8, 9, 10, 1, 4]
        images = [blob[c.offset_bytes : c.offset_bytes + c.size_bytes] for c in components]
    else:
        start = header.ucode_array_offset_bytes
        images = [blob[start : start + header.ucode_size_bytes]]
    for image in images:
        assert parse_firmware_header(image).size_bytes == len(image)
    assert GeneratedFirmware().load(name) == blob  # deterministic


def test_a_missing_real_file_names_the_file_and_the_package(tmp_path: Path) -> None:
    source = DirectoryFirmware(tmp_path)
    assert not source.available("gc_11_0_0_mec.bin")
    with pytest.raises(FirmwareMissing, match=r"gc_11_0_0_mec\.bin.*firmware-amd-graphics") as missing:
        source.load("gc_11_0_0_mec.bin")
    assert missing.value.name == "gc_11_0_0_mec.bin" and isinstance(missing.value, FileNotFoundError)
    assert DirectoryFirmware().directory == Path(FIRMWARE_DIR)


def test_the_directory_source_reads_and_checks_a_file(tmp_path: Path) -> None:
    blob = GeneratedFirmware().load("smu_13_0_0.bin")
    (tmp_path / "smu_13_0_0.bin").write_bytes(blob)
    (tmp_path / "sdma_6_0_0.bin").write_bytes(blob + b"\0")  # one byte more than its header says
    source = DirectoryFirmware(tmp_path)
    assert source.load("smu_13_0_0.bin") == blob
    with pytest.raises(InvalidArgument, match=r"sdma_6_0_0.bin: size_bytes=.*expected the blob size"):
        source.load("sdma_6_0_0.bin")


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"\0" * 16, "expected at least a 32-byte header"),
        (struct.pack("<I", 99) + make_image(b"x" * 8)[4:], "size_bytes=0x63, expected the blob size 0x28"),
        (make_image(b"x" * 8)[:4] + struct.pack("<I", 0x100) + make_image(b"x" * 8)[8:], "header_size_bytes=0x100"),
        (make_image(b"x" * 8)[:20] + struct.pack("<I", 0x40) + make_image(b"x" * 8)[24:], "runs past the end"),
    ],
)
def test_bad_headers_are_rejected_with_what_was_wrong(blob: bytes, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse_firmware_header(blob)


@pytest.mark.parametrize("name", ["", "../etc/passwd", ".hidden", 3])
def test_bad_names_are_rejected(name: object) -> None:
    with pytest.raises(InvalidArgument, match="firmware name"):
        GeneratedFirmware().load(name)  # type: ignore[arg-type]


def test_a_name_the_generator_does_not_make_is_missing() -> None:
    with pytest.raises(FirmwareMissing, match=r"dcn_3_2_0_dmcub\.bin"):
        GeneratedFirmware().load("dcn_3_2_0_dmcub.bin")


@pytest.mark.skipif(
    not Path(FIRMWARE_DIR, GFX1100_FIRMWARE[0]).is_file(), reason=f"no {FIRMWARE_DIR} (Debian firmware-amd-graphics)"
)
@pytest.mark.parametrize("name", GFX1100_FIRMWARE)
def test_the_installed_files_pass_the_header_check(name: str) -> None:
    header = parse_firmware_header(DirectoryFirmware().load(name), name=name)
    assert header.header_size_bytes >= 32


def test_usb_amd_names_the_missing_firmware_files_and_the_package(tmp_path: Path) -> None:
    from tinyhil.builtin_targets import usb_firmware_reason
    from tinyhil.spec.amdgpu_firmware import FIRMWARE_PACKAGE, GFX1100_FIRMWARE

    assert usb_firmware_reason(GeneratedFirmware()) is None
    (tmp_path / "smu_13_0_0.bin").write_bytes(GeneratedFirmware().load("smu_13_0_0.bin"))
    reason = usb_firmware_reason(DirectoryFirmware(tmp_path))
    assert reason is not None and FIRMWARE_PACKAGE in reason
    assert all(name in reason for name in GFX1100_FIRMWARE if name != "smu_13_0_0.bin")
    assert "smu_13_0_0.bin" not in reason
