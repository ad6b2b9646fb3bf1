"""f64 arithmetic and compares, and conversions between f16, f32, f64 and 32-bit integers (VOP1, VOP3, VOPC).

An f64 operand is a VGPR pair (or an SGPR pair, or a constant: integer constants as 64-bit integers, float
constants as f64). f64 arithmetic is numpy's IEEE double (round to nearest even, denormals kept); ``v_fma_f64`` is
``a * b + c`` in extended precision (``np.longdouble``) and rounded once more, so it can differ from a fused
multiply-add by one ULP where extended precision does not hold the exact product (docs/rdna3.md). VOP3 abs/neg,
clamp and omod apply. f16 results go to the low half of the destination with the high half zeroed, or to the high
half (the low half kept) when VOP3 ``op_sel[3]`` is set; an f16 source is the low half, or the high half when its
``op_sel`` bit is set. Conversions to integers truncate, saturate, and turn NaN into 0, as the ISA guide says;
``v_frexp_*_f32`` split an f32 into a mantissa in [0.5, 1) and an exponent (inf/NaN: themselves and 0), and
``v_cvt_pk_u16_u32`` packs two u32s saturated to 16 bits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from .decode import Inst
from .opcodes import Enc
from .operands import Src
from .state import Group, mask_to_bits
from .valu import FLOAT_COMPARES, OMOD_FACTORS

__all__ = ["VALU64_HANDLERS"]

Handler = Callable[[Group, Inst], None]
Fn = Callable[..., np.ndarray]
_U32: Final = np.uint32
_U64: Final = np.uint64
_F64: Final = np.float64
_HALF_SHIFT: Final = _U32(16)
_DST_HI: Final = 8  # VOP3 op_sel bit 3: the 16-bit result goes to the destination's high half
_FRACT_MAX: Final = np.nextafter(_F64(1), _F64(0))
_LDEXP_LIMIT: Final = 1 << 12


def _modified(i: Inst, k: int, x: np.ndarray) -> np.ndarray:
    if i.enc is Enc.VOP3 and i.abs >> k & 1:
        x = np.abs(x)
    if i.enc is Enc.VOP3 and i.neg >> k & 1:
        x = -x
    return x


def _f64_sources(g: Group, i: Inst, count: int) -> list[np.ndarray]:
    """The f64 operands; a 32-bit literal is an f64's high dword (its low dword zero), as the ISA defines."""
    out = []
    for k, code in enumerate(i.src[:count]):
        if code == Src.LITERAL:
            bits = np.asarray(_U64(i.literal) << _U64(32))
        else:
            bits = np.ascontiguousarray(np.asarray(g.v64(code), _U64))
        out.append(_modified(i, k, bits.view(_F64)))
    return out


def _f32_source(g: Group, i: Inst, k: int = 0) -> np.ndarray:
    bits = np.ascontiguousarray(np.asarray(g.v(i.src[k]), _U32))
    return _modified(i, k, bits.view(np.float32))


def _f16_source(g: Group, i: Inst, k: int = 0) -> np.ndarray:
    word = np.asarray(g.v(i.src[k]), _U32)
    half = (word >> _HALF_SHIFT) if i.enc is Enc.VOP3 and i.opsel >> k & 1 else (word & _U32(0xFFFF))
    return _modified(i, k, np.ascontiguousarray(half.astype(np.uint16)).view(np.float16))


def _finish(i: Inst, r: np.ndarray) -> np.ndarray:
    if i.omod:
        r = r * r.dtype.type(OMOD_FACTORS[i.omod])
    if i.clamp:
        r = np.where(np.isnan(r), 0, np.clip(r, 0, 1)).astype(r.dtype)
    return r


def _set_f64(g: Group, i: Inst, r: np.ndarray) -> None:
    r = _finish(i, np.asarray(r, _F64))
    g.set_v64(i.vdst, np.ascontiguousarray(np.broadcast_to(r, (g.n, 32))).view(_U64))


def _set_f32(g: Group, i: Inst, r: np.ndarray) -> None:
    r = _finish(i, np.asarray(r, np.float32))
    g.set_v(i.vdst, np.ascontiguousarray(np.broadcast_to(r, (g.n, 32))).view(_U32))


def _set_f16(g: Group, i: Inst, r: np.ndarray) -> None:
    half = np.ascontiguousarray(np.broadcast_to(_finish(i, np.asarray(r, np.float16)), (g.n, 32)))
    bits = half.view(np.uint16).astype(_U32)
    if i.enc is Enc.VOP3 and i.opsel & _DST_HI:
        bits = (g.w.vgpr[i.vdst, g.sel] & _U32(0xFFFF)) | (bits << _HALF_SHIFT)
    g.set_v(i.vdst, bits)


