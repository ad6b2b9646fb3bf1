"""ALU instructions from assembly: llvm-mc assembles each program, the executor runs one wave, and the results
are checked against values worked out from the RDNA3 ISA guide's definitions (hypothesis over operands,
including NaN, infinities, denormals, -0.0, overflow, and every inline constant)."""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.rdna3 import DATA, assemble, cls_reference, make_space, needs_llvm_mc, read, run_code

pytestmark = needs_llvm_mc
A, B, OUT = DATA, DATA + 0x1000, DATA + 0x2000
_PROGRAMS: dict[str, bytes] = {}


def _vector_program(body: str) -> bytes:
    if body not in _PROGRAMS:
        _PROGRAMS[body] = assemble(f"""
            v_lshlrev_b32 v1, 2, v0
            global_load_b32 v2, v1, s[0:1]
            global_load_b32 v3, v1, s[2:3]
            s_waitcnt vmcnt(0)
            {body}
            global_store_b32 v1, v4, s[4:5]
            global_store_b32 v1, v5, s[4:5] offset:128
            s_endpgm
        """)
    return _PROGRAMS[body]


def _split(addr: int) -> list[int]:
    return [addr & 0xFFFFFFFF, addr >> 32]


def run_vector(body: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lane i gets a[i] in v2 and b[i] in v3; returns v4 and v5 of every lane as uint32."""
    space = make_space(16 << 20)
    space.write(A, np.ascontiguousarray(a).view(np.uint32))
    space.write(B, np.ascontiguousarray(b).view(np.uint32))
    run_code(space, _vector_program(body), user_data=[*_split(A), *_split(B), *_split(OUT)])
    return read(space, OUT, 32, "<u4"), read(space, OUT + 128, 32, "<u4")


SPECIAL_F32 = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 3.4028235e38, -3.4028235e38, 1.0]
floats = st.one_of(st.sampled_from(SPECIAL_F32), st.floats(width=32, allow_nan=True, allow_infinity=True))
lanes_f32 = st.lists(floats, min_size=32, max_size=32).map(lambda v: np.array(v, np.float32))
lanes_u32 = st.lists(
    st.one_of(st.sampled_from([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]), st.integers(0, 2**32 - 1)),
    min_size=32,
    max_size=32,
).map(lambda v: np.array(v, np.uint32))


def _same_f32(got: np.ndarray, want: np.ndarray) -> None:
    want = np.asarray(want, np.float32)
    both_nan = np.isnan(got.view(np.float32)) & np.isnan(want)
    assert np.array_equal(np.where(both_nan, 0, got), np.where(both_nan, 0, want.view(np.uint32))), (got, want)


def _wide(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


def _ieee_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ISA: a NaN operand yields the other operand; -0.0 is less than +0.0."""
    out = np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.where(a < b, a, b)))
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, np.where(np.signbit(a) | np.signbit(b), np.float32(-0.0), np.float32(0.0)), out)


def _ieee_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.where(a > b, a, b)))
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, np.where(np.signbit(a) & np.signbit(b), np.float32(-0.0), np.float32(0.0)), out)


# Reference values: f64 arithmetic rounded once to f32 is the correctly rounded f32 result for these operations.
F32_CASES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "v_add_f32_e32 v4, v2, v3": lambda a, b: (_wide(a) + _wide(b)).astype(np.float32),
    "v_sub_f32_e32 v4, v2, v3": lambda a, b: (_wide(a) - _wide(b)).astype(np.float32),
    "v_subrev_f32_e32 v4, v2, v3": lambda a, b: (_wide(b) - _wide(a)).astype(np.float32),
    "v_mul_f32_e32 v4, v2, v3": lambda a, b: (_wide(a) * _wide(b)).astype(np.float32),
    "v_min_f32_e32 v4, v2, v3": _ieee_min,
    "v_max_f32_e32 v4, v2, v3": _ieee_max,
    "v_add_f32_e64 v4, -v2, |v3|": lambda a, b: (-_wide(a) + np.abs(_wide(b))).astype(np.float32),
    # omod scales the rounded result, as the ISA pseudocode writes it (D = result * 2); docs/rdna3.md notes that
    # silicon may round once for a denormal product.
    "v_mul_f32_e64 v4, v2, v3 mul:2": lambda a, b: (_wide(a) * _wide(b)).astype(np.float32) * np.float32(2),
    "v_sqrt_f32_e32 v4, v2": lambda a, b: np.sqrt(_wide(a)).astype(np.float32),
    "v_floor_f32_e32 v4, v2": lambda a, b: np.floor(a),
    "v_trunc_f32_e32 v4, v2": lambda a, b: np.trunc(a),
    "v_rndne_f32_e32 v4, v2": lambda a, b: np.rint(a),
}


