"""f64 arithmetic, f16/f32/f64/integer conversions and the f32 transcendentals, from assembly, against the RDNA3
ISA guide's definitions (hypothesis over operands including NaN, infinities, denormals and -0.0)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.rdna3 import DATA, assemble, make_space, needs_llvm_mc, read, run_code

pytestmark = needs_llvm_mc
A, B, OUT = DATA, DATA + 0x1000, DATA + 0x2000
_PROGRAMS: dict[str, bytes] = {}


def run64(body: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Lane i gets 64-bit a[i] in v[2:3] and b[i] in v[4:5]; returns v[6:7] of every lane as uint64."""
    if body not in _PROGRAMS:
        _PROGRAMS[body] = assemble(f"""
            v_lshlrev_b32 v1, 3, v0
            global_load_b64 v[2:3], v1, s[0:1]
            global_load_b64 v[4:5], v1, s[2:3]
            v_mov_b32 v6, 0
            v_mov_b32 v7, 0
            {body}
            global_store_b64 v1, v[6:7], s[4:5]
            s_endpgm
        """)
    space = make_space(16 << 20)
    space.write(A, np.ascontiguousarray(a).view(np.uint64))
    space.write(B, np.ascontiguousarray(b).view(np.uint64))
    run_code(space, _PROGRAMS[body], user_data=[A, 0, B, 0, OUT, 0])
    return read(space, OUT, 32, "<u8")


SPECIAL_F64 = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 1.0, -1.5, 1e300]
lanes_f64 = st.lists(st.one_of(st.sampled_from(SPECIAL_F64), st.floats(allow_nan=True)), min_size=32,
                     max_size=32).map(lambda v: np.array(v, np.float64))  # fmt: skip
SPECIAL_F32 = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 3.4028235e38, 1.0, 65504.0, 65520.0]
lanes_f32 = st.lists(st.one_of(st.sampled_from(SPECIAL_F32), st.floats(width=32)), min_size=32,
                     max_size=32).map(lambda v: np.array(v, np.float32))  # fmt: skip


def _same(got: np.ndarray, want: np.ndarray) -> None:
    """Bit-equal, except that any NaN matches any NaN."""
    both_nan = np.isnan(got) & np.isnan(want)
    bits = got.dtype.newbyteorder("=").str.replace("f", "u")
    assert np.array_equal(np.where(both_nan, 0, got.view(bits)), np.where(both_nan, 0, want.view(bits))), (got, want)


def _ieee(pick_min: bool) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        pick = (a < b) if pick_min else (a > b)
        out = np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.where(pick, a, b)))
        zeros = (a == 0) & (b == 0)
        neg = np.signbit(a) | np.signbit(b) if pick_min else np.signbit(a) & np.signbit(b)
        return np.where(zeros, np.where(neg, -0.0, 0.0), out)

    return fn


F64_CASES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "v_add_f64 v[6:7], v[2:3], v[4:5]": lambda a, b: a + b,
    "v_mul_f64 v[6:7], v[2:3], v[4:5]": lambda a, b: a * b,
    "v_add_f64 v[6:7], -v[2:3], |v[4:5]|": lambda a, b: -a + np.abs(b),
    "v_min_f64 v[6:7], v[2:3], v[4:5]": _ieee(True),
    "v_max_f64 v[6:7], v[2:3], v[4:5]": _ieee(False),
    "v_sqrt_f64 v[6:7], v[2:3]": lambda a, b: np.sqrt(a),
    "v_floor_f64 v[6:7], v[2:3]": lambda a, b: np.floor(a),
    "v_trunc_f64 v[6:7], v[2:3]": lambda a, b: np.trunc(a),
    "v_cvt_f64_f32 v[6:7], v2": lambda a, b: a.view(np.float32)[0::2].astype(np.float64),
    "v_cvt_f32_f64 v6, v[2:3]": lambda a, b: _low_f32(a.astype(np.float32)),
    "v_cvt_f32_f16 v6, v2": lambda a, b: _low_f32(a.view(np.float16)[0::4].astype(np.float32)),
    "v_cvt_f16_f32 v6, v2": lambda a, b: _low_f16(a.view(np.float32)[0::2].astype(np.float16)),
}


F32_SOURCE = {"v_cvt_f64_f32", "v_cvt_f16_f32"}  # the other cases read f64 lanes (v_cvt_f32_f16: their low bits)


