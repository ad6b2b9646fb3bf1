"""Load AMDHSA code objects (ELF64, EM_AMDGPU, code object v4-v6): kernels, their descriptors, and the load image.

The driver side of running LLVM-built GPU code (docs/rdna3.md): :func:`load_code_object` checks the whole object
once and returns a :class:`CodeObject`; :meth:`CodeObject.upload` places its image in GPU memory, and
:func:`user_sgprs` lays out the user SGPRs a kernel descriptor enables, as the command processor loads them.
Every size and offset is checked against the file's own bytes: a malformed object is a :class:`CodeObjectError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tinyhil.align import round_up
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu_pm4 import COMPUTE_PGM_ADDR_SHIFT
from tinyhil.spec.amdhsa import (
    ABI_VERSION_TO_CODE_OBJECT,
    EF_AMDGPU_MACH,
    EF_AMDGPU_MACH_AMDGCN_GFX1100,
    EF_AMDGPU_MACH_NAMES,
    EI_ABIVERSION,
    EI_CLASS,
    EI_DATA,
    EI_OSABI,
    ELF_MAGIC,
    ELFCLASS64,
    ELFDATA2LSB,
    ELFOSABI_AMDGPU_HSA,
    EM_AMDGPU,
    KD_BYTES,
    KD_SUFFIX,
    NOTE_NAME_AMDGPU,
    NT_AMDGPU_METADATA,
    USER_SGPR_COUNT_MASK,
    VGPR_GRANULE_WAVE32,
    VGPR_GRANULE_WAVE64,
    KernelCodeProperty,
    Rsrc1,
    Rsrc2,
    SectionType,
    SegmentType,
    rsrc2_lds_bytes,
    rsrc2_with_lds,
    user_sgpr_dwords,
)

from .errors import CodeObjectError

__all__ = [
    "PGM_ALIGN",
    "CodeObject",
    "KernelDescriptor",
    "grid_dims",
    "hidden_kernargs",
    "load_code_object",
    "user_sgprs",
]

_EHDR: Final = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR: Final = struct.Struct("<IIQQQQIIQQ")
_PHDR: Final = struct.Struct("<IIQQQQQQ")
_SYM: Final = struct.Struct("<IBBHQQ")
_NOTE: Final = struct.Struct("<III")
_NOTE_ALIGN: Final = 4  # ELF64 note name and descriptor are each padded to 4 bytes (as AMDGPU notes are)
_KD: Final = struct.Struct("<IIIIq20xIIIHH4x")
MAX_IMAGE_BYTES: Final = 64 << 20  # the load image's extent (vaddr + memsz), bounded before anything is allocated
_MAX_METADATA_BYTES: Final = 1 << 20
_VGPR_GRANULE_MASK: Final = 0x3F
PGM_ALIGN: Final = 1 << COMPUTE_PGM_ADDR_SHIFT  # COMPUTE_PGM_LO/HI hold the entry address >> 8


@dataclass(frozen=True, slots=True)
class KernelDescriptor:
    """One kernel's 64-byte descriptor (``NAME.kd``), decoded; addresses are the code object's virtual addresses."""

    name: str
    descriptor_vaddr: int
    entry_vaddr: int  # descriptor_vaddr + kernel_code_entry_byte_offset
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    compute_pgm_rsrc1: int
    compute_pgm_rsrc2: int
    compute_pgm_rsrc3: int
    kernel_code_properties: int
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def wave32(self) -> bool:
        return bool(self.kernel_code_properties & KernelCodeProperty.ENABLE_WAVEFRONT_SIZE32)

    @property
    def user_sgpr_count(self) -> int:
        return (self.compute_pgm_rsrc2 >> Rsrc2.USER_SGPR_COUNT) & USER_SGPR_COUNT_MASK

    @property
    def vgpr_count(self) -> int:
        granule = VGPR_GRANULE_WAVE32 if self.wave32 else VGPR_GRANULE_WAVE64
        return (((self.compute_pgm_rsrc1 >> Rsrc1.GRANULATED_WORKITEM_VGPR_COUNT) & _VGPR_GRANULE_MASK) + 1) * granule

    @property
    def lds_bytes(self) -> int:
        """LDS the kernel needs: its fixed group segment, or rsrc2's granulated size if that is larger."""
        return max(self.group_segment_fixed_size, rsrc2_lds_bytes(self.compute_pgm_rsrc2))

    def dispatch_rsrc2(self, dynamic_lds_bytes: int = 0) -> int:
        """``COMPUTE_PGM_RSRC2`` as a driver programs it: the descriptor's value with LDS_SIZE covering the group
        segment plus ``dynamic_lds_bytes`` (an HSA descriptor leaves LDS_SIZE 0: the dispatch supplies it)."""
        try:
            return rsrc2_with_lds(self.compute_pgm_rsrc2, self.group_segment_fixed_size + dynamic_lds_bytes)
        except InvalidArgument as error:
            raise CodeObjectError(f"{self.name}: {error}") from None


