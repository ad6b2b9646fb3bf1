"""AMDHSA code-object facts: ELF header fields, the metadata note, the 64-byte kernel descriptor (docs/rdna3.md).

Values are LLVM's AMDGPUUsage document ("Code Object Metadata", "Kernel Descriptor") and the ELF specification;
the bit fields of ``COMPUTE_PGM_RSRC1/2`` are those of GFX10-11 as the kernel descriptor stores them.
Offsets are bytes; all fields are little-endian.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum, IntFlag
from typing import Final

from tinyhil.align import ceil_div
from tinyhil.errors import InvalidArgument

__all__ = [
    "ABI_VERSION_TO_CODE_OBJECT",
    "EF_AMDGPU_MACH",
    "EF_AMDGPU_MACH_AMDGCN_GFX1100",
    "EF_AMDGPU_MACH_NAMES",
    "EI_ABIVERSION",
    "EI_CLASS",
    "EI_DATA",
    "EI_OSABI",
    "ELFCLASS64",
    "ELFDATA2LSB",
    "ELFOSABI_AMDGPU_HSA",
    "ELF_MAGIC",
    "EM_AMDGPU",
    "KD_BYTES",
    "KD_SUFFIX",
    "LDS_GRANULE_BYTES",
    "LDS_SIZE_FIELD_MASK",
    "NOTE_NAME_AMDGPU",
    "NT_AMDGPU_METADATA",
    "USER_SGPR_COUNT_MASK",
    "USER_SGPR_WIDTHS",
    "VGPR_GRANULE_WAVE32",
    "VGPR_GRANULE_WAVE64",
    "KdOffset",
    "KernelCodeProperty",
    "Rsrc1",
    "Rsrc2",
    "SectionType",
    "SegmentType",
    "SymbolType",
    "rsrc2_lds_bytes",
    "rsrc2_with_lds",
    "user_sgpr_dwords",
]

ELF_MAGIC: Final = b"\x7fELF"
EI_CLASS: Final = 4
EI_DATA: Final = 5
EI_OSABI: Final = 7
EI_ABIVERSION: Final = 8
ELFCLASS64: Final = 2
ELFDATA2LSB: Final = 1
ELFOSABI_AMDGPU_HSA: Final = 64
EM_AMDGPU: Final = 224
# e_ident[EI_ABIVERSION] for ELFOSABI_AMDGPU_HSA: 2 = code object v4, 3 = v5, 4 = v6 (AMDGPUUsage "ELF Code Object").
ABI_VERSION_TO_CODE_OBJECT: Final = {2: 4, 3: 5, 4: 6}
EF_AMDGPU_MACH: Final = 0xFF  # e_flags bits 0-7: the processor
EF_AMDGPU_MACH_AMDGCN_GFX1100: Final = 0x41
# Processor names of the e_flags machine values (LLVM's ELF.h EF_AMDGPU_MACH_AMDGCN_*), for messages.
EF_AMDGPU_MACH_NAMES: Final = {0x41: "gfx1100", 0x46: "gfx1101", 0x47: "gfx1102", 0x48: "gfx1200", 0x4E: "gfx1201",
                               0x4C: "gfx942", 0x4F: "gfx950", 0x3F: "gfx90a"}  # fmt: skip

NOTE_NAME_AMDGPU: Final = b"AMDGPU"
NT_AMDGPU_METADATA: Final = 32  # msgpack map with "amdhsa.version" and "amdhsa.kernels"

KD_BYTES: Final = 64
KD_SUFFIX: Final = ".kd"


class SectionType(IntEnum):
    """ELF ``sh_type`` values the loader reads."""

    SHT_SYMTAB = 2
    SHT_NOTE = 7
    SHT_NOBITS = 8
    SHT_DYNSYM = 11


class SegmentType(IntEnum):
    """ELF ``p_type`` values the loader reads."""

    PT_LOAD = 1
    PT_NOTE = 4


class SymbolType(IntEnum):
    """ELF ``st_info & 0xf``."""

    STT_OBJECT = 1
    STT_FUNC = 2


class KdOffset(IntEnum):
    """Byte offsets of the kernel descriptor's fields (AMDGPUUsage "Kernel Descriptor for GFX6-GFX12")."""

    GROUP_SEGMENT_FIXED_SIZE = 0  # u32
    PRIVATE_SEGMENT_FIXED_SIZE = 4  # u32
    KERNARG_SIZE = 8  # u32
    KERNEL_CODE_ENTRY_BYTE_OFFSET = 16  # i64, from the descriptor's own address
    COMPUTE_PGM_RSRC3 = 44  # u32
    COMPUTE_PGM_RSRC1 = 48  # u32
    COMPUTE_PGM_RSRC2 = 52  # u32
    KERNEL_CODE_PROPERTIES = 56  # u16
    KERNARG_PRELOAD = 58  # u16


class KernelCodeProperty(IntFlag):
    """``kernel_code_properties``: which user SGPRs the descriptor enables, in the order the CP loads them."""

    ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER = 1 << 0
    ENABLE_SGPR_DISPATCH_PTR = 1 << 1
    ENABLE_SGPR_QUEUE_PTR = 1 << 2
    ENABLE_SGPR_KERNARG_SEGMENT_PTR = 1 << 3
    ENABLE_SGPR_DISPATCH_ID = 1 << 4
    ENABLE_SGPR_FLAT_SCRATCH_INIT = 1 << 5
    ENABLE_SGPR_PRIVATE_SEGMENT_SIZE = 1 << 6
    ENABLE_WAVEFRONT_SIZE32 = 1 << 10
    USES_DYNAMIC_STACK = 1 << 11


