"""Reading kernels and their parameter sizes from a cubin, and the typed errors for what is not one."""

from __future__ import annotations

import struct

import pytest

from tinyhil.errors import InvalidArgument
from tinyhil.nv.cubin import EIATTR, EIFMT, kernel_params


def _elf(sections: dict[str, bytes]) -> bytes:
    """A minimal ELF64 LE image with ``sections`` (plus the null section and the section-name table)."""
    names = b"\0" + b"".join(name.encode() + b"\0" for name in [*sections, ".shstrtab"])
    bodies = [*sections.values(), names]
    offset, data, headers = 64, b"", [bytes(64)]
    name_offset = 1
    for name, body in zip([*sections, ".shstrtab"], bodies, strict=True):
        headers.append(struct.pack("<I20xQQ24x", name_offset, offset + len(data), len(body)))
        name_offset += len(name) + 1
        data += body
    shoff = 64 + len(data)
    header = struct.pack("<4sBB34xQ10xHHH", b"\x7fELF", 2, 1, shoff, 64, len(headers), len(headers) - 1)
    return header + data + b"".join(headers)


def _kparam(ordinal: int, offset: int, size: int) -> bytes:
    payload = struct.pack("<IHHI", 0, ordinal, offset, size << 18 | 0x1F000)
    return struct.pack("<BBH", EIFMT.EIFMT_SVAL, EIATTR.EIATTR_KPARAM_INFO, len(payload)) + payload


def test_kernel_params_reads_every_kernels_parameters_in_ordinal_order() -> None:
    hval = struct.pack("<BBH", EIFMT.EIFMT_HVAL, EIATTR.EIATTR_CBANK_PARAM_SIZE, 12)  # skipped: not KPARAM_INFO
    info = _kparam(1, 8, 4) + hval + _kparam(0, 0, 8)  # NVRTC writes the last parameter first
    image = _elf({".text.k": b"\0" * 16, ".nv.info.k": info, ".nv.info.empty": b"", ".nv.info": hval})
    assert kernel_params(image) == {"k": (8, 4), "empty": ()}


@pytest.mark.parametrize(
    ("image", "message"),
    [
        (b"\x7fELF", "cubin of 4 bytes, expected an ELF64 image of at least 64"),
        (b"// PTX text, not a cubin" + bytes(64), "expected a little-endian ELF64 image"),
        (_elf({})[:-64], "section table at .* is outside the image"),
    ],
)
def test_what_is_not_a_cubin_is_an_invalid_argument_naming_it(image: bytes, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        kernel_params(image)