@dataclass(frozen=True, slots=True)
class CodeObject:
    """A loaded code object: ``image`` holds its PT_LOAD segments at their virtual addresses (from 0)."""

    code_object_version: int
    mach: int
    image: bytes
    kernels: Mapping[str, KernelDescriptor]
    metadata: Mapping[str, Any]

    def upload(self, write: Callable[[int, bytes], None], base: int) -> dict[str, int]:
        """Write the image at GPU address ``base`` (256-byte aligned, as ``COMPUTE_PGM_LO`` needs) through
        ``write(addr, data)``; returns each kernel's entry address (what ``COMPUTE_PGM_LO/HI`` point at)."""
        if base % PGM_ALIGN:
            raise CodeObjectError(f"base={base:#x}, expected a {PGM_ALIGN}-byte aligned GPU address")
        write(base, self.image)
        return {name: base + kd.entry_vaddr for name, kd in self.kernels.items()}


def _fail(what: str) -> CodeObjectError:
    return CodeObjectError(f"malformed AMDHSA code object: {what}")


def _unpack(layout: struct.Struct, data: bytes, offset: int, what: str) -> tuple[Any, ...]:
    if offset < 0 or offset + layout.size > len(data):
        raise _fail(f"{what} at {offset:#x}+{layout.size:#x} lies past the file's {len(data):#x} bytes")
    return layout.unpack_from(data, offset)


def _slice(data: bytes, offset: int, nbytes: int, what: str) -> bytes:
    if offset < 0 or nbytes < 0 or offset + nbytes > len(data):
        raise _fail(f"{what} at {offset:#x}+{nbytes:#x} lies past the file's {len(data):#x} bytes")
    return data[offset : offset + nbytes]


def _cstring(table: bytes, offset: int, what: str) -> str:
    end = table.find(b"\0", offset)
    if offset >= len(table) or end < 0:
        raise _fail(f"{what} name offset {offset:#x} is outside its string table ({len(table):#x} bytes)")
    return table[offset:end].decode("utf-8", "replace")


def _metadata(sections: list[tuple[Any, ...]], data: bytes) -> dict[str, Any]:
    import msgpack  # type: ignore[import-untyped]

    for sh in sections:
        if sh[1] != SectionType.SHT_NOTE:
            continue
        notes = _slice(data, sh[4], sh[5], "note section")
        pos = 0
        while pos + _NOTE.size <= len(notes):
            namesz, descsz, ntype = _NOTE.unpack_from(notes, pos)
            name_at = pos + _NOTE.size
            desc_at = name_at + round_up(namesz, _NOTE_ALIGN)
            end = desc_at + round_up(descsz, _NOTE_ALIGN)
            if desc_at + descsz > len(notes):
                raise _fail(f"note at {pos:#x} claims {namesz:#x}+{descsz:#x} bytes past its section")
            name = notes[name_at : name_at + namesz].rstrip(b"\0")
            if name == NOTE_NAME_AMDGPU and ntype == NT_AMDGPU_METADATA:
                if descsz > _MAX_METADATA_BYTES:
                    raise _fail(f"metadata note of {descsz:#x} bytes, expected at most {_MAX_METADATA_BYTES:#x}")
                try:
                    meta = msgpack.unpackb(notes[desc_at : desc_at + descsz], raw=False, strict_map_key=False)
                except (ValueError, msgpack.UnpackException) as exc:
                    raise _fail(f"metadata note is not msgpack ({exc})") from None
                if not isinstance(meta, dict):
                    raise _fail(f"metadata is a {type(meta).__name__}, expected a map")
                return meta
            pos = end
    return {}


