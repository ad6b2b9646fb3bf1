"""What a cubin declares about its kernels: entry names and parameter sizes, read from its ELF ``.nv.info.<name>``
sections (no GPU, no driver: for checks before a launch and for the tests).

Layout (ELF64 little-endian; the NVIDIA-specific records as the CUDA binary utilities print them):

========================  ============================================================================
ELF header                ``e_shoff`` (u64 at 0x28), ``e_shentsize``/``e_shnum``/``e_shstrndx`` (u16 at 0x3A)
section header (64 B)     ``sh_name`` (u32 at 0), ``sh_offset`` (u64 at 0x18), ``sh_size`` (u64 at 0x20)
``.nv.info.<kernel>``     records: ``format`` u8, ``attribute`` u8, then a u16 (the value, or for
                          ``EIFMT_SVAL`` the byte size of the payload that follows)
``EIATTR_KPARAM_INFO``    payload: u32 index, u16 ordinal, u16 offset, u32 flags (size in bytes: bits 18..31)
========================  ============================================================================
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final

from tinyhil.errors import InvalidArgument

__all__ = ["EIATTR", "EIFMT", "kernel_params"]

_ELF_MAGIC: Final = b"\x7fELF"
_ELFCLASS64: Final = 2
_ELFDATA2LSB: Final = 1
_EHDR: Final = struct.Struct("<4sBB34xQ10xHHH")  # magic, class, data, ..., e_shoff, ..., shentsize, shnum, shstrndx
_SHDR: Final = struct.Struct("<I20xQQ")  # sh_name, ..., sh_offset, sh_size
_RECORD: Final = struct.Struct("<BBH")
_KPARAM: Final = struct.Struct("<IHHI")
_KPARAM_SIZE_SHIFT: Final = 18
_INFO_PREFIX: Final = ".nv.info."


class EIFMT(IntEnum):
    """The format byte of a ``.nv.info`` record."""

    EIFMT_NVAL = 1
    EIFMT_BVAL = 2
    EIFMT_HVAL = 3
    EIFMT_SVAL = 4


class EIATTR(IntEnum):
    """The ``.nv.info`` attributes read here."""

    EIATTR_PARAM_CBANK = 0x0A
    EIATTR_KPARAM_INFO = 0x17
    EIATTR_CBANK_PARAM_SIZE = 0x19


def _sections(cubin: bytes) -> dict[str, bytes]:
    if len(cubin) < _EHDR.size:
        raise InvalidArgument(f"cubin of {len(cubin)} bytes, expected an ELF64 image of at least {_EHDR.size}")
    magic, elf_class, data, shoff, shentsize, shnum, shstrndx = _EHDR.unpack_from(cubin)
    if magic != _ELF_MAGIC or elf_class != _ELFCLASS64 or data != _ELFDATA2LSB:
        raise InvalidArgument(
            f"cubin starts {cubin[:6]!r}, expected a little-endian ELF64 image (b'\\x7fELF\\x02\\x01')"
        )
    if shentsize < _SHDR.size or shoff + shnum * shentsize > len(cubin) or shstrndx >= shnum:
        raise InvalidArgument(f"cubin section table at {shoff:#x} ({shnum} x {shentsize} bytes) is outside the image")
    headers = [_SHDR.unpack_from(cubin, shoff + i * shentsize) for i in range(shnum)]
    _, names_offset, names_size = headers[shstrndx]
    names = cubin[names_offset : names_offset + names_size]
    out = {}
    for name_offset, offset, size in headers:
        end = names.find(b"\0", name_offset)
        out[names[name_offset:end].decode(errors="replace")] = cubin[offset : offset + size]
    return out


def _param_sizes(info: bytes) -> tuple[int, ...]:
    by_ordinal: dict[int, int] = {}
    position = 0
    while position + _RECORD.size <= len(info):
        fmt, attribute, value = _RECORD.unpack_from(info, position)
        position += _RECORD.size
        if fmt != EIFMT.EIFMT_SVAL:
            continue
        if attribute == EIATTR.EIATTR_KPARAM_INFO and value >= _KPARAM.size:
            _, ordinal, _, flags = _KPARAM.unpack_from(info, position)
            by_ordinal[ordinal] = flags >> _KPARAM_SIZE_SHIFT
        position += value
    return tuple(by_ordinal[i] for i in sorted(by_ordinal))


def kernel_params(cubin: bytes) -> dict[str, tuple[int, ...]]:
    """Each kernel of ``cubin`` -> its parameters' sizes in bytes, in declaration order.

    Raises:
        InvalidArgument: ``cubin`` is not a little-endian ELF64 image.
    """
    sections = _sections(bytes(cubin))
    return {name[len(_INFO_PREFIX) :]: _param_sizes(data) for name, data in sections.items()
            if name.startswith(_INFO_PREFIX)}  # fmt: skip
