"""VOP3P packed 16-bit math: two 16-bit results per lane, each half's sources picked by op_sel / op_sel_hi.

For the low result, source k is its high half when ``op_sel`` bit k is set; for the high result, when
``op_sel_hi`` bit k is set (LLVM's default sets every ``op_sel_hi`` bit). ``neg`` / ``neg_hi`` negate the f16
sources of the low / high result. f16 arithmetic is computed exactly in f64 and rounded once to f16. Constant
operands (inline or literal) of packed math are not modelled yet: they stop the wave with a trap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from .decode import Inst
from .operands import SGPR_FILE, VGPR_BASE
from .state import Group, OperandError

__all__ = ["VOP3P_HANDLERS"]

Handler = Callable[[Group, Inst], None]
Fn = Callable[..., np.ndarray]
_U16: Final = np.uint16
_HALF: Final = np.uint32(16)


def _u(a: np.ndarray) -> np.ndarray:
    return a.astype(np.int64)


def _s(a: np.ndarray) -> np.ndarray:
    return a.view(np.int16).astype(np.int64)


def _f(a: np.ndarray) -> np.ndarray:
    return a.view(np.float16).astype(np.float64)


_INT_OPS: Final[dict[str, tuple[int, Fn]]] = {
    "v_pk_add_u16": (2, lambda a, b: _u(a) + _u(b)),
    "v_pk_sub_u16": (2, lambda a, b: _u(a) - _u(b)),
    "v_pk_add_i16": (2, lambda a, b: _s(a) + _s(b)),
    "v_pk_sub_i16": (2, lambda a, b: _s(a) - _s(b)),
    "v_pk_mul_lo_u16": (2, lambda a, b: _u(a) * _u(b)),
    "v_pk_lshlrev_b16": (2, lambda a, b: _u(b) << (_u(a) & 15)),
    "v_pk_lshrrev_b16": (2, lambda a, b: _u(b) >> (_u(a) & 15)),
    "v_pk_ashrrev_i16": (2, lambda a, b: _s(b) >> (_u(a) & 15)),
    "v_pk_max_i16": (2, lambda a, b: np.maximum(_s(a), _s(b))),
    "v_pk_min_i16": (2, lambda a, b: np.minimum(_s(a), _s(b))),
    "v_pk_max_u16": (2, lambda a, b: np.maximum(a, b)),
    "v_pk_min_u16": (2, lambda a, b: np.minimum(a, b)),
    "v_pk_mad_u16": (3, lambda a, b, c: _u(a) * _u(b) + _u(c)),
    "v_pk_mad_i16": (3, lambda a, b, c: _s(a) * _s(b) + _s(c)),
}
_F16_OPS: Final[dict[str, tuple[int, Fn]]] = {
    "v_pk_add_f16": (2, lambda a, b: a + b),
    "v_pk_mul_f16": (2, lambda a, b: a * b),
    "v_pk_fma_f16": (3, lambda a, b, c: a * b + c),
    "v_pk_max_f16": (2, np.fmax),
    "v_pk_min_f16": (2, np.fmin),
}


def _halves(g: Group, i: Inst, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(source for the low result, source for the high result) per operand, as uint16 (n, 32) arrays."""
    out = []
    for k, code in enumerate(i.src[:count]):
        if not (code < SGPR_FILE or code >= VGPR_BASE):
            raise OperandError(f"operand code {code}: constant operands of packed math are not modelled yet")
        word = np.broadcast_to(g.v(code), (g.n, 32))
        lo, hi = (word & 0xFFFF).astype(_U16), (word >> _HALF).astype(_U16)
        out.append((hi if i.opsel >> k & 1 else lo, hi if i.opsel_hi >> k & 1 else lo))
    return out


def _int_op(count: int, fn: Fn) -> Handler:
    def op(g: Group, i: Inst) -> None:
        sources = _halves(g, i, count)
        lo = np.asarray(fn(*(s[0] for s in sources))) & 0xFFFF
        hi = np.asarray(fn(*(s[1] for s in sources))) & 0xFFFF
        g.set_v(i.vdst, (lo | (hi << 16)).astype(np.uint32))

    return op


def _f16_op(count: int, fn: Fn) -> Handler:
    def op(g: Group, i: Inst) -> None:
        sources = _halves(g, i, count)
        with np.errstate(all="ignore"):
            lo_in = [(-1.0 if i.neg >> k & 1 else 1.0) * _f(s[0]) for k, s in enumerate(sources)]
            hi_in = [(-1.0 if i.neg_hi >> k & 1 else 1.0) * _f(s[1]) for k, s in enumerate(sources)]
            lo = np.asarray(fn(*lo_in)).astype(np.float16)
            hi = np.asarray(fn(*hi_in)).astype(np.float16)
            if i.clamp:
                lo, hi = (np.where(np.isnan(x), 0, np.clip(x, 0, 1)).astype(np.float16) for x in (lo, hi))
        g.set_v(i.vdst, lo.view(_U16).astype(np.uint32) | (hi.view(_U16).astype(np.uint32) << _HALF))

    return op


VOP3P_HANDLERS: Final[dict[str, Handler]] = {
    **{n: _int_op(c, fn) for n, (c, fn) in _INT_OPS.items()},
    **{n: _f16_op(c, fn) for n, (c, fn) in _F16_OPS.items()},
}