def _low_f32(x: np.ndarray) -> np.ndarray:
    """An f32 in the low half of a 64-bit lane result (v7 stays 0)."""
    return np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64).view(np.float64)


def _low_f16(x: np.ndarray) -> np.ndarray:
    """An f16 in the low 16 bits (the rest of the dword zeroed, v7 stays 0)."""
    return np.ascontiguousarray(x, np.float16).view(np.uint16).astype(np.uint64).view(np.float64)


@pytest.mark.parametrize("body", list(F64_CASES))
@settings(max_examples=12, deadline=None)
@given(a=lanes_f64, b=lanes_f64)
def test_f64_arithmetic_and_conversions_follow_ieee(body: str, a: np.ndarray, b: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        if body.split()[0] in F32_SOURCE:  # an f32 (from the f64 values) in each lane's low dword
            a = np.ascontiguousarray(np.repeat(a.astype(np.float32), 2)).view(np.float64)
        want = np.asarray(F64_CASES[body](a, b), np.float64)
    got = run64(body, a, b).view(np.float64)
    if "cvt_f32" in body or "cvt_f16" in body:  # compare the payload bits, not as f64
        assert np.array_equal(got.view(np.uint64) & 0xFFFFFFFF, want.view(np.uint64)) or _nan_payloads(got, want)
    else:
        _same(got, want)


def _nan_payloads(got: np.ndarray, want: np.ndarray) -> bool:
    """Narrow results equal except for the payloads of NaNs."""
    g32, w32 = (np.ascontiguousarray(x.view(np.uint64) & 0xFFFFFFFF).astype(np.uint32) for x in (got, want))
    if (w32 >> 16).any():
        g, w = g32.view(np.float32), w32.view(np.float32)
    else:
        g, w = g32.astype(np.uint16).view(np.float16), w32.astype(np.uint16).view(np.float16)
    both = np.isnan(g) & np.isnan(w)
    return bool(np.array_equal(np.where(both, 0, g32), np.where(both, 0, w32)))


@settings(max_examples=20, deadline=None)
@given(a=lanes_f64)
def test_f64_to_integer_conversions_truncate_saturate_and_map_nan_to_zero(a: np.ndarray) -> None:
    got = run64("v_cvt_i32_f64 v6, v[2:3]\nv_cvt_u32_f64 v7, v[2:3]", a, a).view(np.uint32).reshape(32, 2)
    t = np.nan_to_num(np.trunc(a), nan=0.0)
    np.testing.assert_array_equal(got[:, 0].view(np.int32), np.clip(t, -(2**31), 2**31 - 1).astype(np.int64))
    np.testing.assert_array_equal(got[:, 1], np.clip(t, 0, 2**32 - 1).astype(np.uint64))


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in f32 ULPs (0 where both are NaN or equal infinities, huge where only one is NaN)."""
    order = lambda x: np.where(x.view(np.int32) < 0, -(x.view(np.int32) & 0x7FFFFFFF), x.view(np.int32))  # noqa: E731
    both_nan = np.isnan(got) & np.isnan(want)
    one_nan = np.isnan(got) ^ np.isnan(want)
    d = np.abs(order(got).astype(np.int64) - order(want).astype(np.int64))
    return np.where(both_nan, 0, np.where(one_nan, 1 << 40, d))


# The ISA's definitions (computed in f64, rounded to f32) and the documented error bound in f32 ULPs.
TRANSCENDENTALS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], int]] = {
    "v_exp_f32": (np.exp2, 1),
    "v_log_f32": (np.log2, 1),
    "v_rcp_f32": (lambda x: 1.0 / x, 1),
    "v_rsq_f32": (lambda x: 1.0 / np.sqrt(x), 1),
    "v_sqrt_f32": (np.sqrt, 1),
    "v_sin_f32": (lambda x: np.sin(2 * np.pi * x), 1),  # the input is in revolutions
    "v_cos_f32": (lambda x: np.cos(2 * np.pi * x), 1),
}
TRIG_DOMAIN = 256.0  # the ISA's valid input range for v_sin_f32 / v_cos_f32 (revolutions)


@pytest.mark.parametrize("name", list(TRANSCENDENTALS))
@settings(max_examples=15, deadline=None)
@given(a=lanes_f32)
def test_transcendentals_are_within_their_documented_ulps(name: str, a: np.ndarray) -> None:
    fn, ulps = TRANSCENDENTALS[name]
    if name in ("v_sin_f32", "v_cos_f32"):
        a = np.where(np.abs(a) <= TRIG_DOMAIN, a, np.float32(0.25))  # outside the domain the ISA promises nothing
    wide = np.ascontiguousarray(np.repeat(a, 2)).view(np.float64)
    got = (run64(f"{name} v6, v2", wide, wide) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        want = fn(a.astype(np.float64)).astype(np.float32)
    assert (_ulps(got, want) <= ulps).all(), (a, got, want)


@pytest.mark.parametrize(
    ("name", "value", "want"),
    [("v_exp_f32", -np.inf, 0.0), ("v_exp_f32", np.inf, np.inf), ("v_log_f32", 0.0, -np.inf),
     ("v_log_f32", -1.0, np.nan), ("v_rcp_f32", -0.0, -np.inf), ("v_rsq_f32", 0.0, np.inf),
     ("v_rsq_f32", -1.0, np.nan), ("v_sqrt_f32", -0.0, -0.0), ("v_sin_f32", np.inf, np.nan)],
)  # fmt: skip
def test_transcendental_special_values(name: str, value: float, want: float) -> None:
    a = np.full(32, value, np.float32)
    wide = np.ascontiguousarray(np.repeat(a, 2)).view(np.float64)
    got = (run64(f"{name} v6, v2", wide, wide) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    _same(got, np.full(32, want, np.float32))


def _perm_reference(a: int, b: int, c: int) -> int:
    """The ISA's BYTE_PERMUTE, one lane at a time."""
    data = (a << 32) | b
    out = 0
    for k in range(4):
        sel = (c >> (8 * k)) & 0xFF
        if sel < 8:
            byte = (data >> (8 * sel)) & 0xFF
        elif sel < 12:
            byte = 0xFF if data >> (15 + 16 * (sel - 8)) & 1 else 0
        else:
            byte = 0 if sel == 12 else 0xFF
        out |= byte << (8 * k)
    return out


words = st.lists(st.integers(0, 2**32 - 1), min_size=32, max_size=32)


@settings(max_examples=20, deadline=None)
@given(a=words, b=words, sel=st.lists(st.integers(0, 2**32 - 1) | st.sampled_from([0x0C0B0A09, 0x08070605, 0xFF0D0C03]),
                                      min_size=32, max_size=32))  # fmt: skip
def test_v_perm_b32_picks_bytes_as_byte_permute_says(a: list[int], b: list[int], sel: list[int]) -> None:
    wide_a = np.array([x | (y << 32) for x, y in zip(a, sel, strict=True)], np.uint64)  # v2 = a, v3 = sel
    got = run64("v_perm_b32 v6, v2, v4, v3", wide_a, np.array(b, np.uint64)) & 0xFFFFFFFF
    np.testing.assert_array_equal(got, [_perm_reference(x, y, z) for x, y, z in zip(a, b, sel, strict=True)])


@settings(max_examples=20, deadline=None)
@given(a=lanes_f32)
def test_frexp_splits_an_f32_into_mantissa_and_exponent(a: np.ndarray) -> None:
    wide = np.ascontiguousarray(np.repeat(a, 2)).view(np.float64)
    got = run64("v_frexp_mant_f32 v6, v2\nv_frexp_exp_i32_f32 v7, v2", wide, wide).view(np.uint32).reshape(32, 2)
    finite = np.isfinite(a)
    magnitude = np.where(finite & (a != 0), np.abs(a.astype(np.float64)), 1.0)
    exponent = np.where(finite & (a != 0), np.floor(np.log2(magnitude)) + 1, 0)
    mant = np.where(finite & (a != 0), a.astype(np.float64) / 2.0**exponent, a).astype(np.float32)  # exact
    _same(got[:, 0].view(np.float32), mant)
    np.testing.assert_array_equal(got[:, 1].view(np.int32), exponent.astype(np.int32))


@settings(max_examples=20, deadline=None)
@given(a=words, b=words)
def test_v_cvt_pk_u16_u32_saturates_both_halves(a: list[int], b: list[int]) -> None:
    got = run64("v_cvt_pk_u16_u32 v6, v2, v4", np.array(a, np.uint64), np.array(b, np.uint64)) & 0xFFFFFFFF
    np.testing.assert_array_equal(got, [min(x, 0xFFFF) | (min(y, 0xFFFF) << 16) for x, y in zip(a, b, strict=True)])
