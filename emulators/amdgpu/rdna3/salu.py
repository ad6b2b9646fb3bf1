"""Scalar ALU and program-control instructions (SOP1, SOP2, SOPK, SOPC, SOPP), one numpy operation over waves.

Semantics are the RDNA3 ISA guide's per-opcode pseudocode; SCC results are noted where the guide sets them.
Each handler takes the :class:`~tinyhil.emulators.amdgpu.rdna3.state.Group` and the instruction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from .decode import Inst
from .operands import Src
from .state import Group

__all__ = ["SALU_HANDLERS"]

Handler = Callable[[Group, Inst], None]
_U32: Final = np.uint32
_U64: Final = np.uint64
_I32: Final = np.int32
_I64: Final = np.int64
_M32: Final = np.uint64(0xFFFFFFFF)
_SIMM_BITS: Final = 16


def _i(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(_U32).view(_I32)


def _sext16(v: int) -> int:
    return v - (1 << _SIMM_BITS) if v & 0x8000 else v


def _carry_ops() -> dict[str, Handler]:
    def add_u32(g: Group, i: Inst) -> None:
        r = g.s(i.src[0]).astype(_U64) + g.s(i.src[1]).astype(_U64)
        g.set_s(i.vdst, r & _M32)
        g.set_scc(r > _M32)

    def sub_u32(g: Group, i: Inst) -> None:
        a, b = g.s(i.src[0]), g.s(i.src[1])
        g.set_s(i.vdst, a - b)
        g.set_scc(b > a)

    def addc_u32(g: Group, i: Inst) -> None:
        r = g.s(i.src[0]).astype(_U64) + g.s(i.src[1]).astype(_U64) + g.w.scc[g.sel].astype(_U64)
        g.set_s(i.vdst, r & _M32)
        g.set_scc(r > _M32)

    def subb_u32(g: Group, i: Inst) -> None:
        a, b = g.s(i.src[0]).astype(_I64), g.s(i.src[1]).astype(_I64) + g.w.scc[g.sel]
        g.set_s(i.vdst, (a - b) & 0xFFFFFFFF)
        g.set_scc(b > a)

    def signed(sign: int) -> Handler:
        def op(g: Group, i: Inst) -> None:
            a, b = _i(g.s(i.src[0])).astype(_I64), _i(g.s(i.src[1])).astype(_I64)
            r = a + sign * b
            g.set_s(i.vdst, r & 0xFFFFFFFF)
            g.set_scc((r < -(2**31)) | (r >= 2**31))

        return op

    def lshl_add(shift: int) -> Handler:
        def op(g: Group, i: Inst) -> None:
            r = (g.s(i.src[0]).astype(_U64) << _U64(shift)) + g.s(i.src[1]).astype(_U64)
            g.set_s(i.vdst, r & _M32)
            g.set_scc(r > _M32)

        return op

    ops = {"s_add_u32": add_u32, "s_sub_u32": sub_u32, "s_addc_u32": addc_u32, "s_subb_u32": subb_u32,
           "s_add_i32": signed(1), "s_sub_i32": signed(-1)}  # fmt: skip
    ops.update({f"s_lshl{n}_add_u32": lshl_add(n) for n in (1, 2, 3, 4)})
    return ops


# SOP2 32-bit: name -> (function of (a, b) as uint32, whether SCC = result != 0)
_SOP2_32: Final[dict[str, tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], bool]]] = {
    "s_and_b32": (lambda a, b: a & b, True),
    "s_or_b32": (lambda a, b: a | b, True),
    "s_xor_b32": (lambda a, b: a ^ b, True),
    "s_nand_b32": (lambda a, b: ~(a & b), True),
    "s_nor_b32": (lambda a, b: ~(a | b), True),
    "s_xnor_b32": (lambda a, b: ~(a ^ b), True),
    "s_and_not1_b32": (lambda a, b: a & ~b, True),
    "s_or_not1_b32": (lambda a, b: a | ~b, True),
    "s_lshl_b32": (lambda a, b: a << (b & 31), True),
    "s_lshr_b32": (lambda a, b: a >> (b & 31), True),
    "s_ashr_i32": (lambda a, b: (_i(a) >> (b & 31).astype(_I32)).view(_U32), True),
    "s_bfm_b32": (lambda a, b: ((_U32(1) << (a & 31)) - _U32(1)) << (b & 31), False),
    "s_mul_i32": (lambda a, b: (a.astype(_U64) * b.astype(_U64)) & _M32, False),
    "s_mul_hi_u32": (lambda a, b: (a.astype(_U64) * b.astype(_U64)) >> _U64(32), False),
    "s_mul_hi_i32": (lambda a, b: ((_i(a).astype(_I64) * _i(b).astype(_I64)) >> 32) & 0xFFFFFFFF, False),
    "s_bfe_u32": (lambda a, b: (a >> (b & 31)) & ((_U64(1) << ((b >> 16) & 127).astype(_U64).clip(0, 32)) - 1), True),
    "s_bfe_i32": (
        lambda a, b: _sbfe(a, b & 31, ((b >> 16) & 127).clip(0, 32)),
        True,
    ),
    "s_pack_ll_b32_b16": (lambda a, b: (a & 0xFFFF) | (b << 16), False),
    "s_absdiff_i32": (lambda a, b: np.abs(_i(a).astype(_I64) - _i(b).astype(_I64)) & 0xFFFFFFFF, True),
    "s_min_i32": (lambda a, b: np.minimum(_i(a), _i(b)).view(_U32), False),
    "s_max_i32": (lambda a, b: np.maximum(_i(a), _i(b)).view(_U32), False),
    "s_min_u32": (lambda a, b: np.minimum(a, b), False),
    "s_max_u32": (lambda a, b: np.maximum(a, b), False),
}
# SCC of min/max: whether the first operand was chosen (the ISA's "SCC = S0 < S1" / "S0 > S1").
_MINMAX_SCC: Final[dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    "s_min_i32": lambda a, b: _i(a) < _i(b),
    "s_max_i32": lambda a, b: _i(a) > _i(b),
    "s_min_u32": lambda a, b: a < b,
    "s_max_u32": lambda a, b: a > b,
}
_SOP2_64: Final[dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    "s_and_b64": lambda a, b: a & b,
    "s_or_b64": lambda a, b: a | b,
    "s_xor_b64": lambda a, b: a ^ b,
    "s_nand_b64": lambda a, b: ~(a & b),
    "s_nor_b64": lambda a, b: ~(a | b),
    "s_xnor_b64": lambda a, b: ~(a ^ b),
    "s_and_not1_b64": lambda a, b: a & ~b,
    "s_or_not1_b64": lambda a, b: a | ~b,
}
_SHIFT_64: Final[dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    "s_bfe_u64": lambda a, b: _bfe64(a, b, False),
    "s_bfe_i64": lambda a, b: _bfe64(a, b, True),
    "s_lshl_b64": lambda a, b: a << (b & _U64(63)),
    "s_lshr_b64": lambda a, b: a >> (b & _U64(63)),
    "s_ashr_i64": lambda a, b: (a.view(_I64) >> (b & _U64(63)).astype(_I64)).view(_U64),
}


def _bfe64(a: np.ndarray, b: np.ndarray, signed: bool) -> np.ndarray:
    """s_bfe_*64: offset in S1[5:0], width in S1[22:16] (at most 64)."""
    offset, width = b & _U64(63), np.minimum((b >> _U64(16)) & _U64(127), _U64(64))
    field = a >> offset
    keep = np.where(width >= 64, ~_U64(0), (_U64(1) << np.minimum(width, _U64(63))) - _U64(1))
    field = field & keep
    if not signed:
        return np.asarray(field)
    sign = _U64(1) << np.maximum(width, _U64(1)) - _U64(1)
    extended = np.where((field & sign) != 0, field | ~keep, field)
    return np.asarray(np.where(width == 0, _U64(0), extended))


def _sbfe(a: np.ndarray, offset: np.ndarray, width: np.ndarray) -> np.ndarray:
    width = np.asarray(width).astype(_I64)
    field = (np.asarray(a).astype(_I64) >> np.asarray(offset).astype(_I64)) & ((np.int64(1) << width) - 1)
    sign = np.int64(1) << np.maximum(width - 1, 0)
    return np.where(width == 0, 0, (field ^ sign) - sign) & 0xFFFFFFFF


def _sop2(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], scc: bool, name: str) -> Handler:
    minmax = _MINMAX_SCC.get(name)

    def op(g: Group, i: Inst) -> None:
        a, b = np.broadcast_arrays(g.s(i.src[0]), g.s(i.src[1]))
        r = np.asarray(fn(a, b)).astype(_U64).astype(_U32)
        if scc:
            g.set_scc(r != 0)
        elif minmax is not None:
            g.set_scc(minmax(a, b))
        g.set_s(i.vdst, r)

    return op


def _sop2_64(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], shift: bool) -> Handler:
    def op(g: Group, i: Inst) -> None:
        b = g.s(i.src[1]).astype(_U64) if shift else g.s64(i.src[1])
        r = np.asarray(fn(*np.broadcast_arrays(g.s64(i.src[0]), b))).astype(_U64)
        g.set_scc(r != 0)
        g.set_s64(i.vdst, r)

    return op


def _cselect(wide: bool) -> Handler:
    def op(g: Group, i: Inst) -> None:
        read, write = (g.s64, g.set_s64) if wide else (g.s, g.set_s)
        write(i.vdst, np.where(g.w.scc[g.sel], read(i.src[0]), read(i.src[1])))

    return op


_SOP1_32: Final[dict[str, tuple[Callable[[np.ndarray], np.ndarray], bool]]] = {
    "s_mov_b32": (lambda a: a, False),
    "s_not_b32": (lambda a: ~a, True),
    "s_brev_b32": (lambda a: _brev(a), False),
    "s_sext_i32_i8": (lambda a: a.astype(np.int8).astype(_I32).view(_U32), False),
    "s_sext_i32_i16": (lambda a: a.astype(np.int16).astype(_I32).view(_U32), False),
    "s_abs_i32": (lambda a: np.abs(_i(a)).view(_U32), True),
    "s_bcnt1_i32_b32": (lambda a: _popcount(a), True),
    "s_bcnt0_i32_b32": (lambda a: 32 - _popcount(a), True),
    "s_ctz_i32_b32": (lambda a: _ctz(a), False),
    "s_clz_i32_u32": (lambda a: _clz(a), False),
    "s_cls_i32": (lambda a: _clz(a ^ (_i(a) >> 31).view(_U32)), False),
}


def _popcount(a: np.ndarray) -> np.ndarray:
    bits = np.unpackbits(np.asarray(a, "<u4").reshape(-1, 1).view(np.uint8), axis=1)
    return np.asarray(bits.sum(axis=1).astype(_U32))


def _brev(a: np.ndarray) -> np.ndarray:
    bits = np.unpackbits(np.asarray(a, "<u4").reshape(-1, 1).view(np.uint8), axis=1, bitorder="little")
    return np.packbits(bits[:, ::-1], axis=1, bitorder="little").view("<u4")[:, 0].reshape(np.shape(a))


def _ctz(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, _U32)
    low = a & (~a + _U32(1))
    return np.where(a == 0, _U32(0xFFFFFFFF), np.log2(np.maximum(low, 1).astype(np.float64)).astype(_U32))


def _clz(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, _U32)
    top = np.floor(np.log2(np.maximum(a, 1).astype(np.float64))).astype(_U32)
    return np.where(a == 0, _U32(0xFFFFFFFF), _U32(31) - top)


def _sop1(fn: Callable[[np.ndarray], np.ndarray], scc: bool) -> Handler:
    def op(g: Group, i: Inst) -> None:
        r = np.broadcast_to(np.asarray(fn(np.asarray(g.s(i.src[0])))).astype(_U32), (g.n,))
        if scc:
            g.set_scc(r != 0)
        g.set_s(i.vdst, r)

    return op


_SAVEEXEC: Final[dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    "and": lambda s, e: s & e,
    "or": lambda s, e: s | e,
    "xor": lambda s, e: s ^ e,
    "and_not1": lambda s, e: s & ~e,
    "and_not0": lambda s, e: ~s & e,
    "or_not1": lambda s, e: s | ~e,
}


def _saveexec(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Handler:
    def op(g: Group, i: Inst) -> None:
        exec_ = g.s(Src.EXEC_LO).copy()
        new = np.broadcast_to(fn(g.s(i.src[0]), exec_), (g.n,))
        g.set_s(i.vdst, exec_)
        g.set_s(Src.EXEC_LO, new)
        g.set_scc(new != 0)

    return op


def _misc_sop1() -> dict[str, Handler]:
    def mov_b64(g: Group, i: Inst) -> None:
        g.set_s64(i.vdst, g.s64(i.src[0]))

    def not_b64(g: Group, i: Inst) -> None:
        r = ~g.s64(i.src[0])
        g.set_scc(r != 0)
        g.set_s64(i.vdst, r)

    def cmov(g: Group, i: Inst) -> None:
        g.set_s(i.vdst, np.where(g.w.scc[g.sel], g.s(i.src[0]), g.s(i.vdst)))

    def bitset(value: int) -> Handler:
        def op(g: Group, i: Inst) -> None:
            bit = _U32(1) << (g.s(i.src[0]) & 31)
            old = g.s(i.vdst)
            g.set_s(i.vdst, (old | bit) if value else (old & ~bit))

        return op

    def getpc(g: Group, i: Inst) -> None:
        g.set_s64(i.vdst, np.full(g.n, g.base + g.next_pc, _U64))

    def setpc(g: Group, i: Inst) -> None:
        g.new_pc = (g.s64(i.src[0]).astype(_I64) - g.base) * np.ones(g.n, _I64)

    def swappc(g: Group, i: Inst) -> None:
        target = g.s64(i.src[0]).astype(_I64) - g.base
        g.set_s64(i.vdst, np.full(g.n, g.base + g.next_pc, _U64))
        g.new_pc = target * np.ones(g.n, _I64)

    return {"s_mov_b64": mov_b64, "s_not_b64": not_b64, "s_cmov_b32": cmov, "s_bitset0_b32": bitset(0),
            "s_bitset1_b32": bitset(1), "s_getpc_b64": getpc, "s_setpc_b64": setpc, "s_swappc_b64": swappc}  # fmt: skip


_CMP: Final[dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    "eq": np.equal, "lg": np.not_equal, "gt": np.greater, "ge": np.greater_equal, "lt": np.less, "le": np.less_equal,
}  # fmt: skip


def _sopc(rel: str, kind: str) -> Handler:
    def op(g: Group, i: Inst) -> None:
        a, b = (g.s64(i.src[0]), g.s64(i.src[1])) if kind == "u64" else (g.s(i.src[0]), g.s(i.src[1]))
        if kind == "i32":
            a, b = _i(a), _i(b)
        g.set_scc(_CMP[rel](a, b))

    return op


def _bitcmp(want: int) -> Handler:
    def op(g: Group, i: Inst) -> None:
        g.set_scc(((g.s(i.src[0]) >> (g.s(i.src[1]) & 31)) & 1) == want)

    return op


def _sopk() -> dict[str, Handler]:
    def movk(g: Group, i: Inst) -> None:
        g.set_s(i.vdst, np.full(g.n, _sext16(i.simm) & 0xFFFFFFFF, _U32))

    def cmovk(g: Group, i: Inst) -> None:
        g.set_s(i.vdst, np.where(g.w.scc[g.sel], _U32(_sext16(i.simm) & 0xFFFFFFFF), g.s(i.vdst)))

    def addk(g: Group, i: Inst) -> None:
        r = _i(g.s(i.vdst)).astype(_I64) + _sext16(i.simm)
        g.set_s(i.vdst, r & 0xFFFFFFFF)
        g.set_scc((r < -(2**31)) | (r >= 2**31))

    def mulk(g: Group, i: Inst) -> None:
        g.set_s(i.vdst, (_i(g.s(i.vdst)).astype(_I64) * _sext16(i.simm)) & 0xFFFFFFFF)

    def cmpk(rel: str, signed: bool) -> Handler:
        def op(g: Group, i: Inst) -> None:
            a = g.s(i.vdst)
            if signed:
                g.set_scc(_CMP[rel](_i(a), np.asarray(_sext16(i.simm), _I32)))
            else:
                g.set_scc(_CMP[rel](a, np.asarray(i.simm, _U32)))

        return op

    ops: dict[str, Handler] = {"s_movk_i32": movk, "s_cmovk_i32": cmovk, "s_addk_i32": addk, "s_mulk_i32": mulk}
    for rel in _CMP:
        ops[f"s_cmpk_{rel}_i32"] = cmpk(rel, True)
        ops[f"s_cmpk_{rel}_u32"] = cmpk(rel, False)
    return ops


def _nop(g: Group, i: Inst) -> None:
    """Scheduling hints and counters: nothing to do in a model that finishes each instruction before the next
    (``s_waitcnt``: every load has landed already; docs/rdna3.md)."""


def _branch(cond: Callable[[Group], np.ndarray | bool]) -> Handler:
    def op(g: Group, i: Inst) -> None:
        g.jump(cond(g), i.pc + 4 + 4 * _sext16(i.simm))

    return op


def _endpgm(g: Group, i: Inst) -> None:
    g.w.alive[g.sel] = False


def _barrier(g: Group, i: Inst) -> None:
    g.w.waiting[g.sel] = True


_BRANCHES: Final[dict[str, Callable[[Group], np.ndarray | bool]]] = {
    "s_branch": lambda g: True,
    "s_cbranch_scc0": lambda g: ~g.w.scc[g.sel],
    "s_cbranch_scc1": lambda g: g.w.scc[g.sel],
    "s_cbranch_vccz": lambda g: g.s(Src.VCC_LO) == 0,
    "s_cbranch_vccnz": lambda g: g.s(Src.VCC_LO) != 0,
    "s_cbranch_execz": lambda g: g.s(Src.EXEC_LO) == 0,
    "s_cbranch_execnz": lambda g: g.s(Src.EXEC_LO) != 0,
}
_NOPS: Final = ("s_nop", "s_sleep", "s_set_inst_prefetch_distance", "s_clause", "s_delay_alu", "s_waitcnt",
                "s_waitcnt_depctr",
                "s_sendmsg", "s_setprio", "s_icache_inv", "s_waitcnt_vscnt", "s_waitcnt_vmcnt", "s_waitcnt_expcnt",
                "s_waitcnt_lgkmcnt", "buffer_gl0_inv", "buffer_gl1_inv")  # fmt: skip


def _handlers() -> dict[str, Handler]:
    ops: dict[str, Handler] = _carry_ops()
    ops.update({n: _sop2(fn, scc, n) for n, (fn, scc) in _SOP2_32.items()})
    ops.update({n: _sop2_64(fn, False) for n, fn in _SOP2_64.items()})
    ops.update({n: _sop2_64(fn, True) for n, fn in _SHIFT_64.items()})
    ops.update({"s_cselect_b32": _cselect(False), "s_cselect_b64": _cselect(True)})
    ops.update({n: _sop1(fn, scc) for n, (fn, scc) in _SOP1_32.items()})
    ops.update({f"s_{n}_saveexec_b32": _saveexec(fn) for n, fn in _SAVEEXEC.items()})
    ops.update(_misc_sop1())
    for rel in _CMP:
        ops[f"s_cmp_{rel}_i32"] = _sopc(rel, "i32")
        ops[f"s_cmp_{rel}_u32"] = _sopc(rel, "u32")
    ops.update({"s_cmp_eq_u64": _sopc("eq", "u64"), "s_cmp_lg_u64": _sopc("lg", "u64")})
    ops.update({"s_bitcmp0_b32": _bitcmp(0), "s_bitcmp1_b32": _bitcmp(1)})
    ops.update(_sopk())
    ops.update(dict.fromkeys(_NOPS, _nop))
    ops.update({n: _branch(c) for n, c in _BRANCHES.items()})
    ops.update({"s_endpgm": _endpgm, "s_barrier": _barrier})
    return ops


SALU_HANDLERS: Final[dict[str, Handler]] = _handlers()