def _to_int(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    t = np.nan_to_num(np.trunc(x.astype(_F64)), nan=0.0)
    return np.asarray(np.clip(t, lo, hi).astype(np.int64).astype(_U32))


def _minmax(pick_min: bool) -> Fn:
    def fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        r = np.fmin(a, b) if pick_min else np.fmax(a, b)
        zeros = (a == 0) & (b == 0)  # -0 orders below +0
        signed = np.signbit(a) | np.signbit(b) if pick_min else np.signbit(a) & np.signbit(b)
        return np.where(zeros, np.where(signed, -0.0, 0.0), r)

    return fn


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    wide = np.longdouble
    return (a.astype(wide) * b.astype(wide) + c.astype(wide)).astype(_F64)


def _fract(a: np.ndarray) -> np.ndarray:
    return np.where(np.isinf(a), np.nan, np.minimum(a - np.floor(a), _FRACT_MAX))


_F64_OPS: Final[dict[str, tuple[int, Fn]]] = {
    "v_add_f64": (2, lambda a, b: a + b),
    "v_mul_f64": (2, lambda a, b: a * b),
    "v_min_f64": (2, _minmax(True)),
    "v_max_f64": (2, _minmax(False)),
    "v_fma_f64": (3, _fma),
    "v_rcp_f64": (1, lambda a: 1.0 / a),
    "v_rsq_f64": (1, lambda a: 1.0 / np.sqrt(a)),
    "v_sqrt_f64": (1, np.sqrt),
    "v_trunc_f64": (1, np.trunc),
    "v_ceil_f64": (1, np.ceil),
    "v_rndne_f64": (1, np.rint),
    "v_floor_f64": (1, np.floor),
    "v_fract_f64": (1, _fract),
}


def _f64_op(count: int, fn: Fn) -> Handler:
    def op(g: Group, i: Inst) -> None:
        with np.errstate(all="ignore"):
            _set_f64(g, i, fn(*_f64_sources(g, i, count)))

    return op


def _ldexp(g: Group, i: Inst) -> None:
    (a,) = _f64_sources(g, i, 1)
    exponent = np.clip(np.asarray(g.v(i.src[1]), _U32).view(np.int32), -_LDEXP_LIMIT, _LDEXP_LIMIT)
    with np.errstate(all="ignore"):
        _set_f64(g, i, np.ldexp(a, exponent))


def _conversions() -> dict[str, Handler]:
    def f64_from(read: Callable[[Group, Inst], np.ndarray]) -> Handler:
        def op(g: Group, i: Inst) -> None:
            _set_f64(g, i, read(g, i).astype(_F64))

        return op

    def f32_from(read: Callable[[Group, Inst], np.ndarray]) -> Handler:
        def op(g: Group, i: Inst) -> None:
            with np.errstate(all="ignore"):
                _set_f32(g, i, read(g, i).astype(np.float32))

        return op

    def int_from(read: Callable[[Group, Inst], np.ndarray], lo: int, hi: int) -> Handler:
        def op(g: Group, i: Inst) -> None:
            g.set_v(i.vdst, np.broadcast_to(_to_int(read(g, i), lo, hi), (g.n, 32)))

        return op

    def frexp_mant(g: Group, i: Inst) -> None:
        with np.errstate(all="ignore"):
            _set_f32(g, i, np.frexp(_f32_source(g, i))[0])  # inf and NaN come back as they are

    def frexp_exp(g: Group, i: Inst) -> None:
        exponent = np.frexp(_f32_source(g, i))[1].astype(np.int32)  # 0 for 0, inf and NaN
        g.set_v(i.vdst, np.broadcast_to(exponent.view(_U32), (g.n, 32)))

    def pk_u16(g: Group, i: Inst) -> None:
        lo, hi = (np.minimum(np.asarray(g.v(code), _U32), _U32(0xFFFF)) for code in i.src[:2])
        g.set_v(i.vdst, np.broadcast_to(lo | (hi << _HALF_SHIFT), (g.n, 32)))

    def f16_from_f32(g: Group, i: Inst) -> None:
        with np.errstate(all="ignore"):
            _set_f16(g, i, _f32_source(g, i).astype(np.float16))

    f64 = lambda g, i: _f64_sources(g, i, 1)[0]  # noqa: E731
    i32 = lambda g, i: np.asarray(g.v(i.src[0]), _U32).view(np.int32)  # noqa: E731
    u32 = lambda g, i: np.asarray(g.v(i.src[0]), _U32)  # noqa: E731
    return {
        "v_cvt_f64_f32": f64_from(_f32_source), "v_cvt_f64_i32": f64_from(i32), "v_cvt_f64_u32": f64_from(u32),
        "v_cvt_f32_f64": f32_from(f64), "v_cvt_f32_f16": f32_from(_f16_source),
        "v_cvt_i32_f64": int_from(f64, -(2**31), 2**31 - 1), "v_cvt_u32_f64": int_from(f64, 0, 2**32 - 1),
        "v_cvt_f16_f32": f16_from_f32, "v_frexp_mant_f32": frexp_mant, "v_frexp_exp_i32_f32": frexp_exp,
        "v_cvt_pk_u16_u32": pk_u16,
    }  # fmt: skip


def _cmp(rel: Fn, to_exec: bool) -> Handler:
    def op(g: Group, i: Inst) -> None:
        a, b = _f64_sources(g, i, 2)
        code = Src.EXEC_LO if to_exec else i.vdst
        if code == Src.NULL:
            return
        lanes = np.broadcast_to(rel(a, b), (g.n, 32))
        g.set_s(code, mask_to_bits(lanes if g.all_active else lanes & g.exec))

    return op


def _handlers() -> dict[str, Handler]:
    ops: dict[str, Handler] = {n: _f64_op(c, fn) for n, (c, fn) in _F64_OPS.items()}
    ops["v_ldexp_f64"] = _ldexp
    ops.update(_conversions())
    for x in ("", "x"):
        ops.update({f"v_cmp{x}_{r}_f64": _cmp(fn, x == "x") for r, fn in FLOAT_COMPARES.items()})
    return ops


VALU64_HANDLERS: Final[dict[str, Handler]] = _handlers()
