"""AMDHSA code objects: a clang-built object loads with its descriptors; every malformed one is a typed error."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from support.rdna3 import compile_cl, needs_clang

from tinyhil.amdgpu.code_object import CodeObject, hidden_kernargs, load_code_object, user_sgprs
from tinyhil.amdgpu.errors import CodeObjectError
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdhsa import KernelCodeProperty

SOURCE = """__kernel void k(__global int *p, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x();
  p[i + __builtin_amdgcn_workitem_id_x()] = n; }"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[CodeObject, bytes]:
    workdir = Path(tmp_path_factory.mktemp("co"))
    co = compile_cl(SOURCE, workdir)
    return co, (workdir / "k.co").read_bytes()


@needs_clang
def test_a_clang_object_loads_with_its_descriptor_and_metadata(built: tuple[CodeObject, bytes]) -> None:
    co, _data = built
    kd = co.kernels["k"]
    assert co.code_object_version == 5 and co.mach == 0x41  # gfx1100
    assert kd.wave32 and kd.kernarg_size > 12 and kd.vgpr_count % 8 == 0
    assert kd.kernel_code_properties & KernelCodeProperty.ENABLE_SGPR_KERNARG_SEGMENT_PTR
    assert kd.entry_vaddr == kd.descriptor_vaddr + struct.unpack_from("<q", co.image, kd.descriptor_vaddr + 16)[0]
    assert co.image[kd.entry_vaddr : kd.entry_vaddr + 4] != b"\0\0\0\0"
    assert kd.metadata[".name"] == "k" and co.metadata["amdhsa.version"]
    assert user_sgprs(kd, {KernelCodeProperty.ENABLE_SGPR_KERNARG_SEGMENT_PTR: 0x1_2345_6780}) == [0x23456780, 1]
    assert kd.dispatch_rsrc2(1000) >> 15 & 0x1FF == 2 and kd.dispatch_rsrc2() & 0x7FFF == kd.compute_pgm_rsrc2 & 0x7FFF
    with pytest.raises(CodeObjectError, match="LDS"):
        kd.dispatch_rsrc2(1 << 20)
    hidden = hidden_kernargs(kd, (3, 1, 1), (64, 1, 1))
    assert len(hidden) == kd.kernarg_size and struct.pack("<I", 3) in hidden


@needs_clang
def test_upload_places_the_image_and_returns_entry_addresses(built: tuple[CodeObject, bytes]) -> None:
    co, _data = built
    memory: dict[int, bytes] = {}
    entries = co.upload(memory.__setitem__, 0x10000)
    assert memory[0x10000] == co.image and entries == {"k": 0x10000 + co.kernels["k"].entry_vaddr}
    with pytest.raises(CodeObjectError, match="256-byte aligned"):
        co.upload(memory.__setitem__, 0x10010)


def _patch(offset: int, fmt: str, value: int) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        out = bytearray(data)
        struct.pack_into(fmt, out, offset, value)
        return bytes(out)

    return change


def _kd_offset(data: bytes) -> int:
    co = load_code_object(data)
    kd = co.kernels["k"]
    # the descriptor lies in the first PT_LOAD segment, whose file offset equals its address in lld's layout
    return kd.descriptor_vaddr


MALFORMED: list[tuple[str, Callable[[bytes], bytes], str]] = [
    ("bad magic", lambda d: b"\x7fELG" + d[4:], "magic"),
    ("32-bit class", _patch(4, "<B", 1), "64-bit little-endian"),
    ("wrong e_machine", _patch(18, "<H", 62), "e_machine=62, expected EM_AMDGPU"),
    ("built for gfx1201", _patch(48, "<I", 0x54E), r"built for gfx1201 \(e_flags 0x54e\), expected gfx1100"),
    ("wrong OS ABI", _patch(7, "<B", 0), "EI_OSABI=0"),
    ("code object v3", _patch(8, "<B", 1), "EI_ABIVERSION=1"),
    ("empty", lambda d: b"", "magic"),
    ("truncated header", lambda d: d[:40], "ELF header"),
    ("section table past the file", _patch(0x28, "<Q", 1 << 40), "section header 0"),
    ("program headers past the file", _patch(0x20, "<Q", 1 << 40), "program header 0"),
    ("wrong header entry size", _patch(0x36, "<H", 40), "entry sizes"),
    ("truncated file", lambda d: d[: len(d) // 3], "past the file"),
]


@needs_clang
@pytest.mark.parametrize(("what", "change", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_objects_are_typed_errors_at_load(
    built: tuple[CodeObject, bytes], what: str, change: Callable[[bytes], bytes], message: str
) -> None:
    with pytest.raises(CodeObjectError, match=message) as caught:
        load_code_object(change(built[1]))
    assert isinstance(caught.value, InvalidArgument)


@needs_clang
def test_a_descriptor_cut_off_or_pointing_outside_the_image_is_refused(built: tuple[CodeObject, bytes]) -> None:
    data = built[1]
    co = load_code_object(data)
    # A segment that claims more file bytes than exist.
    phoff = struct.unpack_from("<Q", data, 0x20)[0]
    while struct.unpack_from("<I", data, phoff)[0] != 1:  # the first PT_LOAD header
        phoff += 56
    grown = _patch(phoff + 0x20, "<Q", len(data) * 4)(data)  # p_filesz
    with pytest.raises(CodeObjectError):
        load_code_object(grown)
    # A kernel descriptor whose code entry points outside the image.
    kd_at = _kd_offset(data)
    wild = _patch(kd_at + 16, "<q", len(co.image) * 8)(data)
    with pytest.raises(CodeObjectError, match="code entry"):
        load_code_object(wild)
    # A load image larger than the cap (p_memsz huge).
    huge = _patch(phoff + 0x28, "<Q", 1 << 40)(data)
    with pytest.raises(CodeObjectError, match="load segments span"):
        load_code_object(huge)


def test_objects_without_kernels_are_refused() -> None:
    header = bytearray(64)
    header[:4] = b"\x7fELF"
    header[4], header[5], header[7], header[8] = 2, 1, 64, 3
    struct.pack_into("<H", header, 18, 224)
    struct.pack_into("<I", header, 48, 0x41)  # gfx1100
    with pytest.raises(CodeObjectError, match="no kernel descriptors"):
        load_code_object(bytes(header))
