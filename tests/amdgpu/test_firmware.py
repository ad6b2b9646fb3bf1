"""The firmware seam: the real directory source, the generated files (laid out as the real ones), and the one
parser of every header both sides use: the common header, the versioned headers, the signed payload images."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from support.firmware import REAL_FIRMWARE

from tinyhil.amdgpu.firmware import DirectoryFirmware, FirmwareMissing, FirmwareSource, GeneratedFirmware, make_image
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu_firmware import (
    FIRMWARE_DIR,
    FIRMWARE_PACKAGE,
    GFX1100_FIRMWARE,
    GFX1100_IP_FIRMWARE,
    FirmwareHeader,
    FirmwareKind,
    PspComponent,
    ip_firmware,
    pack_psp_table,
    pack_signed_header,
    pack_versioned,
    parse_firmware_header,
    parse_signed_image,
    psp_sos_components,
)
from tinyhil.spec.gfx1100_psp import PspFwBinType, PspFwType

SOS = "psp_13_0_0_sos.bin"


def payloads(source: FirmwareSource, name: str) -> list[tuple[int, bytes]]:
    """(type, bytes) of every payload a driver sends from file ``name``, as the spec's parsers list them."""
    blob = source.load(name)
    if name == SOS:
        return [(c.fw_type, blob[c.offset_bytes : c.offset_bytes + c.size_bytes]) for c in psp_sos_components(blob)]
    return [(s.fw_type, s.of(blob)) for s in ip_firmware(blob, GFX1100_IP_FIRMWARE[name], name=name).sections]


def common(
    size: int, *, header_size: int = 32, version: tuple[int, int] = (1, 0), ucode: tuple[int, int] = (0, 32)
) -> bytes:
    """A common header of a ``size``-byte file (ucode = (size, offset))."""
    return FirmwareHeader(size, header_size, version, (0, 0), 1, *ucode, 0).pack()


@pytest.mark.parametrize("source", [DirectoryFirmware(), GeneratedFirmware()], ids=repr)
def test_both_sources_implement_the_seam(source: object) -> None:
    assert isinstance(source, FirmwareSource)


@pytest.mark.parametrize("name", GFX1100_FIRMWARE)
def test_generated_files_have_valid_headers_and_signed_payloads(name: str) -> None:
    blob = GeneratedFirmware().load(name)
    header = parse_firmware_header(blob, name=name)
    assert header.size_bytes == len(blob) and header.ucode_array_offset_bytes == 256
    sent = payloads(GeneratedFirmware(), name)
    assert sent, "every file gives the PSP something"
    for fw_type, payload in sent:
        image = parse_signed_image(payload, name=f"{name} type {fw_type}", key_database=fw_type == PspFwBinType.KDB)
        assert image.image_bytes == len(payload) and image.signature_bytes == 0x100
        assert payload[-0x100:] == bytes(0x100), "the model's signature is zeros"
    assert len({payload for _, payload in sent}) == len(sent), "each payload has its own body"
    assert GeneratedFirmware().load(name) == blob  # deterministic


def test_generated_sos_lists_the_nine_components_after_a_36_byte_header() -> None:
    blob = GeneratedFirmware().load(SOS)
    assert parse_firmware_header(blob).header_size_bytes == 36  # sizeof(psp_firmware_header_v2_0), as the real file
    assert [c.fw_type for c in psp_sos_components(blob)] == [3, 5, 2, 7, 8, 9, 10, 1, 4]


@REAL_FIRMWARE
def test_the_real_sos_file_is_accepted_with_its_six_components() -> None:
    """Its header_size_bytes is 36 while six 16-byte descriptors follow it, before the ucode array at 256."""
    blob = DirectoryFirmware().load(SOS)
    header = parse_firmware_header(blob, name=SOS)
    assert (header.header_size_bytes, header.ucode_array_offset_bytes) == (36, 256)
    components = psp_sos_components(blob, name=SOS)
    assert [c.fw_type for c in components] == [2, 1, 4, 3, 5, 6]
    assert components[0].offset_bytes == 256 and components[-1].offset_bytes + components[-1].size_bytes == len(blob)


@REAL_FIRMWARE
@pytest.mark.parametrize("name", GFX1100_FIRMWARE)
def test_every_real_payload_is_a_signed_image_the_parser_accepts(name: str) -> None:
    for fw_type, payload in payloads(DirectoryFirmware(), name):
        key_database = name == SOS and fw_type == PspFwBinType.KDB
        image = parse_signed_image(payload, name=f"{name} type {fw_type}", key_database=key_database)
        assert image.magic == (bytes(4) if key_database else b"$PS1")
        assert image.image_bytes == 0x100 + image.size_signed + 0x100 <= len(payload)


