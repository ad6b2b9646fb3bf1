"""Kernels built by clang-19 -O2 for gfx1100 run on the RDNA3 executor and match numpy on random inputs."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import numpy as np
import pytest
from support.rdna3 import DATA, SCRATCH, compile_cl, launch, make_space, needs_clang, read
from support.rdna3_corpus import SOURCE, divloop_reference, privsum_reference

from tinyhil.amdgpu.code_object import CodeObject
from tinyhil.emulators.amdgpu.errors import GpuMemoryFault, WaveTrap
from tinyhil.emulators.amdgpu.rdna3 import ProgramCache
from tinyhil.emulators.amdgpu.rdna3.state import SCRATCH_LANE_STRIDE

pytestmark = needs_clang
S_NOP = (0xBF800000).to_bytes(4, "little")  # SOPP s_nop 0


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> CodeObject:
    return compile_cl(SOURCE, Path(tmp_path_factory.mktemp("cl")))


@pytest.mark.parametrize(("n", "block"), [(1000, 256), (4096, 256), (77, 64), (32, 32)])
def test_vector_add_matches_numpy(kernels: CodeObject, n: int, block: int) -> None:
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    space = make_space()
    pa, pb, pc = DATA, DATA + 4 * n, DATA + 8 * n
    space.write(pa, a)
    space.write(pb, b)
    launch(space, kernels, "vadd", struct.pack("<QQQi", pa, pb, pc, n), grid=-(-n // block), block=block)
    np.testing.assert_array_equal(read(space, pc, n, "<f4"), a + b)
    assert not read(space, pc + 4 * n, 8, "<u4").any()  # lanes past n stored nothing


def test_saxpy_matches_numpy(kernels: CodeObject) -> None:
    n, alpha = 3000, np.float32(-1.75)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    space = make_space()
    space.write(DATA, x)
    space.write(DATA + 4 * n, y)
    launch(space, kernels, "saxpy", struct.pack("<f4xQQi", alpha, DATA, DATA + 4 * n, n), grid=12, block=256)
    expected = (alpha.astype(np.float64) * x + y).astype(np.float32)  # v_fmac_f32: one rounding
    np.testing.assert_array_equal(read(space, DATA + 4 * n, n, "<f4"), expected)


def test_divergent_loop_matches_numpy(kernels: CodeObject) -> None:
    n = 2048
    a = np.random.default_rng(2).integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    space = make_space()
    space.write(DATA, a)
    stats = launch(space, kernels, "divloop", struct.pack("<QQ", DATA, DATA + 4 * n), grid=8, block=256)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(read(space, DATA + 4 * n, n, "<i4"), divloop_reference(a))
    assert stats.waves == 64


def test_an_lds_tree_reduction_with_barriers_matches_numpy(kernels: CodeObject) -> None:
    groups = 6
    a = np.random.default_rng(3).integers(-1000, 1000, 256 * groups).astype(np.float32)  # exact in any order
    space = make_space()
    space.write(DATA, a)
    launch(space, kernels, "reduce", struct.pack("<QQ", DATA, DATA + 0x10000), grid=groups, block=256)
    np.testing.assert_array_equal(read(space, DATA + 0x10000, groups, "<f4"), a.reshape(groups, 256).sum(axis=1))


def test_an_lds_histogram_with_atomic_adds_matches_numpy(kernels: CodeObject) -> None:
    groups = 4
    a = np.random.default_rng(4).integers(0, 1 << 20, 128 * groups).astype(np.int32)
    space = make_space()
    space.write(DATA, a)
    launch(space, kernels, "histogram", struct.pack("<QQ", DATA, DATA + 0x10000), grid=groups, block=128)
    want = np.stack([np.bincount(row & 15, minlength=16) for row in a.reshape(groups, 128)])
    np.testing.assert_array_equal(read(space, DATA + 0x10000, 16 * groups, "<i4").reshape(groups, 16), want)


def test_a_tiled_lds_matmul_in_2d_workgroups_matches_numpy(kernels: CodeObject) -> None:
    n = 48
    rng = np.random.default_rng(5)
    a, b = (rng.integers(-8, 8, (n, n)).astype(np.float32) for _ in range(2))  # small integers: exact sums
    space = make_space()
    space.write(DATA, a)
    space.write(DATA + 4 * n * n, b)
    args = struct.pack("<QQQi", DATA, DATA + 4 * n * n, DATA + 8 * n * n, n)
    launch(space, kernels, "matmul", args, grid=(n // 16, n // 16, 1), block=(16, 16, 1))
    np.testing.assert_array_equal(read(space, DATA + 8 * n * n, n * n, "<f4").reshape(n, n), a @ b)


def test_a_prefix_scan_across_two_waves_matches_numpy(kernels: CodeObject) -> None:
    a = np.random.default_rng(6).integers(-100, 100, 64).astype(np.int32)
    space = make_space()
    space.write(DATA, a)
    launch(space, kernels, "scan", struct.pack("<QQ", DATA, DATA + 0x1000), grid=1, block=64)
    np.testing.assert_array_equal(read(space, DATA + 0x1000, 64, "<i4"), np.cumsum(a))


def test_a_wild_pointer_is_a_memory_fault_naming_the_address(kernels: CodeObject) -> None:
    space = make_space()
    wild = 0x7_0000_0000
    with pytest.raises(GpuMemoryFault) as caught:
        launch(space, kernels, "vadd", struct.pack("<QQQi", wild, DATA, DATA, 64), grid=1, block=64)
    assert caught.value.va == wild


def test_an_endless_loop_ends_in_a_wave_trap_within_the_budget(kernels: CodeObject) -> None:
    space = make_space()
    with pytest.raises(WaveTrap, match="step budget of 5000") as caught:
        launch(space, kernels, "spin", struct.pack("<Qi", DATA, 1), grid=1, block=32, step_budget=5000)
    assert caught.value.text  # the disassembly of the instruction it stopped at
    # the next dispatch on the same space runs normally
    space.write(DATA, np.ones(1, np.int32))
    launch(space, kernels, "spin", struct.pack("<Qi", DATA, 1), grid=1, block=32)


def test_a_second_dispatch_of_the_same_code_decodes_nothing(kernels: CodeObject) -> None:
    space, cache = make_space(), ProgramCache()
    a = np.arange(32, dtype=np.float32)
    space.write(DATA, a)
    args = struct.pack("<QQQi", DATA, DATA, DATA + 0x1000, 32)
    first = launch(space, kernels, "vadd", args, grid=1, block=32, cache=cache)
    assert first.decoded == first.steps  # straight-line code: each instruction decoded once
    assert launch(space, kernels, "vadd", args, grid=1, block=32, cache=cache).decoded == 0
    # other bytes at the same address are a new program, decoded afresh
    entry = kernels.kernels["vadd"].entry_vaddr
    image = kernels.image[:entry] + S_NOP + kernels.image[entry + len(S_NOP) :]  # s_clause replaced by s_nop
    again = launch(space, dataclasses.replace(kernels, image=image), "vadd", args, grid=1, block=32, cache=cache)
    assert again.decoded == again.steps
    np.testing.assert_array_equal(read(space, DATA + 0x1000, 32, "<f4"), a + a)


def test_a_global_atomic_histogram_matches_numpy(kernels: CodeObject) -> None:
    n = 4096
    a = np.random.default_rng(7).integers(0, 1 << 20, n).astype(np.int32)
    space = make_space()
    space.write(DATA, a)
    bins, firsts = DATA + 4 * n, DATA + 4 * n + 0x1000
    launch(space, kernels, "ghist", struct.pack("<QQQ", DATA, bins, firsts), grid=n // 256, block=256)
    np.testing.assert_array_equal(read(space, bins, 64, "<i4"), np.bincount(a & 63, minlength=64))
    np.testing.assert_array_equal(read(space, firsts, 8, "<i4"), [a[(a & 7) == k].max() for k in range(8)])


def test_a_kernel_indexing_a_private_array_uses_scratch_and_matches_numpy(kernels: CodeObject) -> None:
    assert kernels.kernels["privsum"].private_segment_fixed_size > 0  # clang put the array in scratch
    threads = 256
    a = np.random.default_rng(8).integers(-1000, 1000, (threads, 32)).astype(np.int32)
    space = make_space()
    space.write(DATA, a)
    launch(space, kernels, "privsum", struct.pack("<QQ", DATA, DATA + a.nbytes), grid=threads // 64, block=64)
    np.testing.assert_array_equal(read(space, DATA + a.nbytes, threads, "<i4"), privsum_reference(a))


def test_more_waves_than_scratch_slots_run_a_batch_of_workgroups_at_a_time(kernels: CodeObject) -> None:
    threads, slots = 512, 4  # 16 waves of 2-wave workgroups through 4 slots: 4 batches of 2 workgroups
    a = np.random.default_rng(12).integers(-1000, 1000, (threads, 32)).astype(np.int32)
    space = make_space()
    space.write(DATA, a)
    stats = launch(space, kernels, "privsum", struct.pack("<QQ", DATA, DATA + a.nbytes), grid=threads // 64, block=64,
                   scratch_waves=slots)  # fmt: skip
    np.testing.assert_array_equal(read(space, DATA + a.nbytes, threads, "<i4"), privsum_reference(a))
    assert stats.waves == threads // 32
    wave_bytes = -(-kernels.kernels["privsum"].private_segment_fixed_size // 4) * SCRATCH_LANE_STRIDE
    assert read(space, SCRATCH, slots * wave_bytes, "<u1").any()
    assert not read(space, SCRATCH + slots * wave_bytes, wave_bytes, "<u1").any()  # no wave beyond the slots


def test_scratch_slots_that_cannot_hold_one_workgroup_trap(kernels: CodeObject) -> None:
    with pytest.raises(WaveTrap, match=r"1 scratch slots .* cannot hold one workgroup of 2 waves"):
        launch(make_space(), kernels, "privsum", struct.pack("<QQ", DATA, DATA), grid=1, block=64, scratch_waves=1)


def test_a_kernel_using_scratch_without_scratch_memory_traps(kernels: CodeObject) -> None:
    space = make_space()
    args = struct.pack("<QQ", DATA, DATA + 0x10000)
    with pytest.raises(WaveTrap, match="scratch_base is not set") as caught:
        launch(space, kernels, "privsum", args, grid=1, block=64, scratch=False)
    assert caught.value.text.startswith("scratch_")


def test_packed_f16_math_matches_numpy(kernels: CodeObject) -> None:
    n = 2048
    rng = np.random.default_rng(9)
    a, b = (rng.standard_normal(2 * n).astype(np.float16) for _ in range(2))
    space = make_space()
    space.write(DATA, a)
    space.write(DATA + a.nbytes, b)
    launch(space, kernels, "pkfma", struct.pack("<QQQ", DATA, DATA + a.nbytes, DATA + 2 * a.nbytes), grid=8, block=256)
    got = read(space, DATA + 2 * a.nbytes, 2 * n, "<f2")
    fused = (a.astype(np.float64) * b + a).astype(np.float16)  # v_pk_fma_f16: one rounding
    np.testing.assert_array_equal(got, fused)


def test_conversions_between_f16_f32_and_f64_match_numpy(kernels: CodeObject) -> None:
    n = 512
    a = (np.random.default_rng(10).standard_normal(n) * 1000).astype(np.float32)
    space = make_space()
    space.write(DATA, a)
    h, back, d = DATA + 0x1000, DATA + 0x2000, DATA + 0x3000
    launch(space, kernels, "convert", struct.pack("<QQQQ", DATA, h, back, d), grid=n // 128, block=128)
    halves = a.astype(np.float16)
    np.testing.assert_array_equal(read(space, h, n, "<f2"), halves)
    np.testing.assert_array_equal(read(space, back, n, "<f4"), halves.astype(np.float32) + np.float32(1))
    np.testing.assert_array_equal(read(space, d, n, "<f8"), a.astype(np.float64) * 3.0 + np.arange(n))


def test_division_and_libm_style_math_match_numpy(kernels: CodeObject) -> None:
    """f32 division (v_rcp_f32 refined by FMAs: OpenCL allows 2.5 ULP), i32 division and remainder (exact), and
    sqrt/exp/log as LLVM expands them (OpenCL's bounds: 3 ULP for sqrt/exp/log)."""
    n = 256
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    space = make_space()
    space.write(DATA, a)
    space.write(DATA + 0x1000, b)
    launch(space, kernels, "fdiv", struct.pack("<QQQ", DATA, DATA + 0x1000, DATA + 0x2000), grid=1, block=n)
    np.testing.assert_array_max_ulp(read(space, DATA + 0x2000, n, "<f4"), a / b, maxulp=2)
    x = (a * 100).astype(np.float32)
    space.write(DATA, x)
    launch(space, kernels, "fmath", struct.pack("<QQ", DATA, DATA + 0x2000), grid=1, block=n)
    want = np.sqrt(np.abs(x.astype(np.float64))) + np.exp(x * 0.01) + np.log(np.abs(x.astype(np.float64)) + 1)
    np.testing.assert_allclose(read(space, DATA + 0x2000, n, "<f4"), want, rtol=4e-7)
    p = rng.integers(-(10**6), 10**6, n).astype(np.int32)
    q = (rng.integers(1, 1000, n) * rng.choice([-1, 1], n)).astype(np.int32)
    space.write(DATA, p)
    space.write(DATA + 0x1000, q)
    launch(space, kernels, "idiv", struct.pack("<QQQ", DATA, DATA + 0x1000, DATA + 0x2000), grid=1, block=n)
    quotient = np.trunc(p / q).astype(np.int64)  # C division truncates toward zero
    np.testing.assert_array_equal(read(space, DATA + 0x2000, n, "<i4"), quotient + (p - quotient * q))