def _image(segments: list[tuple[Any, ...]], data: bytes) -> bytes:
    loads = [ph for ph in segments if ph[0] == SegmentType.PT_LOAD]
    extent = max((ph[3] + ph[6] for ph in loads), default=0)
    if extent > MAX_IMAGE_BYTES:
        raise _fail(f"load segments span {extent:#x} bytes, expected at most {MAX_IMAGE_BYTES:#x}")
    image = bytearray(extent)
    for _p_type, _flags, offset, vaddr, _paddr, filesz, memsz, _align in loads:
        if filesz > memsz:
            raise _fail(f"segment at {vaddr:#x} has p_filesz {filesz:#x} > p_memsz {memsz:#x}")
        image[vaddr : vaddr + filesz] = _slice(data, offset, filesz, f"segment at {vaddr:#x}")
    return bytes(image)


def load_code_object(data: bytes, *, mach: int = EF_AMDGPU_MACH_AMDGCN_GFX1100) -> CodeObject:
    """Parse and check an AMDHSA code object built for the processor ``mach`` (e_flags, default gfx1100: the
    processor the emulated GPUs run, docs/rdna3.md).

    Raises:
        CodeObjectError: not ELF64 little-endian, not EM_AMDGPU / AMDGPU-HSA, built for another processor (gfx1201's
            RDNA4 encodings are not gfx1100's), an unknown code object version, a table or descriptor past the
            file's bytes, a descriptor outside the load image, or no kernels.
    """
    data = bytes(data)
    if data[:4] != ELF_MAGIC:
        raise _fail(f"magic {data[:4]!r}, expected {ELF_MAGIC!r}")
    ident, _type, machine, _ver, _entry, phoff, shoff, flags, _ehsize, phentsize, phnum, shentsize, shnum, _ = _unpack(
        _EHDR, data, 0, "ELF header"
    )
    if ident[EI_CLASS] != ELFCLASS64 or ident[EI_DATA] != ELFDATA2LSB:
        raise _fail(f"ELF class/data {ident[EI_CLASS]}/{ident[EI_DATA]}, expected 64-bit little-endian (2/1)")
    if machine != EM_AMDGPU:
        raise _fail(f"e_machine={machine}, expected EM_AMDGPU ({EM_AMDGPU})")
    if ident[EI_OSABI] != ELFOSABI_AMDGPU_HSA:
        raise _fail(f"EI_OSABI={ident[EI_OSABI]}, expected ELFOSABI_AMDGPU_HSA ({ELFOSABI_AMDGPU_HSA})")
    if flags & EF_AMDGPU_MACH != mach:
        built, expected = (EF_AMDGPU_MACH_NAMES.get(m, f"machine {m:#x}") for m in (flags & EF_AMDGPU_MACH, mach))
        raise CodeObjectError(f"code object built for {built} (e_flags {flags:#x}), expected {expected}")
    version = ABI_VERSION_TO_CODE_OBJECT.get(ident[EI_ABIVERSION])
    if version is None:
        raise _fail(
            f"EI_ABIVERSION={ident[EI_ABIVERSION]}, expected one of {sorted(ABI_VERSION_TO_CODE_OBJECT)} (v4-v6)"
        )
    if (phnum and phentsize != _PHDR.size) or (shnum and shentsize != _SHDR.size):
        raise _fail(f"header entry sizes {phentsize}/{shentsize}, expected {_PHDR.size}/{_SHDR.size}")
    segments = [_unpack(_PHDR, data, phoff + i * _PHDR.size, f"program header {i}") for i in range(phnum)]
    sections = [_unpack(_SHDR, data, shoff + i * _SHDR.size, f"section header {i}") for i in range(shnum)]
    image = _image(segments, data)
    metadata = _metadata(sections, data)
    meta_by_name = {k.get(".name"): k for k in metadata.get("amdhsa.kernels", []) if isinstance(k, dict)}
    kernels: dict[str, KernelDescriptor] = {}
    for sh in sections:
        if sh[1] not in (SectionType.SHT_SYMTAB, SectionType.SHT_DYNSYM) or kernels:
            continue
        if sh[6] >= len(sections):
            raise _fail(f"symbol table links to section {sh[6]}, of {len(sections)}")
        strtab = sections[sh[6]]
        names = _slice(data, strtab[4], strtab[5], "string table")
        table = _slice(data, sh[4], sh[5], "symbol table")
        for at in range(0, len(table) - _SYM.size + 1, _SYM.size):
            st_name, _info, _other, _shndx, value, size = _SYM.unpack_from(table, at)
            name = _cstring(names, st_name, "symbol")
            if not name.endswith(KD_SUFFIX):
                continue
            if size != KD_BYTES or value + KD_BYTES > len(image):
                raise _fail(f"descriptor {name} at {value:#x}+{size:#x}, expected {KD_BYTES} bytes inside the image")
            group, private, kernarg, _, entry, rsrc3, rsrc1, rsrc2, props, _preload = _KD.unpack_from(image, value)
            entry_vaddr = value + entry
            if not 0 <= entry_vaddr < len(image):
                raise _fail(f"{name}: code entry {entry_vaddr:#x} is outside the {len(image):#x}-byte image")
            kernel = name[: -len(KD_SUFFIX)]
            kernels[kernel] = KernelDescriptor(
                kernel, value, entry_vaddr, group, private, kernarg, rsrc1, rsrc2, rsrc3, props,
                meta_by_name.get(kernel, {}),
            )  # fmt: skip
    if not kernels:
        raise _fail("no kernel descriptors (no NAME.kd symbols)")
    return CodeObject(version, flags & EF_AMDGPU_MACH, image, kernels, metadata)