@REAL_FIRMWARE
@pytest.mark.parametrize("name", GFX1100_IP_FIRMWARE)
def test_generated_files_carry_the_real_files_header_versions_and_sections(name: str) -> None:
    kind = GFX1100_IP_FIRMWARE[name]
    real = ip_firmware(DirectoryFirmware().load(name), kind, name=name)
    generated = ip_firmware(GeneratedFirmware().load(name), kind, name=name)
    assert generated.header.header_version == real.header.header_version
    assert generated.header.header_size_bytes == real.header.header_size_bytes
    assert [s.fw_type for s in generated.sections] == [s.fw_type for s in real.sections]
    assert (generated.ucode_start_addr is None) == (real.ucode_start_addr is None)


@REAL_FIRMWARE
def test_the_real_rlc_file_is_v2_3_and_gives_the_rlc_set_then_rlc_g() -> None:
    rlc = ip_firmware(DirectoryFirmware().load("gc_11_0_0_rlc.bin"), FirmwareKind.RLC)
    assert rlc.header.header_version == (2, 3)
    assert [s.fw_type for s in rlc.sections] == [PspFwType.RLC_IRAM, PspFwType.RLC_DRAM_BOOT, PspFwType.RLC_P,
                                                 PspFwType.RLC_V, PspFwType.RLC_G]  # fmt: skip
    assert rlc.fields["save_restore_list_gpm_size_bytes"] > 0, "present in the file, not sent at v2.3 (AM)"