@pytest.mark.parametrize("body", list(F32_CASES))
@settings(max_examples=12, deadline=None)
@given(a=lanes_f32, b=lanes_f32)
def test_f32_operations_round_as_ieee_single(body: str, a: np.ndarray, b: np.ndarray) -> None:
    got, _ = run_vector(body, a, b)
    with np.errstate(all="ignore"):
        _same_f32(got, F32_CASES[body](a, b))


def test_clamp_limits_f32_results_to_zero_one() -> None:
    a = np.array([-2, -0.0, 0.25, 1.5, np.inf, -np.inf, np.nan] + [0.5] * 25, np.float32)
    got, _ = run_vector("v_add_f32_e64 v4, v2, 0 clamp", a, a)
    expected = np.array([0, 0, 0.25, 1, 1, 0, 0] + [0.5] * 25, np.float32)
    assert np.array_equal(got.view(np.float32), expected)


def _u64(a: np.ndarray) -> np.ndarray:
    return a.astype(np.uint64)


def _i64(a: np.ndarray) -> np.ndarray:
    return a.view(np.int32).astype(np.int64)


U32_CASES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "v_cls_i32_e32 v4, v2": lambda a, b: np.array([cls_reference(int(x)) for x in a], np.uint32),
    "v_add_nc_u32_e32 v4, v2, v3": lambda a, b: (_u64(a) + b) & 0xFFFFFFFF,
    "v_sub_nc_u32_e32 v4, v2, v3": lambda a, b: (a.astype(np.int64) - b) & 0xFFFFFFFF,
    "v_mul_lo_u32 v4, v2, v3": lambda a, b: (_u64(a) * b) & 0xFFFFFFFF,
    "v_mul_hi_u32 v4, v2, v3": lambda a, b: (_u64(a) * b) >> 32,
    "v_mul_hi_i32 v4, v2, v3": lambda a, b: ((_i64(a) * _i64(b)) >> 32) & 0xFFFFFFFF,
    "v_mul_u32_u24_e32 v4, v2, v3": lambda a, b: ((_u64(a) & 0xFFFFFF) * (b & 0xFFFFFF)) & 0xFFFFFFFF,
    "v_lshlrev_b32_e32 v4, v2, v3": lambda a, b: (_u64(b) << (a & 31)) & 0xFFFFFFFF,
    "v_lshrrev_b32_e32 v4, v2, v3": lambda a, b: b >> (a & 31),
    "v_ashrrev_i32_e32 v4, v2, v3": lambda a, b: (_i64(b) >> (a & 31)) & 0xFFFFFFFF,
    "v_min_i32_e32 v4, v2, v3": lambda a, b: np.minimum(_i64(a), _i64(b)) & 0xFFFFFFFF,
    "v_max_u32_e32 v4, v2, v3": lambda a, b: np.maximum(a, b),
    "v_xor_b32_e32 v4, v2, v3": lambda a, b: a ^ b,
    "v_bfe_u32 v4, v2, 4, 9": lambda a, b: (a >> 4) & 0x1FF,
    "v_bfe_i32 v4, v2, 3, 7": lambda a, b: ((((a >> 3) & 0x7F).astype(np.int64) ^ 0x40) - 0x40) & 0xFFFFFFFF,
    "v_add3_u32 v4, v2, v3, 7": lambda a, b: (_u64(a) + b + 7) & 0xFFFFFFFF,
    "v_cvt_f32_i32_e32 v4, v2": lambda a, b: a.view(np.int32).astype(np.float64).astype(np.float32).view(np.uint32),
    "v_cvt_f32_u32_e32 v4, v2": lambda a, b: a.astype(np.float64).astype(np.float32).view(np.uint32),
    "v_not_b32_e32 v4, v2": lambda a, b: ~a,
    "v_add_co_u32 v4, vcc_lo, v2, v3\nv_cndmask_b32_e64 v5, 0, 1, vcc_lo": lambda a, b: (_u64(a) + b) & 0xFFFFFFFF,
    "v_cmp_lt_i32_e32 vcc_lo, v2, v3\nv_cndmask_b32_e64 v4, 0, 1, vcc_lo": lambda a, b: _i64(a) < _i64(b),
    "v_cmp_gt_u32_e64 s6, v2, v3\nv_cndmask_b32_e64 v4, v2, v3, s6": lambda a, b: np.where(a > b, b, a),
}


