"""Atomic read-modify-write on global memory (GLOBAL/FLAT ``*_atomic_*``) and LDS (``ds_*`` atomics), vectorised.

Lanes execute in a fixed order, waves in dispatch order and lanes in lane order within a wave (docs/rdna3.md
"Atomics"): where several lanes hit one address, each sees the value the previous one left, and a returning atomic
gives each lane that pre-op value. Adds and subtracts are segmented prefix sums, 32-bit min/max segmented prefix
maxima (one numpy pass each, however many lanes share an address); the other operations run in rounds, one lane per
distinct address per round (as many rounds as the most-shared address has lanes). Semantics are the RDNA3 ISA
guide's: ``cmpswap``/``cmpstore`` store DATA[0] where memory equals DATA[1]; ``inc`` wraps to 0 at DATA, ``dec``
reloads DATA at 0 or above it; ``csub`` clamps at 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from .decode import Inst
from .lanes import gather, scatter
from .operands import VGPR_BASE
from .state import Group
from .vmem import _lane_addresses, _lds_index, _pick, _read_lanes, _write_lanes

__all__ = ["ATOMIC_HANDLERS", "DS_ATOMIC_OPS", "GLOBAL_ATOMIC_OPS", "combine"]

Handler = Callable[[Group, Inst], None]
Fn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
_SIGN32: Final = np.uint32(0x80000000)
_QNAN: Final = np.uint32(0x7FC00000)


def _f(x: np.ndarray) -> np.ndarray:
    return x.view(np.float32)


def _signed(x: np.ndarray) -> np.ndarray:
    return x.view(np.int32 if x.dtype == np.uint32 else np.int64)


def _fminmax(o: np.ndarray, d: np.ndarray, pick_min: bool) -> np.ndarray:
    """f32 min/max on bit patterns: a NaN operand yields the other (two NaNs the canonical quiet NaN), and -0
    orders below +0."""
    r = (np.fmin if pick_min else np.fmax)(_f(o), _f(d)).view(np.uint32)
    zeros = ((o | d) & ~_SIGN32) == 0
    r = np.where(zeros, (o | d) if pick_min else (o & d), r)
    return np.where(np.isnan(_f(o)) & np.isnan(_f(d)), _QNAN, r)


# (old, data, cmp) -> new, on uint32 or uint64 arrays of one width.
_OPS: Final[dict[str, Fn]] = {
    "add": lambda o, d, c: o + d,
    "sub": lambda o, d, c: o - d,
    "rsub": lambda o, d, c: d - o,
    "min_i": lambda o, d, c: np.where(_signed(d) < _signed(o), d, o),
    "max_i": lambda o, d, c: np.where(_signed(d) > _signed(o), d, o),
    "min_u": lambda o, d, c: np.minimum(o, d),
    "max_u": lambda o, d, c: np.maximum(o, d),
    "and": lambda o, d, c: o & d,
    "or": lambda o, d, c: o | d,
    "xor": lambda o, d, c: o ^ d,
    "swap": lambda o, d, c: d,
    "cmpswap": lambda o, d, c: np.where(o == c, d, o),
    "inc": lambda o, d, c: np.where(o >= d, 0, o + 1).astype(o.dtype),
    "dec": lambda o, d, c: np.where((o == 0) | (o > d), d, o - 1).astype(o.dtype),
    "csub": lambda o, d, c: np.where(o >= d, o - d, 0).astype(o.dtype),
    "add_f32": lambda o, d, c: (_f(o) + _f(d)).view(np.uint32),
    "min_f32": lambda o, d, c: _fminmax(o, d, True),
    "max_f32": lambda o, d, c: _fminmax(o, d, False),
    "cmpswap_f32": lambda o, d, c: np.where(_f(o) == _f(c), d, o),
}
_MINMAX_KEY: Final = {"min_u": (True, False), "max_u": (False, False), "min_i": (True, True), "max_i": (False, True)}


def _segmented_minmax(kind: str, order: np.ndarray, slots: np.ndarray, cur: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Each lane's pre-op value for a 32-bit min/max: a running maximum over (slot << 32 | key) in lane order."""
    pick_min, signed = _MINMAX_KEY[kind]
    k = len(order)
    key_of: Callable[[np.ndarray], np.ndarray] = lambda v: (  # noqa: E731 - order-preserving unsigned key
        (v ^ _SIGN32 if signed else v) ^ (np.uint32(0xFFFFFFFF) if pick_min else np.uint32(0))
    ).astype(np.uint64)
    ordered_slots = slots[order].astype(np.uint64) << np.uint64(32)
    keys = np.empty(2 * k, np.uint64)  # each lane's slot value before it, then its own data
    keys[0::2] = ordered_slots | key_of(cur[slots[order]])
    keys[1::2] = ordered_slots | key_of(data[order])
    running = np.maximum.accumulate(keys)[0::2] & np.uint64(0xFFFFFFFF)
    value = running.astype(np.uint32) ^ (np.uint32(0xFFFFFFFF) if pick_min else np.uint32(0))
    pre = np.empty(k, np.uint32)
    pre[order] = value ^ _SIGN32 if signed else value
    return pre