# SGPRs each enabled user-SGPR field takes, in load order.
USER_SGPR_WIDTHS: Final = {
    KernelCodeProperty.ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER: 4,
    KernelCodeProperty.ENABLE_SGPR_DISPATCH_PTR: 2,
    KernelCodeProperty.ENABLE_SGPR_QUEUE_PTR: 2,
    KernelCodeProperty.ENABLE_SGPR_KERNARG_SEGMENT_PTR: 2,
    KernelCodeProperty.ENABLE_SGPR_DISPATCH_ID: 2,
    KernelCodeProperty.ENABLE_SGPR_FLAT_SCRATCH_INIT: 2,
    KernelCodeProperty.ENABLE_SGPR_PRIVATE_SEGMENT_SIZE: 1,
}


class Rsrc1(IntEnum):
    """``COMPUTE_PGM_RSRC1`` fields as (shift); widths in the comments."""

    GRANULATED_WORKITEM_VGPR_COUNT = 0  # 6 bits: VGPRs = (x + 1) * 8 in wave32, * 4 in wave64
    GRANULATED_WAVEFRONT_SGPR_COUNT = 6  # 4 bits
    FLOAT_ROUND_MODE_32 = 12  # 2 bits
    FLOAT_ROUND_MODE_16_64 = 14  # 2 bits
    FLOAT_DENORM_MODE_32 = 16  # 2 bits
    FLOAT_DENORM_MODE_16_64 = 18  # 2 bits
    ENABLE_DX10_CLAMP = 21  # 1 bit
    ENABLE_IEEE_MODE = 23  # 1 bit
    WGP_MODE = 29  # 1 bit
    MEM_ORDERED = 30  # 1 bit


class Rsrc2(IntEnum):
    """``COMPUTE_PGM_RSRC2`` fields as (shift); widths in the comments."""

    ENABLE_PRIVATE_SEGMENT = 0  # 1 bit: the scratch wave offset system SGPR
    USER_SGPR_COUNT = 1  # 5 bits: system SGPRs start after this many
    ENABLE_TRAP_HANDLER = 6  # 1 bit
    ENABLE_SGPR_WORKGROUP_ID_X = 7  # 1 bit
    ENABLE_SGPR_WORKGROUP_ID_Y = 8  # 1 bit
    ENABLE_SGPR_WORKGROUP_ID_Z = 9  # 1 bit
    ENABLE_SGPR_WORKGROUP_INFO = 10  # 1 bit
    ENABLE_VGPR_WORKITEM_ID = 11  # 2 bits: 0 x, 1 x+y, 2 x+y+z (packed in v0 on GFX11)
    GRANULATED_LDS_SIZE = 15  # 9 bits


USER_SGPR_COUNT_MASK: Final = 0x1F  # rsrc2.USER_SGPR_COUNT, 5 bits
VGPR_GRANULE_WAVE32: Final = 8  # rsrc1.GRANULATED_WORKITEM_VGPR_COUNT unit in wave32
VGPR_GRANULE_WAVE64: Final = 4
LDS_GRANULE_BYTES: Final = 512  # rsrc2.GRANULATED_LDS_SIZE unit on GFX11 (128 dwords)
LDS_SIZE_FIELD_MASK: Final = 0x1FF  # rsrc2.GRANULATED_LDS_SIZE, 9 bits


def rsrc2_lds_bytes(rsrc2: int) -> int:
    """The LDS bytes per workgroup ``COMPUTE_PGM_RSRC2.LDS_SIZE`` allocates (whole 512-byte granules)."""
    return ((rsrc2 >> Rsrc2.GRANULATED_LDS_SIZE) & LDS_SIZE_FIELD_MASK) * LDS_GRANULE_BYTES


def rsrc2_with_lds(rsrc2: int, lds_bytes: int) -> int:
    """``rsrc2`` with LDS_SIZE covering ``lds_bytes`` (rounded up to granules), as a driver or the AQL firmware
    programs it for a dispatch.

    Raises:
        InvalidArgument: ``lds_bytes`` is negative or more than the 9-bit field holds (0x1ff granules).
    """
    granules = ceil_div(lds_bytes, LDS_GRANULE_BYTES)
    if lds_bytes < 0 or granules > LDS_SIZE_FIELD_MASK:
        raise InvalidArgument(
            f"lds_bytes={lds_bytes:#x}, expected 0..{LDS_SIZE_FIELD_MASK * LDS_GRANULE_BYTES:#x} (rsrc2.LDS_SIZE)"
        )
    cleared = rsrc2 & ~(LDS_SIZE_FIELD_MASK << Rsrc2.GRANULATED_LDS_SIZE)
    return cleared | (granules << Rsrc2.GRANULATED_LDS_SIZE)


def user_sgpr_dwords(properties: int, values: Mapping[KernelCodeProperty, int]) -> list[int]:
    """The user SGPR dwords (``COMPUTE_USER_DATA_0..``) that ``kernel_code_properties`` enable, in load order, each
    field from ``values`` (64-bit values low dword first, the 128-bit private segment buffer as 4 dwords).

    Raises:
        KeyError: an enabled field has no value (the key names the field).
    """
    dwords: list[int] = []
    for flag, width in USER_SGPR_WIDTHS.items():
        if properties & flag:
            value = values[flag]
            dwords.extend((value >> (32 * i)) & 0xFFFF_FFFF for i in range(width))
    return dwords
