"""RDNA3 source-operand encodings: SGPRs, special registers, inline constants, literals, VGPRs (docs/rdna3.md).

A 9-bit source operand (RDNA3 ISA guide, "Scalar/Vector ALU Operands"): 0-105 SGPRs, then the special registers
below, 128-208 the integer inline constants 0..64 and -1..-16, 240-248 the float inline constants, 255 a 32-bit
literal dword after the instruction, 256-511 VGPRs 0-255. 7-bit scalar destinations use the same codes 0-127.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final

__all__ = [
    "FLOAT_INLINE_F16",
    "FLOAT_INLINE_F32",
    "FLOAT_INLINE_F64",
    "FLOAT_INLINE_TEXT",
    "INT_INLINE_MAX",
    "INT_INLINE_MIN",
    "NUM_SGPRS",
    "SGPR_FILE",
    "VGPR_BASE",
    "Src",
    "inline_int",
    "operand_text",
]

NUM_SGPRS: Final = 106  # s0..s105
SGPR_FILE: Final = 128  # codes 0..127 are one per-wave register file in the model (SGPRs, VCC, M0, NULL, EXEC)
VGPR_BASE: Final = 256
INT_INLINE_MIN: Final = -16
INT_INLINE_MAX: Final = 64


class Src(IntEnum):
    """Special operand codes (RDNA3 ISA guide, operand table)."""

    VCC_LO = 106
    VCC_HI = 107
    NULL = 124
    M0 = 125
    EXEC_LO = 126
    EXEC_HI = 127
    ZERO = 128
    INT_POS_MAX = 192  # 64
    INT_NEG_FIRST = 193  # -1
    INT_NEG_LAST = 208  # -16
    FLOAT_FIRST = 240
    INV_2PI = 248
    SCC = 253
    LITERAL = 255


def _f32(value: float) -> int:
    return int(struct.unpack("<I", struct.pack("<f", value))[0])


def _f64(value: float) -> int:
    return int(struct.unpack("<Q", struct.pack("<d", value))[0])


def _f16(value: float) -> int:
    return int(struct.unpack("<H", struct.pack("<e", value))[0])


_FLOATS: Final = (0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0)
# 1/(2*pi) is not the rounded quotient but the ISA's own bit patterns for each width.
FLOAT_INLINE_F32: Final = {Src.FLOAT_FIRST + i: _f32(v) for i, v in enumerate(_FLOATS)} | {Src.INV_2PI: 0x3E22F983}
FLOAT_INLINE_F64: Final = {Src.FLOAT_FIRST + i: _f64(v) for i, v in enumerate(_FLOATS)} | {
    Src.INV_2PI: 0x3FC45F306DC9C882
}
FLOAT_INLINE_F16: Final = {Src.FLOAT_FIRST + i: _f16(v) for i, v in enumerate(_FLOATS)} | {Src.INV_2PI: 0x3118}
FLOAT_INLINE_TEXT: Final = {Src.FLOAT_FIRST + i: str(v) for i, v in enumerate(_FLOATS)} | {Src.INV_2PI: "0.15915494"}
_SPECIAL_TEXT: Final = {
    Src.VCC_LO: "vcc_lo",
    Src.VCC_HI: "vcc_hi",
    Src.NULL: "null",
    Src.M0: "m0",
    Src.EXEC_LO: "exec_lo",
    Src.EXEC_HI: "exec_hi",
    Src.SCC: "scc",
}


def inline_int(code: int) -> int | None:
    """The integer an inline-constant code stands for (128..208), else ``None``."""
    if Src.ZERO <= code <= Src.INT_POS_MAX:
        return code - Src.ZERO
    if Src.INT_NEG_FIRST <= code <= Src.INT_NEG_LAST:
        return Src.INT_NEG_FIRST - 1 - code
    return None


def operand_text(code: int, literal: int = 0, nregs: int = 1) -> str:
    """LLVM's spelling of an operand: ``s1``, ``v[2:3]``, ``vcc_lo``, ``-4``, ``0.5``, ``0x1234``."""
    if code >= VGPR_BASE or code < NUM_SGPRS:
        kind, index = ("v", code - VGPR_BASE) if code >= VGPR_BASE else ("s", code)
        return f"{kind}{index}" if nregs == 1 else f"{kind}[{index}:{index + nregs - 1}]"
    if nregs == 2 and code in (Src.VCC_LO, Src.EXEC_LO):
        return "vcc" if code == Src.VCC_LO else "exec"
    if code in _SPECIAL_TEXT:
        return _SPECIAL_TEXT[Src(code)]
    value = inline_int(code)
    if value is not None:
        return str(value)
    if code in FLOAT_INLINE_TEXT:
        return FLOAT_INLINE_TEXT[code]
    if code == Src.LITERAL:
        return f"{literal:#x}"
    return f"src{code}"
