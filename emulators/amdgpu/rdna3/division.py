"""The division helpers LLVM's correctly rounded f32 and f64 division is built from: ``v_div_scale``,
``v_div_fmas`` and ``v_div_fixup`` (RDNA3 ISA guide pseudocode), vectorised over lanes.

The sequence: ``v_div_scale`` scales the denominator and the numerator (by 2^64 for f32, 2^128 for f64) where
the quotient or a reciprocal would leave the normal range and sets VCC where the two were scaled differently;
reciprocal and FMA refinements follow; ``v_div_fmas`` is an FMA whose result is scaled back where VCC is set (up
when ``|S2| >= 2``, down otherwise); ``v_div_fixup`` gives the special-case results (NaN, infinities, zeros) and
the quotient's sign. The FMAs are computed as ``v_fma_f32`` / ``v_fma_f64`` are (docs/rdna3.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from .decode import Inst
from .opcodes import Enc
from .operands import Src
from .state import Group, bits_to_mask, mask_to_bits

__all__ = ["DIVISION_HANDLERS"]

Handler = Callable[[Group, Inst], None]


class _Width:
    """One float width's constants: the scale exponent, the exponent thresholds, the dtypes."""

    def __init__(self, ftype: type[np.floating], utype: type[np.unsignedinteger], mant_bits: int, exp_bits: int,
                 scale: int, near_max: int) -> None:  # fmt: skip
        self.ftype, self.utype = ftype, utype
        self.mant_bits, self.bias = mant_bits, (1 << (exp_bits - 1)) - 1
        self.exp_mask = (1 << exp_bits) - 1
        self.scale = scale  # the ldexp of v_div_scale and v_div_fmas
        self.near_max = near_max  # exponent(S2) - exponent(S1) at which N/D is near the largest float
        self.tiny = np.finfo(ftype).tiny
        self.wide: type[np.floating] = np.float64 if ftype is np.float32 else np.longdouble

    def exponent(self, x: np.ndarray) -> np.ndarray:
        """The biased exponent field."""
        bits = np.ascontiguousarray(x).view(self.utype)
        return np.asarray((bits >> self.utype(self.mant_bits)) & self.utype(self.exp_mask), np.int64)

    def denormal(self, x: np.ndarray) -> np.ndarray:
        """Below the normal range of this width (not zero): a denormal, or smaller still."""
        return np.asarray((x != 0) & (np.abs(x) < self.tiny), bool)


_F32: Final = _Width(np.float32, np.uint32, 23, 8, 64, 96)
_F64: Final = _Width(np.float64, np.uint64, 52, 11, 128, 768)


def _sources(g: Group, i: Inst, w: _Width) -> list[np.ndarray]:
    out = []
    for k, code in enumerate(i.src[:3]):
        if w is _F64:
            bits = np.asarray(np.uint64(i.literal) << np.uint64(32)) if code == Src.LITERAL else g.v64(code)
            x = np.ascontiguousarray(np.asarray(bits, np.uint64)).view(np.float64)
        else:
            x = np.ascontiguousarray(np.asarray(g.v(code), np.uint32)).view(np.float32)
        if i.enc is Enc.VOP3 and i.abs >> k & 1:
            x = np.abs(x)
        if i.enc is Enc.VOP3 and i.neg >> k & 1:
            x = -x
        out.append(np.broadcast_to(x, (g.n, 32)))
    return out


def _write(g: Group, i: Inst, w: _Width, r: np.ndarray) -> None:
    r = np.ascontiguousarray(np.asarray(r, w.ftype))
    if w is _F64:
        g.set_v64(i.vdst, r.view(np.uint64))
    else:
        g.set_v(i.vdst, r.view(np.uint32))


def _fma(w: _Width, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return (a.astype(w.wide) * b.astype(w.wide) + c.astype(w.wide)).astype(w.ftype)


def _scale(w: _Width) -> Handler:
    def op(g: Group, i: Inst) -> None:
        s0, s1, s2 = _sources(g, i, w)
        with np.errstate(all="ignore"):
            up, down = np.ldexp(s0, w.scale).astype(w.ftype), np.ldexp(s0, -w.scale).astype(w.ftype)
            wide_s1 = s1.astype(w.wide)  # a wider exponent range: a quotient below the denormals is not 0 here
            quotient, reciprocal = s2.astype(w.wide) / wide_s1, 1 / wide_s1
            zero = (s2 == 0) | (s1 == 0)
            near_max = ~zero & (w.exponent(s2) - w.exponent(s1) >= w.near_max)
            rest = ~zero & ~near_max
            den_denormal = rest & w.denormal(s1)
            rest &= ~den_denormal
            both = rest & w.denormal(reciprocal) & w.denormal(quotient)
            rest &= ~both
            rcp_denormal = rest & w.denormal(reciprocal)
            rest &= ~rcp_denormal
            quo_denormal = rest & w.denormal(quotient)
            rest &= ~quo_denormal
            num_tiny = rest & (w.exponent(s2) <= w.mant_bits)
            scale_den, scale_num = (near_max | both) & (s0 == s1), quo_denormal & (s0 == s2)
            d = np.select([zero, scale_den, den_denormal | num_tiny, rcp_denormal, scale_num],
                          [w.ftype(np.nan), up, up, down, up], s0)  # fmt: skip
        _write(g, i, w, d)
        vcc = near_max | both | quo_denormal
        if i.sdst != Src.NULL:
            g.set_s(i.sdst, mask_to_bits(vcc if g.all_active else vcc & g.exec))

    return op


def _fmas(w: _Width) -> Handler:
    def op(g: Group, i: Inst) -> None:
        s0, s1, s2 = _sources(g, i, w)
        vcc = bits_to_mask(np.broadcast_to(g.s(Src.VCC_LO), (g.n,)))
        with np.errstate(all="ignore"):
            r = _fma(w, s0, s1, s2)
            scaled = np.ldexp(r, np.where(w.exponent(s2) > w.bias, w.scale, -w.scale)).astype(w.ftype)
            _write(g, i, w, np.where(vcc, scaled, r))

    return op


def _fixup(w: _Width) -> Handler:
    def op(g: Group, i: Inst) -> None:
        s0, s1, s2 = _sources(g, i, w)  # quotient estimate, denominator, numerator
        negative = np.signbit(s1) ^ np.signbit(s2)
        inf = np.where(negative, -np.inf, np.inf).astype(w.ftype)
        zero = np.where(negative, -0.0, 0.0).astype(w.ftype)
        with np.errstate(all="ignore"):
            d = np.select(
                [np.isnan(s2), np.isnan(s1), (s1 == 0) & (s2 == 0), np.isinf(s1) & np.isinf(s2),
                 (s1 == 0) | np.isinf(s2), np.isinf(s1) | (s2 == 0), np.isnan(s0)],
                [s2 + 0, s1 + 0, w.ftype(np.nan), w.ftype(np.nan), inf, zero, inf],
                np.where(negative, -np.abs(s0), np.abs(s0)),
            )  # fmt: skip
        _write(g, i, w, d)

    return op


DIVISION_HANDLERS: Final[dict[str, Handler]] = {
    "v_div_scale_f32": _scale(_F32), "v_div_scale_f64": _scale(_F64), "v_div_fmas_f32": _fmas(_F32),
    "v_div_fmas_f64": _fmas(_F64), "v_div_fixup_f32": _fixup(_F32), "v_div_fixup_f64": _fixup(_F64),
}  # fmt: skip