@pytest.mark.parametrize("body", list(U32_CASES))
@settings(max_examples=12, deadline=None)
@given(a=lanes_u32, b=lanes_u32)
def test_integer_operations_match_the_isa_definitions(body: str, a: np.ndarray, b: np.ndarray) -> None:
    got, carry = run_vector(body, a, b)
    assert np.array_equal(got, np.asarray(U32_CASES[body](a, b)).astype(np.uint32))
    if body.startswith("v_add_co_u32"):
        assert np.array_equal(carry, ((_u64(a) + b) >> 32).astype(np.uint32))


@settings(max_examples=12, deadline=None)
@given(a=lanes_f32)
def test_float_to_int_conversions_saturate_and_map_nan_to_zero(a: np.ndarray) -> None:
    got, _ = run_vector("v_cvt_i32_f32_e32 v4, v2\nv_cvt_u32_f32_e32 v5, v2", a, a)
    t = np.nan_to_num(np.trunc(a.astype(np.float64)), nan=0.0)
    assert np.array_equal(got.view(np.int32), np.clip(t, -(2**31), 2**31 - 1).astype(np.int32))
    assert np.array_equal(_, np.clip(t, 0, 2**32 - 1).astype(np.uint32))


INLINE_F32 = {"0.5": 0.5, "-0.5": -0.5, "1.0": 1.0, "-1.0": -1.0, "2.0": 2.0, "-2.0": -2.0, "4.0": 4.0, "-4.0": -4.0}


@pytest.mark.parametrize("value", [*range(-16, 65), *INLINE_F32, "0.15915494"])
def test_every_inline_constant_reads_as_the_isa_defines_it(value: int | str) -> None:
    (got, _), zeros = run_vector(f"v_mov_b32_e32 v4, {value}", *[np.zeros(32, np.uint32)] * 2), None
    assert zeros is None
    if isinstance(value, int):
        assert np.all(got == (value & 0xFFFFFFFF))
    elif value == "0.15915494":
        assert np.all(got == 0x3E22F983)  # the ISA's 1/(2*pi) bit pattern
    else:
        assert np.all(got == struct.unpack("<I", struct.pack("<f", INLINE_F32[value]))[0])


def test_inline_integers_sign_extend_to_64_bits() -> None:
    got, hi = run_vector("v_lshlrev_b64 v[4:5], 0, -5", np.zeros(32, np.uint32), np.zeros(32, np.uint32))
    assert np.all(got == 0xFFFFFFFB) and np.all(hi == 0xFFFFFFFF)


def test_64_bit_shifts_and_mad_u64_u32() -> None:
    a = np.arange(32, dtype=np.uint32) * np.uint32(0x9E3779B9)
    b = np.arange(32, dtype=np.uint32) + np.uint32(0xFFFFFF00)
    got, hi = run_vector("v_mad_u64_u32 v[4:5], null, v2, v3, v[2:3]", a, b)
    want = a.astype(object) * b.astype(object) + (a.astype(object) | (b.astype(object) << 32))
    want = np.array([int(w) % 2**64 for w in want], np.uint64)
    assert np.array_equal(got, (want & 0xFFFFFFFF).astype(np.uint32))
    assert np.array_equal(hi, (want >> 32).astype(np.uint32))


def test_vopd_halves_read_their_sources_before_either_writes() -> None:
    a, b = np.arange(32, dtype=np.uint32), np.arange(32, dtype=np.uint32) + 100
    got, y = run_vector("v_mov_b32 v4, v3\nv_dual_mov_b32 v4, v2 :: v_dual_add_nc_u32 v5, v4, v3", a, b)
    assert np.array_equal(got, a) and np.array_equal(y, 2 * b)


def _isa_class(a: np.ndarray) -> np.ndarray:
    bits = a.view(np.uint32)
    quiet = (bits & 0x400000) != 0
    neg = np.signbit(a)
    tiny = (a != 0) & (np.abs(a) < np.float32(1.1754944e-38))
    return np.select(
        [np.isnan(a) & ~quiet, np.isnan(a), np.isinf(a), a == 0, tiny],
        [0, 1, np.where(neg, 2, 9), np.where(neg, 5, 6), np.where(neg, 4, 7)],
        np.where(neg, 3, 8),
    )


@settings(max_examples=20, deadline=None)
@given(a=lanes_f32, masks=lanes_u32)
def test_v_cmp_class_tests_the_isa_class_bit(a: np.ndarray, masks: np.ndarray) -> None:
    a = a.copy()
    a.view(np.uint32)[:2] = [0x7F800001, 0xFF800001]  # signaling NaNs, which hypothesis rarely draws
    got, _ = run_vector("v_cmp_class_f32_e64 s6, v2, v3\nv_cndmask_b32_e64 v4, 0, 1, s6", a, masks & 0x3FF)
    assert np.array_equal(got, ((masks & 0x3FF) >> _isa_class(a)) & 1)


