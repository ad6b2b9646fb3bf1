"""Correctly rounded f32 and f64 division as clang builds it (v_div_scale, v_rcp, FMAs, v_div_fmas, v_div_fixup)
gives numpy's quotient where the quotient and the reciprocal stay normal (f32 bit for bit; f64 within 1 ULP, as
the model's v_fma_f64 is not fused), and IEEE's special cases exactly.
(Quotients that underflow to denormals or zero take scaling paths the model does not match yet: docs/rdna3.md.)"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from support.rdna3 import DATA, compile_cl, launch, make_space, needs_clang, read

from tinyhil.amdgpu.code_object import CodeObject

pytestmark = needs_clang
SOURCE = """
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void div32(__global const float *a, __global const float *b, __global float *c) {
  int i = __builtin_amdgcn_workgroup_id_x() * 256 + __builtin_amdgcn_workitem_id_x(); c[i] = a[i] / b[i]; }
__kernel void div64(__global const double *a, __global const double *b, __global double *c) {
  int i = __builtin_amdgcn_workgroup_id_x() * 256 + __builtin_amdgcn_workitem_id_x(); c[i] = a[i] / b[i]; }
"""
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -3.0]


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> CodeObject:
    return compile_cl(SOURCE, Path(tmp_path_factory.mktemp("div")), ["-cl-fp32-correctly-rounded-divide-sqrt"])


def _operands(dtype: type[np.floating], n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random mantissas over half the exponent range (so quotients and reciprocals stay normal), and every pair of
    special values."""
    info = np.finfo(dtype)
    rng = np.random.default_rng(seed)
    exponents = rng.integers(info.minexp // 2, info.maxexp // 2, (2, n))
    a, b = (np.ldexp(rng.uniform(0.5, 1, n) * rng.choice([-1, 1], n), e).astype(dtype) for e in exponents)
    pairs = np.array([(x, y) for x in SPECIAL for y in SPECIAL], dtype)
    return np.concatenate([a, pairs[:, 0]]), np.concatenate([b, pairs[:, 1]])


@pytest.mark.parametrize(("name", "dtype"), [("div32", np.float32), ("div64", np.float64)])
@pytest.mark.parametrize("seed", [1, 2])
def test_division_is_correctly_rounded(kernels: CodeObject, name: str, dtype: type[np.floating], seed: int) -> None:
    a, b = _operands(dtype, 2048 - len(SPECIAL) ** 2, seed)
    n, size = len(a), np.dtype(dtype).itemsize
    space = make_space()
    space.write(DATA, a)
    space.write(DATA + n * size, b)
    args = struct.pack("<QQQ", DATA, DATA + n * size, DATA + 2 * n * size)
    launch(space, kernels, name, args, grid=n // 256, block=256)
    got = read(space, DATA + 2 * n * size, n, np.dtype(dtype).str)
    with np.errstate(all="ignore"):
        want = a / b
    same = (got.view(f"u{size}") == want.view(f"u{size}")) | (np.isnan(got) & np.isnan(want))
    if dtype is np.float64:  # one ULP either way, finite results only
        close = np.isfinite(want) & (np.abs(got.view(np.int64) - want.view(np.int64)) <= 1)
        same |= close & (np.signbit(got) == np.signbit(want))
    special = np.arange(n) >= n - len(SPECIAL) ** 2
    assert (got[special].view(f"u{size}") == want[special].view(f"u{size}"))[~np.isnan(want[special])].all()
    assert same.all(), (a[~same][:5], b[~same][:5], got[~same][:5], want[~same][:5])