def combine(kind: str, slots: np.ndarray, cur: np.ndarray, data: np.ndarray, cmp: np.ndarray) -> np.ndarray:
    """Apply ``kind`` for every lane in lane order: ``slots[k]`` indexes ``cur`` (the memory words, updated in
    place); returns each lane's pre-op value."""
    k = len(slots)
    if kind in ("add", "sub"):
        order = np.argsort(slots, kind="stable")
        ordered = slots[order]
        vals = data[order]
        csum = np.cumsum(vals, dtype=vals.dtype)
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        before = csum - vals  # inclusive sum minus own value
        excl = before - np.repeat(before[starts], np.diff(np.r_[starts, k]))
        pre = np.empty_like(data)
        pre[order] = cur[ordered] + excl if kind == "add" else cur[ordered] - excl
        ends = np.r_[starts[1:], k] - 1
        total = csum[ends] - before[starts]
        first = ordered[starts]
        cur[first] = cur[first] + total if kind == "add" else cur[first] - total
        return pre
    if kind in _MINMAX_KEY and data.dtype == np.uint32:
        order = np.argsort(slots, kind="stable")
        pre = _segmented_minmax(kind, order, slots, cur, data)
        fn = _OPS[kind]
        ordered = slots[order]
        ends = np.r_[np.flatnonzero(ordered[1:] != ordered[:-1]), k - 1]
        lane = order[ends]
        cur[ordered[ends]] = fn(pre[lane], data[lane], cmp[lane])
        return pre
    fn = _OPS[kind]
    pre = np.empty_like(data)
    remaining = np.arange(k)
    while remaining.size:
        _, first = np.unique(slots[remaining], return_index=True)
        lanes = remaining[first]
        where = slots[lanes]
        old = cur[where]
        pre[lanes] = old
        cur[where] = fn(old, data[lanes], cmp[lanes])
        remaining = np.delete(remaining, first)
    return pre


def _data(g: Group, reg: int, active: np.ndarray, dwords: int) -> np.ndarray:
    """The active lanes' values of ``dwords`` consecutive VGPRs from ``reg``, as uint32 or uint64 (k,)."""
    return _read_lanes(g, reg, active, 4 * dwords).view(np.uint64 if dwords == 2 else np.uint32)[:, 0]


def _returned(g: Group, vdst: int, active: np.ndarray, pre: np.ndarray, dwords: int) -> None:
    _write_lanes(g, vdst, active, np.ascontiguousarray(pre).view(np.uint32).reshape(len(pre), dwords))


def _global_atomic(kind: str, dwords: int) -> Handler:
    """``global_atomic_*`` / ``flat_atomic_*``: DATA at ``vsrc`` (then CMP for cmpswap), the pre-op value to
    ``vdst`` when GLC is set."""
    nbytes, dtype = 4 * dwords, np.uint64 if dwords == 2 else np.uint32

    def op(g: Group, i: Inst) -> None:
        active = g.exec
        addrs = _pick(g, _lane_addresses(g, i), active)
        reg = i.src[1] - VGPR_BASE
        data = _data(g, reg, active, dwords)
        cmp = _data(g, reg + dwords, active, dwords) if kind.startswith("cmpswap") else data
        where, slots = np.unique(addrs, return_inverse=True)
        cur = gather(g.space, where, nbytes).view(dtype)[:, 0].copy()
        pre = combine(kind, slots, cur, data, cmp)
        scatter(g.space, where, cur.view(np.uint8).reshape(len(where), nbytes))
        if i.glc:
            _returned(g, i.vdst, active, pre, dwords)

    return op