def user_sgprs(kd: KernelDescriptor, values: Mapping[KernelCodeProperty, int]) -> list[int]:
    """The ``COMPUTE_USER_DATA`` dwords for ``kd``: each user SGPR field the descriptor enables, in load order,
    taken from ``values`` (64-bit pointers split low dword first; 128-bit private segment buffer as 4 dwords).

    Raises:
        CodeObjectError: an enabled field has no value, or the fields exceed the descriptor's USER_SGPR_COUNT.
    """
    try:
        dwords = user_sgpr_dwords(kd.kernel_code_properties, values)
    except KeyError as missing:
        flag = KernelCodeProperty(missing.args[0])
        raise CodeObjectError(f"{kd.name} enables {flag.name}, but no value was given for it") from None
    if len(dwords) > kd.user_sgpr_count:
        raise CodeObjectError(f"{kd.name}: {len(dwords)} user SGPRs enabled, USER_SGPR_COUNT={kd.user_sgpr_count}")
    return dwords


# Hidden (implicit) kernel arguments the runtime fills, by metadata ``.value_kind`` (AMDGPUUsage "Code Object V5
# Metadata"): a function of (grid in workgroups, workgroup size) per kind.
_HIDDEN: Final[dict[str, Callable[[tuple[int, int, int], tuple[int, int, int]], int]]] = {
    "hidden_block_count_x": lambda grid, block: grid[0],
    "hidden_block_count_y": lambda grid, block: grid[1],
    "hidden_block_count_z": lambda grid, block: grid[2],
    "hidden_group_size_x": lambda grid, block: block[0],
    "hidden_group_size_y": lambda grid, block: block[1],
    "hidden_group_size_z": lambda grid, block: block[2],
    "hidden_grid_dims": lambda grid, block: grid_dims(grid, block),
}


def grid_dims(grid: tuple[int, int, int], block: tuple[int, int, int]) -> int:
    """The dispatch's dimensions (1-3): the highest one with more than one work-item."""
    return 1 + (grid[1] * block[1] > 1 or grid[2] * block[2] > 1) + (grid[2] * block[2] > 1)


def hidden_kernargs(kd: KernelDescriptor, grid: tuple[int, int, int], block: tuple[int, int, int]) -> bytes:
    """The kernel-argument bytes the metadata's hidden arguments need (explicit arguments left zero), ``kernarg_size``
    long: block counts, group sizes and grid dimensions; the other hidden kinds (remainders, offsets, queue and
    printf pointers) are zero, as for a grid of whole workgroups without those runtime services."""
    data = bytearray(kd.kernarg_size)
    for arg in kd.metadata.get(".args", []):
        fill = _HIDDEN.get(arg.get(".value_kind", ""))
        offset, size = int(arg.get(".offset", -1)), int(arg.get(".size", 0))
        if fill is None:
            continue
        if offset < 0 or offset + size > len(data) or size not in (2, 4, 8):
            raise CodeObjectError(f"{kd.name}: hidden argument {arg!r} lies outside kernarg_size={kd.kernarg_size}")
        data[offset : offset + size] = fill(grid, block).to_bytes(size, "little")
    return bytes(data)