def sos_file(count: int, *, offsets: tuple[int, ...] = ()) -> bytes:
    """A psp v2.0 file (ucode array 0x300 bytes at 0x100) whose table claims ``count`` descriptors and holds one
    0x300-byte component at each offset."""
    components = [PspComponent(1, 1, 0x100 + offset, 0x300) for offset in offsets]
    table = struct.pack("<I", count) + pack_psp_table(components, ucode_array_offset_bytes=0x100)[4:]
    return (common(0x400, header_size=36, version=(2, 0), ucode=(0x300, 0x100)) + table).ljust(0x400, b"\0")


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (sos_file(14, offsets=(0,)), r"psp_fw_bin_count=14: descriptors 0x24..0x104, expected them before the ucode "
                                     r"array at 0x100"),
        (sos_file(1, offsets=(0x10,)), r"component 0 \(type 1\) at 0x110\+0x300 runs past the ucode array's end 0x400"),
        (sos_file(0xFFFF), r"psp_fw_bin_count=65535: descriptors .*expected them before the ucode array"),
        (common(64, header_size=32, version=(2, 0), ucode=(0, 64)) + bytes(32), r"header_size_bytes=0x20, expected at "
                                                                                r"least 0x24"),
        (common(64, version=(1, 0), ucode=(0, 64)) + bytes(32), r"header version \(1, 0\), expected \(2, 0\)"),
    ],
    ids=["table-over-the-ucode-array", "component-past-the-array", "huge-count", "no-count", "not-v2.0"],
)  # fmt: skip
def test_a_malformed_sos_table_is_rejected(blob: bytes, message: str) -> None:
    assert len(blob) == parse_firmware_header(blob).size_bytes
    with pytest.raises(InvalidArgument, match=message):
        psp_sos_components(blob)


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
        (common(99) + bytes(8), "size_bytes=0x63, expected the blob size 0x28"),
        (common(40, header_size=0x100) + bytes(8), "header_size_bytes=0x100"),
        (common(40, ucode=(0x40, 32)) + bytes(8), r"ucode 0x20\+0x40 runs past the end 0x28"),
    ],
)
def test_bad_headers_are_rejected_with_what_was_wrong(blob: bytes, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse_firmware_header(blob)


def with_u32(image: bytes, offset: int, value: int) -> bytes:
    return image[:offset] + struct.pack("<I", value) + image[offset + 4 :]


GOOD = make_image(b"body" * 16)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (GOOD[:0xFF], r"0xff bytes, expected at least the 0x100-byte signed-image header"),
        (GOOD[:0x10] + b"$PS2" + GOOD[0x14:], r"magic b'\$PS2' at 0x10, expected b'\$PS1'"),
        (make_image(b"k" * 64, key_database=True), r"magic b'\\x00\\x00\\x00\\x00' at 0x10, expected b'\$PS1'"),
        (with_u32(GOOD, 0x30, 0), r"signed flag 0x0 at 0x30, expected 1"),
        (with_u32(GOOD, 0x34, 1), r"signature type 1 at 0x34, expected one of \[0, 2\]"),
        (with_u32(GOOD, 0x14, 68), r"image size 0x240 at 0x6c, expected 0x244 \(header 0x100 \+ size_signed 0x44"),
        (GOOD[:-1], r"a 0x240-byte image, expected at most the payload's 0x23f"),
    ],
    ids=["short", "magic", "key-database-magic", "unsigned", "signature-type", "size-field", "truncated"],
)
def test_bad_signed_images_are_rejected_with_what_was_wrong(payload: bytes, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse_signed_image(payload)


def test_signed_images_allow_padding_and_the_key_database_magic_where_asked() -> None:
    assert parse_signed_image(GOOD + bytes(100)).image_bytes == len(GOOD)
    kdb = make_image(b"k" * 64, key_database=True)
    assert parse_signed_image(kdb, key_database=True).magic == bytes(4)
    header = pack_signed_header(0x1000, signature_type=2)
    assert parse_signed_image(header, header_only=True).image_bytes == 0x100 + 0x1000 + 0x200


def test_ip_firmware_rejects_unknown_versions_short_headers_and_sections_outside_the_file() -> None:
    blob = bytearray(GeneratedFirmware().load("sdma_6_0_0.bin"))
    struct.pack_into("<H", blob, 10, 1)  # sdma v2.1: not a version gfx1100 uses
    with pytest.raises(InvalidArgument, match=r"sdma header version \(2, 1\), expected one of \[\(2, 0\)\]"):
        ip_firmware(bytes(blob), FirmwareKind.SDMA)
    blob = bytearray(GeneratedFirmware().load("sdma_6_0_0.bin"))
    struct.pack_into("<I", blob, 4, 60)  # header_size_bytes one field short of sdma v2.0
    with pytest.raises(InvalidArgument, match=r"header_size_bytes=0x3c, expected at least 0x40 for a sdma v2.0"):
        ip_firmware(bytes(blob), FirmwareKind.SDMA)
    blob = bytearray(GeneratedFirmware().load("sdma_6_0_0.bin"))
    struct.pack_into("<I", blob, 52, len(blob))  # ctl_ucode_size_bytes past the end
    with pytest.raises(InvalidArgument, match=r"SDMA_UCODE_TH1 section at 0x1300\+0x2500, expected a non-empty range"):
        ip_firmware(bytes(blob), FirmwareKind.SDMA)


def test_pack_versioned_names_unknown_fields_and_bad_values() -> None:
    assert pack_versioned(FirmwareKind.IMU, (1, 0), imu_iram_ucode_size_bytes=5) == struct.pack("<4I", 5, 0, 0, 0)
    with pytest.raises(InvalidArgument, match=r"imu v1.0: fields \['iram'\], expected some of"):
        pack_versioned(FirmwareKind.IMU, (1, 0), iram=5)
    with pytest.raises(InvalidArgument, match=r"expected u32 values"):
        pack_versioned(FirmwareKind.IMU, (1, 0), imu_iram_ucode_size_bytes=-1)


@pytest.mark.parametrize("name", ["", "../etc/passwd", ".hidden", 3])
def test_bad_names_are_rejected(name: object) -> None:
    with pytest.raises(InvalidArgument, match="firmware name"):
        GeneratedFirmware().load(name)  # type: ignore[arg-type]


def test_a_name_the_generator_does_not_make_is_missing() -> None:
    with pytest.raises(FirmwareMissing, match=r"dcn_3_2_0_dmcub\.bin"):
        GeneratedFirmware().load("dcn_3_2_0_dmcub.bin")


@REAL_FIRMWARE
@pytest.mark.parametrize("name", GFX1100_FIRMWARE)
def test_the_installed_files_pass_the_header_check(name: str) -> None:
    header = parse_firmware_header(DirectoryFirmware().load(name), name=name)
    assert header.header_size_bytes >= 32


def test_usb_amd_names_the_missing_firmware_files_and_the_package(tmp_path: Path) -> None:
    from tinyhil.builtin_targets import usb_firmware_reason

    assert usb_firmware_reason(GeneratedFirmware()) is None
    (tmp_path / "smu_13_0_0.bin").write_bytes(GeneratedFirmware().load("smu_13_0_0.bin"))
    reason = usb_firmware_reason(DirectoryFirmware(tmp_path))
    assert reason is not None and FIRMWARE_PACKAGE in reason
    assert all(name in reason for name in GFX1100_FIRMWARE if name != "smu_13_0_0.bin")
    assert "smu_13_0_0.bin" not in reason
