"""Vector ALU instructions (VOP1, VOP2, VOPC, VOP3, VOP3SD, VOPD): one numpy operation over every active lane.

Semantics are the RDNA3 ISA guide's; f32 arithmetic is numpy's IEEE single precision (round to nearest even;
denormal inputs and results flushed where the wave's MODE says, mode.py), NaN inputs to min/max return the other
operand, and
``v_fma_f32`` is computed in f64 and rounded once more (exact products; the sum may double-round, docs/rdna3.md).
VOP3's abs/neg source modifiers, clamp and omod apply to the f32 operations. f64 and conversions: valu64.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from .decode import Inst
from .mode import flush_f32
from .opcodes import Enc
from .operands import Src
from .state import Group, bits_to_mask, mask_to_bits

__all__ = ["FLOAT_COMPARES", "OMOD_FACTORS", "VALU_HANDLERS", "vopd_handler"]

Handler = Callable[[Group, Inst], None]
Fn = Callable[..., np.ndarray]
_U32: Final = np.uint32
_U64: Final = np.uint64
_I32: Final = np.int32
_I64: Final = np.int64
_F32: Final = np.float32
_SIGN: Final = _U32(0x80000000)
_FRACT_MAX: Final = np.float32(np.nextafter(np.float32(1), np.float32(0)))
OMOD_FACTORS: Final = (1.0, 2.0, 4.0, 0.5)  # VOP3 omod: the result times 1, 2, 4 or 0.5


def _f(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, _U32)).view(_F32)


def _u(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, _F32)).view(_U32)


def _i(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x).astype(_U32)).view(_I32)


def _minmax(pick_min: bool) -> Fn:
    def fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        r = np.fmin(a, b) if pick_min else np.fmax(a, b)
        ua, ub = _u(a), _u(b)
        zeros = (a == 0) & (b == 0)  # -0 < +0 for min and max
        signed = (ua | ub) if pick_min else (ua & ub)
        return np.where(zeros, _f(np.broadcast_to(signed, np.shape(r))), r)

    return fn


def _med3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.asarray(np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c)))


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(_F32)


def _fract(a: np.ndarray) -> np.ndarray:
    return np.where(np.isinf(a), np.float32(np.nan), np.minimum(a - np.floor(a), _FRACT_MAX))


def _cvt_u32(a: np.ndarray) -> np.ndarray:
    t = np.nan_to_num(np.trunc(a.astype(np.float64)), nan=0.0)
    return np.asarray(np.clip(t, 0, 0xFFFFFFFF).astype(_U32))


def _cvt_i32(a: np.ndarray) -> np.ndarray:
    t = np.nan_to_num(np.trunc(a.astype(np.float64)), nan=0.0)
    return np.asarray(np.clip(t, -(2**31), 2**31 - 1).astype(_I64).astype(_U32))


def _mul_legacy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where((a == 0) | (b == 0), np.float32(0), a * b)


# f32 in, f32 out (sources in encoding order: src0, src1, src2).
_F32_OPS: Final[dict[str, tuple[int, Fn]]] = {
    "v_add_f32": (2, lambda a, b: a + b),
    "v_sub_f32": (2, lambda a, b: a - b),
    "v_subrev_f32": (2, lambda a, b: b - a),
    "v_mul_f32": (2, lambda a, b: a * b),
    "v_mul_dx9_zero_f32": (2, _mul_legacy),
    "v_min_f32": (2, _minmax(True)),
    "v_max_f32": (2, _minmax(False)),
    "v_fma_f32": (3, _fma),
    "v_min3_f32": (3, lambda a, b, c: _minmax(True)(_minmax(True)(a, b), c)),
    "v_max3_f32": (3, lambda a, b, c: _minmax(False)(_minmax(False)(a, b), c)),
    "v_med3_f32": (3, _med3),
    "v_rcp_f32": (1, lambda a: np.float32(1) / a),
    "v_rcp_iflag_f32": (1, lambda a: np.float32(1) / a),
    "v_rsq_f32": (1, lambda a: np.float32(1) / np.sqrt(a)),
    "v_sqrt_f32": (1, np.sqrt),
    "v_exp_f32": (1, np.exp2),
    "v_log_f32": (1, np.log2),
    "v_sin_f32": (1, lambda a: np.sin(a.astype(np.float64) * 2 * np.pi).astype(_F32)),
    "v_cos_f32": (1, lambda a: np.cos(a.astype(np.float64) * 2 * np.pi).astype(_F32)),
    "v_floor_f32": (1, np.floor),
    "v_ceil_f32": (1, np.ceil),
    "v_trunc_f32": (1, np.trunc),
    "v_rndne_f32": (1, np.rint),
    "v_fract_f32": (1, _fract),
    "v_mov_b32": (1, lambda a: a),
}
_LDEXP_LIMIT: Final = 1 << 10  # exponents beyond this saturate to inf or 0 alike
# u32 bits in, u32 bits out.
_U32_OPS: Final[dict[str, tuple[int, Fn]]] = {
    "v_add_nc_u32": (2, lambda a, b: a + b),
    "v_sub_nc_u32": (2, lambda a, b: a - b),
    "v_subrev_nc_u32": (2, lambda a, b: b - a),
    "v_add_nc_i32": (2, lambda a, b: a + b),
    "v_sub_nc_i32": (2, lambda a, b: a - b),
    "v_and_b32": (2, lambda a, b: a & b),
    "v_or_b32": (2, lambda a, b: a | b),
    "v_xor_b32": (2, lambda a, b: a ^ b),
    "v_xnor_b32": (2, lambda a, b: ~(a ^ b)),
    "v_lshlrev_b32": (2, lambda a, b: b << (a & 31)),
    "v_lshrrev_b32": (2, lambda a, b: b >> (a & 31)),
    "v_ashrrev_i32": (2, lambda a, b: _i(b) >> _i(a & 31)),
    "v_min_i32": (2, lambda a, b: np.minimum(_i(a), _i(b))),
    "v_max_i32": (2, lambda a, b: np.maximum(_i(a), _i(b))),
    "v_min_u32": (2, np.minimum),
    "v_max_u32": (2, np.maximum),
    "v_mul_u32_u24": (2, lambda a, b: (a & 0xFFFFFF) * (b & 0xFFFFFF)),
    "v_mul_hi_u32_u24": (2, lambda a, b: ((a & 0xFFFFFF).astype(_U64) * (b & 0xFFFFFF)) >> _U64(32)),
    "v_mul_i32_i24": (2, lambda a, b: _s24(a) * _s24(b)),
    "v_mul_hi_i32_i24": (2, lambda a, b: (_s24(a) * _s24(b)) >> 32),
    "v_mul_lo_u32": (2, lambda a, b: a.astype(_U64) * b),
    "v_mul_hi_u32": (2, lambda a, b: (a.astype(_U64) * b) >> _U64(32)),
    "v_mul_hi_i32": (2, lambda a, b: (_i(a).astype(_I64) * _i(b)) >> 32),
    "v_bfm_b32": (2, lambda a, b: ((_U32(1) << (a & 31)) - _U32(1)) << (b & 31)),
    "v_bcnt_u32_b32": (2, lambda a, b: _popcount(a) + b),
    "v_not_b32": (1, lambda a: ~a),
    "v_bfrev_b32": (1, lambda a: _brev(a)),
    "v_cvt_f32_i32": (1, lambda a: _u(_i(a).astype(_F32))),
    "v_cvt_f32_u32": (1, lambda a: _u(a.astype(np.float64).astype(_F32))),
    "v_cvt_u32_f32": (1, lambda a: _cvt_u32(_f(a))),
    "v_cvt_i32_f32": (1, lambda a: _cvt_i32(_f(a))),
    "v_cvt_floor_i32_f32": (1, lambda a: _cvt_i32(np.floor(_f(a)))),
    "v_cvt_nearest_i32_f32": (1, lambda a: _cvt_i32(np.floor(_f(a) + np.float32(0.5)))),
    "v_cvt_f32_ubyte0": (1, lambda a: _u((a & 0xFF).astype(_F32))),
    "v_cvt_f32_ubyte1": (1, lambda a: _u(((a >> 8) & 0xFF).astype(_F32))),
    "v_cvt_f32_ubyte2": (1, lambda a: _u(((a >> 16) & 0xFF).astype(_F32))),
    "v_cvt_f32_ubyte3": (1, lambda a: _u((a >> 24).astype(_F32))),
    "v_clz_i32_u32": (1, lambda a: _clz(a)),
    "v_cls_i32": (1, lambda a: _clz(a ^ (_i(a) >> 31).view(_U32))),  # leading bits equal to the sign, 0/-1: -1
    "v_ctz_i32_b32": (1, lambda a: _ctz(a)),
    "v_mad_u32_u24": (3, lambda a, b, c: (a & 0xFFFFFF) * (b & 0xFFFFFF) + c),
    "v_mad_i32_i24": (3, lambda a, b, c: _s24(a) * _s24(b) + _i(c)),
    "v_bfe_u32": (3, lambda a, b, c: (a >> (b & 31)) & ((_U64(1) << (c & 31).astype(_U64)) - _U64(1))),
    "v_bfe_i32": (3, lambda a, b, c: _sbfe(a, b & 31, c & 31)),
    "v_bfi_b32": (3, lambda a, b, c: (a & b) | (~a & c)),
    "v_alignbit_b32": (3, lambda a, b, c: ((a.astype(_U64) << _U64(32)) | b) >> (c & 31).astype(_U64)),
    "v_min3_i32": (3, lambda a, b, c: np.minimum(np.minimum(_i(a), _i(b)), _i(c))),
    "v_max3_i32": (3, lambda a, b, c: np.maximum(np.maximum(_i(a), _i(b)), _i(c))),
    "v_min3_u32": (3, lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_max3_u32": (3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_med3_i32": (3, lambda a, b, c: _med3(_i(a), _i(b), _i(c))),
    "v_med3_u32": (3, _med3),
    "v_add3_u32": (3, lambda a, b, c: a + b + c),
    "v_lshl_add_u32": (3, lambda a, b, c: (a << (b & 31)) + c),
    "v_add_lshl_u32": (3, lambda a, b, c: (a + b) << (c & 31)),
    "v_and_or_b32": (3, lambda a, b, c: (a & b) | c),
    "v_or3_b32": (3, lambda a, b, c: a | b | c),
    "v_xor3_b32": (3, lambda a, b, c: a ^ b ^ c),
    "v_xad_u32": (3, lambda a, b, c: (a ^ b) + c),
    "v_perm_b32": (3, lambda a, b, c: _perm(a, b, c)),
    "v_lshl_or_b32": (3, lambda a, b, c: (a << (b & 31)) | c),
}


_PERM_SIGN_BITS: Final = np.array([15, 31, 47, 63], np.uint64)  # selectors 8-11: the sign of bytes 1, 3, 5, 7


def _perm(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """v_perm_b32: each byte of the result picks from {S0, S1} (S1 the low dword) by the matching byte of S2:
    0-7 a byte, 8-11 the sign of byte 1/3/5/7 replicated, 12 zero, 13-255 0xFF."""
    data = (a.astype(_U64) << _U64(32)) | b.astype(_U64)
    out = np.zeros(np.broadcast(a, b, c).shape, _U64)
    for k in range(4):
        sel = ((c >> _U32(8 * k)) & _U32(0xFF)).astype(_U64)
        byte = (data >> (np.minimum(sel, _U64(7)) * _U64(8))) & _U64(0xFF)
        sign = ((data >> _PERM_SIGN_BITS[np.clip(sel, 8, 11).astype(np.int64) - 8]) & _U64(1)) * _U64(0xFF)
        picked = np.select([sel < 8, sel < 12, sel == 12], [byte, sign, _U64(0)], _U64(0xFF))
        out |= picked << _U64(8 * k)
    return out


def _s24(a: np.ndarray) -> np.ndarray:
    return ((a & 0xFFFFFF).astype(_I64) ^ 0x800000) - 0x800000


def _sbfe(a: np.ndarray, offset: np.ndarray, width: np.ndarray) -> np.ndarray:
    width = np.asarray(width).astype(_I64)
    field = (_i(a).astype(_I64) >> np.asarray(offset).astype(_I64)) & ((np.int64(1) << width) - 1)
    sign = np.int64(1) << np.maximum(width - 1, 0)
    return np.where(width == 0, 0, (field ^ sign) - sign)


def _popcount(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, "<u4")
    return np.asarray(np.unpackbits(a.reshape(-1, 1).view(np.uint8), axis=1).sum(axis=1).astype(_U32).reshape(a.shape))


def _brev(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, "<u4")
    bits = np.unpackbits(a.reshape(-1, 1).view(np.uint8), axis=1, bitorder="little")
    return np.packbits(bits[:, ::-1], axis=1, bitorder="little").view("<u4")[:, 0].reshape(a.shape)


def _ctz(a: np.ndarray) -> np.ndarray:
    low = a & (~a + _U32(1))
    return np.where(a == 0, _U32(0xFFFFFFFF), np.log2(np.maximum(low, 1).astype(np.float64)).astype(_U32))


def _clz(a: np.ndarray) -> np.ndarray:
    top = np.floor(np.log2(np.maximum(a, 1).astype(np.float64))).astype(_U32)
    return np.where(a == 0, _U32(0xFFFFFFFF), _U32(31) - top)


def _sources(g: Group, i: Inst, count: int) -> list[np.ndarray]:
    return [np.asarray(g.v(code), _U32) for code in i.src[:count]]


def _float_sources(g: Group, i: Inst, count: int) -> list[np.ndarray]:
    values = [flush_f32(g, _f(s), False) for s in _sources(g, i, count)]
    if i.enc is Enc.VOP3 and (i.abs or i.neg):
        values = [(-1 if i.neg >> k & 1 else 1) * (np.abs(v) if i.abs >> k & 1 else v) for k, v in enumerate(values)]
    return values


def _float_result(i: Inst, r: np.ndarray, g: Group | None = None) -> np.ndarray:
    r = np.asarray(r, _F32)
    if i.omod:
        r = r * np.float32(OMOD_FACTORS[i.omod])
    if i.clamp:
        r = np.where(np.isnan(r), np.float32(0), np.clip(r, np.float32(0), np.float32(1)))
    return _u(r if g is None else flush_f32(g, r, True))


def _f32_op(count: int, fn: Fn, name: str) -> Handler:
    if name == "v_mov_b32":

        def mov(g: Group, i: Inst) -> None:
            g.set_v(i.vdst, np.broadcast_to(g.v(i.src[0]), (g.n, 32)))

        return mov

    def op(g: Group, i: Inst) -> None:
        with np.errstate(all="ignore"):
            g.set_v(i.vdst, np.broadcast_to(_float_result(i, fn(*_float_sources(g, i, count)), g), (g.n, 32)))

    return op


def _u32_op(count: int, fn: Fn) -> Handler:
    def op(g: Group, i: Inst) -> None:
        with np.errstate(all="ignore"):
            r = np.asarray(fn(*_sources(g, i, count))).astype(_U32, copy=False)  # C casts wrap to 32 bits
        g.set_v(i.vdst, np.broadcast_to(r, (g.n, 32)))

    return op


def _ldexp(g: Group, i: Inst) -> None:
    """v_ldexp_f32: src0 * 2**src1, src1 a signed integer; correctly rounded (denormal results included)."""
    (a,) = _float_sources(g, i, 1)
    exponent = np.clip(_i(np.asarray(g.v(i.src[1]), _U32)), -_LDEXP_LIMIT, _LDEXP_LIMIT)
    with np.errstate(all="ignore"):
        g.set_v(i.vdst, np.broadcast_to(_float_result(i, np.ldexp(a, exponent).astype(_F32)), (g.n, 32)))


def _mask(g: Group, code: int) -> np.ndarray:
    return bits_to_mask(np.broadcast_to(g.s(code), (g.n,)))


def _write_mask(g: Group, code: int, lanes: np.ndarray) -> None:
    if code == Src.NULL:
        return
    lanes = np.broadcast_to(lanes, (g.n, 32))
    g.set_s(code, mask_to_bits(lanes if g.all_active else lanes & g.exec))


def _special() -> dict[str, Handler]:
    def cndmask(g: Group, i: Inst) -> None:
        a, b = _sources(g, i, 2)
        cond = _mask(g, i.src[2] if i.enc is Enc.VOP3 else Src.VCC_LO)
        g.set_v(i.vdst, np.where(cond, b, a))

    def carry(sign: int, reverse: bool, with_in: bool) -> Handler:
        def op(g: Group, i: Inst) -> None:
            a, b = _sources(g, i, 2)
            if reverse:
                a, b = b, a
            with np.errstate(all="ignore"):
                r = a + b if sign > 0 else a - b
                out = (r < a) if sign > 0 else (b > a)
                if with_in:  # a carry (borrow) in overflows exactly where a +- b alone left r == a
                    c = _mask(g, i.src[2] if i.enc is Enc.VOP3 else Src.VCC_LO)
                    r = r + c if sign > 0 else r - c
                    out = out | ((r == a) & c) if sign > 0 else out | ((b == a) & c)
            g.set_v(i.vdst, np.broadcast_to(r, (g.n, 32)))
            _write_mask(g, i.sdst if i.enc is Enc.VOP3 else Src.VCC_LO, out)

        return op

    def mad64(signed: bool) -> Handler:
        def op(g: Group, i: Inst) -> None:
            a, b = _sources(g, i, 2)
            c = np.asarray(g.v64(i.src[2]), _U64)
            if signed:
                wide = _i(a).astype(object) * _i(b).astype(object) + c.astype(_I64).astype(object)
                r = np.asarray(wide % (1 << 64), dtype=object).astype(_U64)
                out = (wide < -(2**63)) | (wide >= 2**63)
            else:
                r = a.astype(_U64) * b.astype(_U64) + c
                out = (r < c) if i.sdst != Src.NULL else np.zeros(1, bool)  # the carry only where it is kept
            g.set_v64(i.vdst, np.broadcast_to(r, (g.n, 32)))
            _write_mask(g, i.sdst, np.asarray(out, bool))

        return op

    def shift64(kind: str) -> Handler:
        def op(g: Group, i: Inst) -> None:
            amount = (np.asarray(g.v(i.src[0]), _U32) & 63).astype(_U64)
            value = np.asarray(g.v64(i.src[1]), _U64)
            if kind == "l":
                r = value << amount
            elif kind == "r":
                r = value >> amount
            else:
                r = (value.view(_I64) >> amount.astype(_I64)).view(_U64)
            g.set_v64(i.vdst, np.broadcast_to(r, (g.n, 32)))

        return op

    def fmac(g: Group, i: Inst) -> None:
        a, b = _float_sources(g, i, 2)
        with np.errstate(all="ignore"):
            g.set_v(i.vdst, _float_result(i, _fma(a, b, flush_f32(g, _f(g.w.vgpr[i.vdst, g.sel]), False)), g))

    def fmamk(g: Group, i: Inst) -> None:
        a, b = _float_sources(g, i, 2)
        with np.errstate(all="ignore"):
            g.set_v(i.vdst, np.broadcast_to(_u(_fma(a, _f(np.asarray(i.literal, _U32)), b)), (g.n, 32)))

    def fmaak(g: Group, i: Inst) -> None:
        a, b = _float_sources(g, i, 2)
        with np.errstate(all="ignore"):
            g.set_v(i.vdst, np.broadcast_to(_u(_fma(a, b, _f(np.asarray(i.literal, _U32)))), (g.n, 32)))

    def readfirstlane(g: Group, i: Inst) -> None:
        values = np.broadcast_to(g.v(i.src[0]), (g.n, 32))
        first = np.argmax(g.exec, axis=1)  # lane 0 when no lane is active
        g.set_s(i.vdst, values[np.arange(g.n), first])

    def readlane(g: Group, i: Inst) -> None:
        values = np.broadcast_to(g.v(i.src[0]), (g.n, 32))
        lane = np.broadcast_to(g.s(i.src[1]) & 31, (g.n,))
        g.set_s(i.vdst, values[np.arange(g.n), lane])

    def writelane(g: Group, i: Inst) -> None:
        lane = np.broadcast_to(g.s(i.src[1]) & 31, (g.n,))
        row = g.w.vgpr[i.vdst, g.sel]
        row[np.arange(g.n), lane] = np.broadcast_to(g.s(i.src[0]), (g.n,))
        g.w.vgpr[i.vdst, g.sel] = row

    def nop(g: Group, i: Inst) -> None:
        """v_nop does nothing."""

    return {
        "v_cndmask_b32": cndmask,
        "v_add_co_u32": carry(1, False, False), "v_sub_co_u32": carry(-1, False, False),
        "v_subrev_co_u32": carry(-1, True, False), "v_add_co_ci_u32": carry(1, False, True),
        "v_sub_co_ci_u32": carry(-1, False, True), "v_subrev_co_ci_u32": carry(-1, True, True),
        "v_mad_u64_u32": mad64(False), "v_mad_i64_i32": mad64(True),
        "v_lshlrev_b64": shift64("l"), "v_lshrrev_b64": shift64("r"), "v_ashrrev_i64": shift64("a"),
        "v_fmac_f32": fmac, "v_fmamk_f32": fmamk, "v_fmaak_f32": fmaak,
        "v_readfirstlane_b32": readfirstlane, "v_readlane_b32": readlane, "v_writelane_b32": writelane,
        "v_nop": nop,
    }  # fmt: skip


# The VOPC float relations by their opcode suffix, for every float width (valu64.py compares f64 with them).
FLOAT_COMPARES: Final[dict[str, Fn]] = {
    "f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool),
    "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "lg": lambda a, b: (a < b) | (a > b),
    "ge": np.greater_equal, "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)),
    "u": lambda a, b: np.isnan(a) | np.isnan(b), "nge": lambda a, b: ~(a >= b),
    "nlg": lambda a, b: ~((a < b) | (a > b)),
    "ngt": lambda a, b: ~(a > b), "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b),
    "nlt": lambda a, b: ~(a < b), "t": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
}  # fmt: skip
_I_CMP: Final[dict[str, Fn]] = {
    "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ne": np.not_equal, "ge": np.greater_equal,
}  # fmt: skip


def _cmp(rel: Fn, kind: str, to_exec: bool) -> Handler:
    def op(g: Group, i: Inst) -> None:
        if kind == "f32":
            a, b = _float_sources(g, i, 2)
        elif kind in ("i64", "u64"):
            a, b = (np.asarray(g.v64(c), _U64) for c in i.src[:2])
            if kind == "i64":
                a, b = a.view(_I64), b.view(_I64)
        else:
            a, b = _sources(g, i, 2)
            if kind == "i32":
                a, b = _i(a), _i(b)
        _write_mask(g, Src.EXEC_LO if to_exec else i.vdst, rel(a, b))

    return op


def _float_class(bits: np.ndarray) -> np.ndarray:
    """The ISA's class index of each f32: 0 signaling NaN, 1 quiet NaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0,
    6 +0, 7 +denormal, 8 +normal, 9 +inf (the bit ``v_cmp_class_f32`` tests in its mask operand)."""
    exponent, mantissa, negative = (bits >> 23) & 0xFF, bits & 0x7FFFFF, (bits >> 31).astype(bool)
    top = exponent == 0xFF
    return np.select(
        [top & (mantissa != 0), top, (exponent == 0) & (mantissa == 0), exponent == 0],
        [np.where(mantissa >> 22, 1, 0), np.where(negative, 2, 9), np.where(negative, 5, 6), np.where(negative, 4, 7)],
        np.where(negative, 3, 8),
    )


def _cmp_class(to_exec: bool) -> Handler:
    def op(g: Group, i: Inst) -> None:
        values, masks = _sources(g, i, 2)
        if i.enc is Enc.VOP3 and (i.abs or i.neg) & 1:  # modifiers act on the value, not the mask
            values = _u(_float_sources(g, i, 1)[0])
        lanes = (masks >> _float_class(np.asarray(values, _U32)).astype(_U32)) & 1
        _write_mask(g, Src.EXEC_LO if to_exec else i.vdst, lanes.astype(bool))

    return op


def _compares() -> dict[str, Handler]:
    ops: dict[str, Handler] = {"v_cmp_class_f32": _cmp_class(False), "v_cmpx_class_f32": _cmp_class(True)}
    for x in ("", "x"):
        ops.update({f"v_cmp{x}_{r}_f32": _cmp(fn, "f32", x == "x") for r, fn in FLOAT_COMPARES.items()})
        for kind in ("i32", "u32", "i64", "u64"):
            ops.update({f"v_cmp{x}_{r}_{kind}": _cmp(fn, kind, x == "x") for r, fn in _I_CMP.items()})
    return ops


def _dual(x: Handler, y: Handler) -> Handler:
    """VOPD: both halves read their sources before either writes (the halves' registers are disjoint banks, but
    X's result may be a Y source)."""

    def op(g: Group, i: Inst) -> None:
        assert i.dual is not None  # the decoder pairs every VOPD X with its Y
        saved = g.w.vgpr[i.vdst, g.sel].copy()
        after_x = None
        x(g, i)
        after_x = g.w.vgpr[i.vdst, g.sel].copy()
        g.w.vgpr[i.vdst, g.sel] = saved
        y(g, i.dual)
        g.w.vgpr[i.vdst, g.sel] = after_x

    return op


def _handlers() -> dict[str, Handler]:
    ops: dict[str, Handler] = {n: _f32_op(c, fn, n) for n, (c, fn) in _F32_OPS.items()}
    ops.update({n: _u32_op(c, fn) for n, (c, fn) in _U32_OPS.items()})
    ops.update(_special())
    ops["v_ldexp_f32"] = _ldexp
    ops.update(_compares())
    return ops


VALU_HANDLERS: Final[dict[str, Handler]] = _handlers()
_VOPD_BASE: Final[dict[str, str]] = {}


def vopd_handler(x_name: str, y_name: str) -> Handler | None:
    """The handler of one VOPD pair, or ``None`` when a half is not implemented."""
    names = [_VOPD_BASE.get(n, n.replace("v_dual_", "v_")) for n in (x_name, y_name)]
    if not all(n in VALU_HANDLERS for n in names):
        return None
    return _dual(VALU_HANDLERS[names[0]], VALU_HANDLERS[names[1]])
