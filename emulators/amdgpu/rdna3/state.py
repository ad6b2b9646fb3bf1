"""The register state of every wave of a dispatch, as numpy arrays, and the view one instruction works on.

Layout (docs/rdna3.md "Execution model"): ``sgpr[code, wave]`` holds operand codes 0-127 of every wave (s0-s105,
VCC, NULL, M0, EXEC in one file, so an operand code indexes it directly; the NULL row stays zero); ``vgpr[reg, wave,
lane]`` the VGPRs, wave32. Register-major layouts keep the one register an instruction touches contiguous across
waves. A :class:`Group` is the set of waves at one PC; its methods read sources and write results for those waves.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from ..memory import AddressSpace
from .operands import FLOAT_INLINE_F32, FLOAT_INLINE_F64, SGPR_FILE, VGPR_BASE, Src, inline_int

__all__ = ["LANES", "SCRATCH_LANE_STRIDE", "Group", "OperandError", "Waves", "bits_to_mask", "mask_to_bits"]

LANES: Final = 32
_LANE_BITS: Final = np.arange(LANES, dtype=np.uint32)
_U32: Final = np.uint32
_U64: Final = np.uint64
_MASK32: Final = 0xFFFFFFFF
_LDS_PAD_BYTES: Final = 16  # the widest DS access
SCRATCH_LANE_STRIDE: Final = 4 * LANES  # scratch is swizzled a dword per lane: one dword offset spans 128 bytes

Sel = slice | np.ndarray


class OperandError(ValueError):
    """An instruction names an operand code the model does not implement (the executor reports a wave trap)."""


def bits_to_mask(bits: np.ndarray) -> np.ndarray:
    """Per-wave 32-bit lane masks (n,) as booleans (n, 32)."""
    as_bytes = np.ascontiguousarray(bits, "<u4").view(np.uint8).reshape(-1, 4)
    return np.unpackbits(as_bytes, axis=1, bitorder="little").view(bool)


def mask_to_bits(mask: np.ndarray) -> np.ndarray:
    """Booleans (n, 32) as per-wave 32-bit lane masks (n,)."""
    packed = np.packbits(np.ascontiguousarray(mask), axis=1, bitorder="little")
    return packed.view("<u4")[:, 0].astype(_U32)


class Waves:
    """Every wave of one dispatch: registers, PCs (byte offsets into the program), and per-workgroup LDS."""

    def __init__(self, n_waves: int, n_vgprs: int, n_groups: int, lds_bytes: int) -> None:
        self.sgpr = np.zeros((SGPR_FILE, n_waves), _U32)
        self.scc = np.zeros(n_waves, bool)
        self.vgpr = np.zeros((n_vgprs, n_waves, LANES), _U32)
        self.pc = np.zeros(n_waves, np.int64)
        self.alive = np.ones(n_waves, bool)
        self.waiting = np.zeros(n_waves, bool)  # at s_barrier
        self.group = np.zeros(n_waves, np.int64)  # workgroup index of each wave
        self.lds_base = np.zeros(n_waves, np.int64)  # byte index of each wave's workgroup LDS in ``lds``
        self.lds_bytes = lds_bytes
        # padded so that the index of a lane outside the allocation (clamped to 0) is always valid
        self.lds = np.zeros(n_groups * lds_bytes + _LDS_PAD_BYTES, np.uint8)
        self._exec_mask: np.ndarray | None = None
        self._exec_full = False
        self.mode = np.zeros(n_waves, _U32)  # the MODE hardware register (mode.py)
        self.flushes_f32 = False  # whether any wave's MODE flushes f32 denormals
        self.scratch_base: int | None = None  # GPU address of wave 0's private segment (docs/rdna3.md "Scratch")
        self.scratch_wave_bytes = 0

    def exec_mask(self) -> tuple[np.ndarray, bool]:
        """Every wave's active lanes (waves, 32) and whether all lanes of all waves are on (cached until EXEC is
        written)."""
        if self._exec_mask is None:
            bits = self.sgpr[Src.EXEC_LO]
            self._exec_mask = bits_to_mask(bits)
            self._exec_full = bool((bits == _MASK32).all())
        return self._exec_mask, self._exec_full

    def exec_written(self) -> None:
        self._exec_mask = None


class Group:
    """The waves at one PC, and the operand access of the instruction they execute."""

    def __init__(
        self, waves: Waves, space: AddressSpace, sel: Sel, n: int, pc: int, size: int, base: int, literal: int
    ) -> None:
        self.w = waves
        self.space = space
        self.sel = sel
        self.n = n
        self.pc = pc  # byte offset of the instruction in the program
        self.next_pc = pc + size
        self.base = base  # GPU address of byte 0 of the program
        self.literal = literal
        self.new_pc: np.ndarray | None = None  # set by branches: per-wave next PC
        self._exec: np.ndarray | None = None
        self._full = False

    # --- scalar operands ---
    def s(self, code: int) -> np.ndarray:
        """A 32-bit source for each wave: shape (n,) or a broadcastable scalar array."""
        if code < SGPR_FILE:
            return self.w.sgpr[code, self.sel]
        if code == Src.SCC:
            return self.w.scc[self.sel].astype(_U32)
        return np.asarray(self.constant32(code), _U32)

    def constant32(self, code: int) -> int:
        value = inline_int(code)
        if value is not None:
            return value & _MASK32
        if code in FLOAT_INLINE_F32:
            return FLOAT_INLINE_F32[code]
        if code == Src.LITERAL:
            return self.literal
        raise OperandError(
            f"operand code {code} is not a source the model implements (reserved, an aperture base, or a VGPR)"
        )

    def s64(self, code: int) -> np.ndarray:
        if code < SGPR_FILE:
            return self.w.sgpr[code, self.sel].astype(_U64) | (self.w.sgpr[code + 1, self.sel].astype(_U64) << _U64(32))
        if code == Src.SCC:
            return self.w.scc[self.sel].astype(_U64)
        value = inline_int(code)
        if value is not None:
            return np.asarray(value & ((1 << 64) - 1), _U64)
        if code in FLOAT_INLINE_F64:
            return np.asarray(FLOAT_INLINE_F64[code], _U64)
        return np.asarray(self.constant32(code), _U64)

    def set_s(self, code: int, value: np.ndarray) -> None:
        if code == Src.NULL:
            return
        self.w.sgpr[code, self.sel] = np.broadcast_to(np.asarray(value).astype(_U32), (self.n,))
        if code == Src.EXEC_LO:
            self._exec = None
            self.w.exec_written()

    def set_s64(self, code: int, value: np.ndarray) -> None:
        value = np.asarray(value).astype(_U64)
        self.set_s(code, value & _U64(_MASK32))
        self.set_s(code + 1, value >> _U64(32))

    def set_scc(self, value: np.ndarray) -> None:
        self.w.scc[self.sel] = np.broadcast_to(np.asarray(value, bool), (self.n,))

    # --- vector operands ---
    @property
    def exec(self) -> np.ndarray:
        """The active lanes, (n, 32) booleans."""
        if self._exec is None:
            mask, full = self.w.exec_mask()
            self._exec = mask[self.sel]
            self._full = full
        return self._exec

    @property
    def all_active(self) -> bool:
        """Whether every lane of every wave in the group is on (the masked paths can then be skipped)."""
        _ = self.exec
        return self._full

    def v(self, code: int) -> np.ndarray:
        """A 32-bit source per lane: (n, 32), or (n, 1) / a scalar for scalar operands (they broadcast)."""
        if code >= VGPR_BASE:
            return self.w.vgpr[code - VGPR_BASE, self.sel]
        value = self.s(code)
        return value[:, None] if value.ndim else value

    def v64(self, code: int) -> np.ndarray:
        if code >= VGPR_BASE:
            r = code - VGPR_BASE
            pair = np.empty((self.n, LANES, 2), _U32)
            pair[..., 0] = self.w.vgpr[r, self.sel]
            pair[..., 1] = self.w.vgpr[r + 1, self.sel]
            return pair.view(_U64)[..., 0]
        value = self.s64(code)
        return value[:, None] if value.ndim else value

    def set_v(self, reg: int, value: np.ndarray) -> None:
        """Write ``value`` to VGPR ``reg`` in the active lanes only."""
        mask = self.exec
        if self._full:
            self.w.vgpr[reg, self.sel] = value
            return
        old = self.w.vgpr[reg, self.sel]
        self.w.vgpr[reg, self.sel] = np.where(mask, np.asarray(value).astype(_U32), old)

    def set_v64(self, reg: int, value: np.ndarray) -> None:
        pair = np.ascontiguousarray(np.broadcast_to(np.asarray(value).astype(_U64, copy=False), (self.n, LANES)))
        pair = pair.view(_U32)
        self.set_v(reg, pair[:, 0::2])
        self.set_v(reg + 1, pair[:, 1::2])

    def jump(self, taken: np.ndarray | bool, target: int) -> None:
        """Branch the waves where ``taken`` to byte offset ``target``; the others fall through."""
        fall = self.next_pc if self.new_pc is None else self.new_pc
        self.new_pc = np.where(np.broadcast_to(taken, (self.n,)), target, fall)