@settings(max_examples=20, deadline=None)
@given(a=lanes_f32, e=st.lists(st.integers(-300, 300), min_size=32, max_size=32))
def test_v_ldexp_f32_scales_by_a_power_of_two(a: np.ndarray, e: list[int]) -> None:
    exponents = np.array(e, np.int32)
    got, _ = run_vector("v_ldexp_f32 v4, v2, v3", a, exponents.view(np.uint32))
    with np.errstate(all="ignore"):
        _same_f32(got, np.ldexp(a.astype(np.float64), exponents).astype(np.float32))


def _lo_hi(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (words & 0xFFFF).astype(np.uint16), (words >> 16).astype(np.uint16)


PACKED_INT: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "v_pk_add_u16": lambda a, b: a.astype(np.int64) + b,
    "v_pk_sub_i16": lambda a, b: a.view(np.int16).astype(np.int64) - b.view(np.int16),
    "v_pk_mul_lo_u16": lambda a, b: a.astype(np.int64) * b,
    "v_pk_lshlrev_b16": lambda a, b: b.astype(np.int64) << (a & 15),
    "v_pk_ashrrev_i16": lambda a, b: b.view(np.int16).astype(np.int64) >> (a & 15),
    "v_pk_max_i16": lambda a, b: np.maximum(a.view(np.int16), b.view(np.int16)).astype(np.int64),
}


@pytest.mark.parametrize("name", list(PACKED_INT))
@pytest.mark.parametrize(
    ("op_sel", "lo_src", "hi_src"), [("", (0, 0), (1, 1)), (" op_sel:[1,0] op_sel_hi:[0,1]", (1, 0), (0, 1))]
)
@settings(max_examples=10, deadline=None)
@given(a=lanes_u32, b=lanes_u32)
def test_packed_integer_math_picks_halves_by_op_sel(
    name: str, op_sel: str, lo_src: tuple[int, int], hi_src: tuple[int, int], a: np.ndarray, b: np.ndarray
) -> None:
    got, _ = run_vector(f"{name} v4, v2, v3{op_sel}", a, b)
    halves = (_lo_hi(a), _lo_hi(b))
    lo = np.asarray(PACKED_INT[name](halves[0][lo_src[0]], halves[1][lo_src[1]])) & 0xFFFF
    hi = np.asarray(PACKED_INT[name](halves[0][hi_src[0]], halves[1][hi_src[1]])) & 0xFFFF
    assert np.array_equal(got, (lo | (hi << 16)).astype(np.uint32))


F16_SPECIAL_BITS = [
    0x0000,
    0x8000,
    0x7C00,
    0xFC00,
    0x7E00,
    0x0001,
    0x83FF,
    0x7BFF,
    0x3C00,
]  # +-0, +-inf, NaN, denormals
halves_f16 = st.lists(
    st.one_of(st.sampled_from(F16_SPECIAL_BITS), st.integers(0, 0xFFFF)), min_size=64, max_size=64
).map(lambda v: np.array(v, np.uint16).view(np.uint32))


@pytest.mark.parametrize(
    ("body", "fn"),
    [
        ("v_pk_add_f16 v4, v2, v3", lambda a, b: a + b),
        ("v_pk_mul_f16 v4, v2, v3", lambda a, b: a * b),
        ("v_pk_fma_f16 v4, v2, v3, v2", lambda a, b: a * b + a),
        ("v_pk_add_f16 v4, v2, v3 neg_lo:[1,0] neg_hi:[0,1]", None),
    ],
)
@settings(max_examples=10, deadline=None)
@given(a=halves_f16, b=halves_f16)
def test_packed_f16_math_rounds_once(
    body: str, fn: Callable[..., np.ndarray] | None, a: np.ndarray, b: np.ndarray
) -> None:
    got, _ = run_vector(body, a, b)
    fa, fb = a.view(np.float16).astype(np.float64), b.view(np.float16).astype(np.float64)
    with np.errstate(all="ignore"):
        if fn is None:  # low result: -a + b, high result: a - b
            want = np.where(np.arange(64) % 2 == 0, -fa + fb, fa - fb).astype(np.float16)
        else:
            want = np.asarray(fn(fa, fb)).astype(np.float16)
    got16, want16 = got.view(np.float16), want
    both_nan = np.isnan(got16) & np.isnan(want16)
    assert np.array_equal(np.where(both_nan, 0, got.view(np.uint16)), np.where(both_nan, 0, want16.view(np.uint16)))
