"""The MODE hardware register: float rounding and denormal modes, DX10 clamp and IEEE mode, per wave.

MODE (RDNA3 ISA guide, "Hardware Registers", ``HW_REG_MODE`` = 1) starts from the dispatch's ``COMPUTE_PGM_RSRC1``
float fields and is read by ``s_getreg_b32`` and written by ``s_setreg_b32``, ``s_setreg_imm32_b32``,
``s_round_mode`` and ``s_denorm_mode``. ``hwreg`` operands (the SOPK simm16) name a register in bits [5:0], a
field offset in [10:6] and its size minus one in [15:11].

| bits | field | what the model does with it |
|---|---|---|
| [1:0] | FP_ROUND f32 | kept and read back; arithmetic always rounds to nearest even (docs/rdna3.md) |
| [3:2] | FP_ROUND f16/f64 | kept and read back |
| [5:4] | FP_DENORM f32 | applied: bit 4 clear flushes f32 denormal inputs to 0, bit 5 clear flushes results |
| [7:6] | FP_DENORM f16/f64 | kept and read back (f16/f64 denormals are always kept) |
| [8] | DX10_CLAMP | kept and read back |
| [9] | IEEE | kept and read back |
| others | exceptions, LOD clamp, ... | kept and read back, no effect |
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Final

import numpy as np

from tinyhil.spec.amdhsa import Rsrc1

from .decode import Inst
from .state import Group, OperandError, Waves

__all__ = ["MODE_HANDLERS", "HwReg", "Mode", "flush_f32", "initial_mode", "mode_written"]

Handler = Callable[[Group, Inst], None]
_U32: Final = np.uint32
_HWREG_ID_MASK: Final = 0x3F
_HWREG_OFFSET_SHIFT: Final = 6
_HWREG_OFFSET_MASK: Final = 0x1F
_HWREG_SIZE_SHIFT: Final = 11
_NIBBLE: Final = 0xF
_F32_TINY: Final = np.float32(np.finfo(np.float32).tiny)


class HwReg(IntEnum):
    """Hardware register ids the model implements (RDNA3 ISA guide, ``s_getreg``/``s_setreg``)."""

    HW_REG_MODE = 1


class Mode(IntEnum):
    """MODE register fields (shift)."""

    FP_ROUND = 0  # 4 bits: [1:0] f32, [3:2] f16/f64
    FP_DENORM = 4  # 4 bits: [1:0] f32, [3:2] f16/f64; per pair bit 0 = keep inputs, bit 1 = keep results
    DX10_CLAMP = 8
    IEEE = 9


_DENORM_F32_INPUTS: Final = Mode.FP_DENORM  # bit clear: f32 denormal inputs read as 0
_DENORM_F32_RESULTS: Final = Mode.FP_DENORM + 1  # bit clear: f32 denormal results are written as 0


def initial_mode(rsrc1: int) -> int:
    """MODE at wave launch, from ``COMPUTE_PGM_RSRC1``'s float fields."""
    round_mode = (rsrc1 >> Rsrc1.FLOAT_ROUND_MODE_32) & _NIBBLE  # the f32 and f16/f64 fields are adjacent
    denorm = (rsrc1 >> Rsrc1.FLOAT_DENORM_MODE_32) & _NIBBLE
    dx10 = (rsrc1 >> Rsrc1.ENABLE_DX10_CLAMP) & 1
    ieee = (rsrc1 >> Rsrc1.ENABLE_IEEE_MODE) & 1
    return (round_mode << Mode.FP_ROUND) | (denorm << Mode.FP_DENORM) | (dx10 << Mode.DX10_CLAMP) | (
        ieee << Mode.IEEE)  # fmt: skip


def mode_written(w: Waves) -> None:
    """Recompute whether any wave flushes f32 denormals (the VALU skips the flush when none does)."""
    keep = (_U32(1) << _U32(_DENORM_F32_INPUTS)) | (_U32(1) << _U32(_DENORM_F32_RESULTS))
    w.flushes_f32 = bool(((w.mode & keep) != keep).any())


def flush_f32(g: Group, x: np.ndarray, results: bool) -> np.ndarray:
    """``x`` (f32) with denormals replaced by a zero of the same sign in the waves whose MODE flushes them
    (inputs, or with ``results`` the values written)."""
    if not g.w.flushes_f32:
        return x
    bit = _DENORM_F32_RESULTS if results else _DENORM_F32_INPUTS
    flush = (((g.w.mode[g.sel] >> _U32(bit)) & _U32(1)) == 0)[:, None]  # (n, 1): per wave
    x = x if np.ndim(x) == 2 else np.reshape(x, (1, 1))  # a constant operand: the same for every lane
    denormal = (x != 0) & (np.abs(x) < _F32_TINY)
    return np.where(denormal & flush, np.copysign(np.float32(0), x), x)


def _field(simm: int) -> tuple[int, int, int]:
    """(register id, offset, width) of a hwreg operand."""
    width = (simm >> _HWREG_SIZE_SHIFT) + 1
    return simm & _HWREG_ID_MASK, (simm >> _HWREG_OFFSET_SHIFT) & _HWREG_OFFSET_MASK, width


def _check(reg: int, i: Inst) -> None:
    if reg != HwReg.HW_REG_MODE:
        raise OperandError(f"{i.name}: hardware register {reg} is not modelled (only HW_REG_MODE = 1)")


def _set_field(g: Group, i: Inst, value: np.ndarray | int, offset: int, width: int) -> None:
    mask = ((1 << width) - 1) << offset if offset + width <= 32 else (0xFFFFFFFF >> offset) << offset
    old = g.w.mode[g.sel]
    g.w.mode[g.sel] = (old & _U32(~mask & 0xFFFFFFFF)) | ((np.asarray(value, _U32) << _U32(offset)) & _U32(mask))
    mode_written(g.w)


def _getreg(g: Group, i: Inst) -> None:
    reg, offset, width = _field(i.simm)
    _check(reg, i)
    g.set_s(i.vdst, (g.w.mode[g.sel] >> _U32(offset)) & _U32((1 << min(width, 32)) - 1))


def _setreg(g: Group, i: Inst) -> None:
    reg, offset, width = _field(i.simm)
    _check(reg, i)
    _set_field(g, i, g.s(i.vdst), offset, width)


def _setreg_imm32(g: Group, i: Inst) -> None:
    reg, offset, width = _field(i.simm)
    _check(reg, i)
    _set_field(g, i, i.literal, offset, width)


def _nibble(shift: int) -> Handler:
    def op(g: Group, i: Inst) -> None:
        _set_field(g, i, i.simm & _NIBBLE, shift, 4)

    return op


MODE_HANDLERS: Final[dict[str, Handler]] = {
    "s_getreg_b32": _getreg, "s_setreg_b32": _setreg, "s_setreg_imm32_b32": _setreg_imm32,
    "s_round_mode": _nibble(Mode.FP_ROUND), "s_denorm_mode": _nibble(Mode.FP_DENORM),
}  # fmt: skip