def _ds_atomic(kind: str, dwords: int, returns: bool) -> Handler:
    """``ds_*`` atomics on the workgroup's LDS: DATA0 (then DATA1, the compare value of cmpstore); lanes outside
    the allocation change nothing and return 0."""
    nbytes, dtype = 4 * dwords, np.uint64 if dwords == 2 else np.uint32

    def op(g: Group, i: Inst) -> None:
        active, index, inside = _lds_index(g, i, i.simm | (i.offset1 << 8), nbytes)
        data = _data(g, i.src[1] - VGPR_BASE, active, dwords)
        cmp = _data(g, i.src[2] - VGPR_BASE, active, dwords) if kind.startswith("cmpswap") else data
        pre = np.zeros(len(data), dtype)
        words = g.w.lds[: len(g.w.lds) // 8 * 8].view(dtype)
        pre[inside] = combine(kind, index[inside] // nbytes, words, data[inside], cmp[inside])
        if returns:
            _returned(g, i.vdst, active, pre, dwords)

    return op


# name suffix -> (operation, dwords)
GLOBAL_ATOMIC_OPS: Final[dict[str, tuple[str, int]]] = {
    "swap_b32": ("swap", 1), "cmpswap_b32": ("cmpswap", 1), "add_u32": ("add", 1), "sub_u32": ("sub", 1),
    "csub_u32": ("csub", 1), "min_i32": ("min_i", 1), "min_u32": ("min_u", 1), "max_i32": ("max_i", 1),
    "max_u32": ("max_u", 1), "and_b32": ("and", 1), "or_b32": ("or", 1), "xor_b32": ("xor", 1),
    "inc_u32": ("inc", 1), "dec_u32": ("dec", 1), "swap_b64": ("swap", 2), "cmpswap_b64": ("cmpswap", 2),
    "add_u64": ("add", 2), "sub_u64": ("sub", 2), "min_i64": ("min_i", 2), "min_u64": ("min_u", 2),
    "max_i64": ("max_i", 2), "max_u64": ("max_u", 2), "and_b64": ("and", 2), "or_b64": ("or", 2),
    "xor_b64": ("xor", 2), "inc_u64": ("inc", 2), "dec_u64": ("dec", 2), "cmpswap_f32": ("cmpswap_f32", 1),
    "min_f32": ("min_f32", 1), "max_f32": ("max_f32", 1), "add_f32": ("add_f32", 1),
}  # fmt: skip
# DS name without ``_rtn`` -> (operation, dwords)
DS_ATOMIC_OPS: Final[dict[str, tuple[str, int]]] = {
    "ds_add_u32": ("add", 1), "ds_sub_u32": ("sub", 1), "ds_rsub_u32": ("rsub", 1), "ds_inc_u32": ("inc", 1),
    "ds_dec_u32": ("dec", 1), "ds_min_i32": ("min_i", 1), "ds_max_i32": ("max_i", 1), "ds_min_u32": ("min_u", 1),
    "ds_max_u32": ("max_u", 1), "ds_and_b32": ("and", 1), "ds_or_b32": ("or", 1), "ds_xor_b32": ("xor", 1),
    "ds_cmpstore_b32": ("cmpswap", 1), "ds_min_f32": ("min_f32", 1), "ds_max_f32": ("max_f32", 1),
    "ds_add_f32": ("add_f32", 1), "ds_add_u64": ("add", 2), "ds_storexchg_b32": ("swap", 1),
}  # fmt: skip


def _rtn(name: str) -> str:
    """``ds_add_u32`` -> ``ds_add_rtn_u32`` (the returning form's spelling)."""
    stem, _, suffix = name.rpartition("_")
    return f"{stem}_rtn_{suffix}"


def _handlers() -> dict[str, Handler]:
    ops: dict[str, Handler] = {}
    for suffix, (kind, dwords) in GLOBAL_ATOMIC_OPS.items():
        for seg in ("global", "flat"):
            ops[f"{seg}_atomic_{suffix}"] = _global_atomic(kind, dwords)
    for name, (kind, dwords) in DS_ATOMIC_OPS.items():
        if name != "ds_storexchg_b32":  # only the returning form exists
            ops[name] = _ds_atomic(kind, dwords, False)
        ops[_rtn(name)] = _ds_atomic(kind, dwords, True)
    return ops


ATOMIC_HANDLERS: Final[dict[str, Handler]] = _handlers()
