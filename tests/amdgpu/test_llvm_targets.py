"""The LLVM renderer on MOCKUSB+AMD and MOCKKFD+AMD: real gfx1100 code objects from ``dev.compile``, dispatched by the
AMD runtime through PM4 and run by the RDNA3 wave executor, compared with numpy; kernel faults reach the driver as
typed errors and the next dispatch on the same device runs."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from support.rdna3 import needs_clang
from support.rdna3_corpus import SOURCE, divloop_reference, privsum_reference

from tinyhil.amdgpu.errors import KernelLoadError, QueueStopped
from tinyhil.amdgpu.gpu_kernel import MAX_SCRATCH_WAVES
from tinyhil.amdgpu.interfaces import GpuPointer
from tinyhil.compiler_amdgpu import AmdgpuCompiler
from tinyhil.device import Buffer, Device, Program
from tinyhil.emulators.amdgpu.pm4 import Pm4Engine
from tinyhil.emulators.amdgpu.rdna3.executor import ProgramCache
from tinyhil.errors import DeviceError
from tinyhil.registry import open_target
from tinyhil.spec.amdgpu_pm4 import Pm4Op
from tinyhil.spec.amdhsa import EM_AMDGPU

pytestmark = needs_clang

TARGETS = ["MOCKUSB+AMD:LLVM:gfx1100", "MOCKKFD+AMD:LLVM:gfx1100"]
# Both drivers learn that a wave trapped as a stopped compute queue: the USB path from its IH ring, the KFD path from
# amdkfd's hardware-exception event (docs/amdgpu.md "Kernel executor").
PORTABLE_ADD = b"""TH_KERNEL(vector_add) {
    TH_PTR(0, const th_f32, a);
    TH_PTR(1, const th_f32, b);
    TH_PTR(2, th_f32, c);
    TH_VAL(3, th_u64, n);
    TH_THREADS {
        th_u64 i = TH_GLOBAL_ID(0);
        if (i < n) c[i] = a[i] + b[i];
    }
}
"""
TRAP = b'TH_KERNEL(trap) { TH_PTR(0, th_u32, x); TH_THREADS { __asm__ volatile("s_trap 2"); x[0] = 1; } }'
STORE = b"TH_KERNEL(store) { TH_PTR(0, th_u32, x); TH_THREADS { x[TH_GLOBAL_ID(0)] = 7; } }"
SPIN = b"TH_KERNEL(spin) { TH_PTR(0, volatile th_u32, x); TH_THREADS { while (x[0] != 5) { x[1] += 1; } } }"


@pytest.fixture(params=TARGETS, scope="module")
def dev(request: pytest.FixtureRequest) -> Iterator[Device]:
    device = open_target(request.param)
    yield device
    device.close()


@pytest.fixture(scope="module")
def corpus(dev: Device) -> dict[str, Program]:
    names = [
        "vadd",
        "saxpy",
        "divloop",
        "reduce",
        "histogram",
        "matmul",
        "scan",
        "ghist",
        "privsum",
        "pkfma",
        "convert",
    ]
    return {name: dev.compile(SOURCE.encode(), name) for name in names}


def _put(dev: Device, array: np.ndarray) -> Buffer:
    buf = dev.alloc(array.nbytes)
    dev.copyin(buf, array.tobytes())
    return buf


def _get(dev: Device, buf: Buffer, dtype: str, count: int) -> np.ndarray:
    return np.frombuffer(bytes(dev.copyout(buf, count * np.dtype(dtype).itemsize)), dtype)


def test_the_llvm_renderer_builds_an_amdgpu_elf_that_the_wave_executor_runs(
    dev: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = dev.compile(PORTABLE_ADD, "vector_add")
    assert program.binary[:4] == b"\x7fELF" and int.from_bytes(program.binary[18:20], "little") == EM_AMDGPU
    cache = ProgramCache()
    from tinyhil.emulators.amdgpu.rdna3 import executor

    monkeypatch.setattr(executor, "_DEFAULT_CACHE", cache)
    n = 1000
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = dev.alloc(4 * n)
    dev.exec(program, -(-n // 256), 256, [_put(dev, a), _put(dev, b), out, n])
    np.testing.assert_array_equal(_get(dev, out, "<f4", n), a + b)
    (decoded,) = cache._programs.values()  # the executor decoded this dispatch's machine code
    assert any(inst.name == "global_store_b32" for inst, _ in decoded.decoded.values())


@pytest.mark.parametrize(("n", "block"), [(1000, 256), (77, 64)])
def test_vector_add_matches_numpy(dev: Device, corpus: dict[str, Program], n: int, block: int) -> None:
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = dev.alloc(4 * n)
    dev.exec(corpus["vadd"], -(-n // block), block, [_put(dev, a), _put(dev, b), out, n])
    np.testing.assert_array_equal(_get(dev, out, "<f4", n), a + b)


def test_saxpy_matches_numpy(dev: Device, corpus: dict[str, Program]) -> None:
    n, alpha = 3000, np.float32(-1.75)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    ybuf = _put(dev, y)
    alpha_bits = int(np.array(alpha).view(np.uint32))
    dev.exec(corpus["saxpy"], 12, 256, [alpha_bits, _put(dev, x), ybuf, n])
    expected = (alpha.astype(np.float64) * x + y).astype(np.float32)  # v_fmac_f32: one rounding
    np.testing.assert_array_equal(_get(dev, ybuf, "<f4", n), expected)


def test_a_divergent_loop_matches_numpy(dev: Device, corpus: dict[str, Program]) -> None:
    n = 2048
    a = np.random.default_rng(2).integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    out = dev.alloc(4 * n)
    dev.exec(corpus["divloop"], 8, 256, [_put(dev, a), out])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(_get(dev, out, "<i4", n), divloop_reference(a))


def test_an_lds_reduction_with_barriers_matches_numpy(dev: Device, corpus: dict[str, Program]) -> None:
    groups = 6
    a = np.random.default_rng(3).integers(-1000, 1000, 256 * groups).astype(np.float32)
    out = dev.alloc(4 * groups)
    dev.exec(corpus["reduce"], groups, 256, [_put(dev, a), out])
    np.testing.assert_array_equal(_get(dev, out, "<f4", groups), a.reshape(groups, 256).sum(axis=1))


def test_an_lds_histogram_with_atomics_matches_numpy(dev: Device, corpus: dict[str, Program]) -> None:
    groups = 4
    a = np.random.default_rng(4).integers(0, 1 << 20, 128 * groups).astype(np.int32)
    out = dev.alloc(64 * groups)
    dev.exec(corpus["histogram"], groups, 128, [_put(dev, a), out])
    want = np.stack([np.bincount(row & 15, minlength=16) for row in a.reshape(groups, 128)])
    np.testing.assert_array_equal(_get(dev, out, "<i4", 16 * groups).reshape(groups, 16), want)


def test_a_tiled_lds_matmul_matches_numpy(dev: Device, corpus: dict[str, Program]) -> None:
    n = 32
    rng = np.random.default_rng(5)
    a, b = (rng.integers(-8, 8, (n, n)).astype(np.float32) for _ in range(2))  # small integers: exact sums
    out = dev.alloc(4 * n * n)
    dev.exec(corpus["matmul"], (n // 16, n // 16), (16, 16), [_put(dev, a), _put(dev, b), out, n])
    np.testing.assert_array_equal(_get(dev, out, "<f4", n * n).reshape(n, n), a @ b)


def test_a_prefix_scan_matches_numpy(dev: Device, corpus: dict[str, Program]) -> None:
    a = np.random.default_rng(6).integers(-100, 100, 64).astype(np.int32)
    out = dev.alloc(4 * 64)
    dev.exec(corpus["scan"], 1, 64, [_put(dev, a), out])
    np.testing.assert_array_equal(_get(dev, out, "<i4", 64), np.cumsum(a))


def test_a_global_atomic_histogram_matches_numpy(dev: Device, corpus: dict[str, Program]) -> None:
    n = 4096
    a = np.random.default_rng(7).integers(0, 1 << 20, n).astype(np.int32)
    bins, firsts = dev.alloc(64 * 4), dev.alloc(8 * 4)
    dev.fill(bins, 0)
    dev.fill(firsts, 0)
    dev.exec(corpus["ghist"], n // 256, 256, [_put(dev, a), bins, firsts])
    np.testing.assert_array_equal(_get(dev, bins, "<i4", 64), np.bincount(a & 63, minlength=64))
    np.testing.assert_array_equal(_get(dev, firsts, "<i4", 8), [a[(a & 7) == k].max() for k in range(8)])


@pytest.mark.parametrize("threads", [256, 32 * (MAX_SCRATCH_WAVES + 64)])
def test_a_kernel_with_a_private_array_in_scratch_matches_numpy(
    dev: Device, corpus: dict[str, Program], threads: int
) -> None:
    a = np.random.default_rng(threads).integers(-1000, 1000, (threads, 32)).astype(np.int32)
    out = dev.alloc(4 * threads)
    dev.exec(corpus["privsum"], threads // 64, 64, [_put(dev, a), out])  # the larger: more waves than slots
    np.testing.assert_array_equal(_get(dev, out, "<i4", threads), privsum_reference(a))


def test_packed_f16_math_matches_numpy(dev: Device, corpus: dict[str, Program]) -> None:
    n = 2048
    rng = np.random.default_rng(9)
    a, b = (rng.standard_normal(2 * n).astype(np.float16) for _ in range(2))
    out = dev.alloc(a.nbytes)
    dev.exec(corpus["pkfma"], n // 256, 256, [_put(dev, a), _put(dev, b), out])
    fused = (a.astype(np.float64) * b + a).astype(np.float16)  # v_pk_fma_f16: one rounding
    np.testing.assert_array_equal(_get(dev, out, "<f2", 2 * n), fused)


def test_conversions_between_f16_f32_and_f64_match_numpy(dev: Device, corpus: dict[str, Program]) -> None:
    n = 512
    a = (np.random.default_rng(10).standard_normal(n) * 1000).astype(np.float32)
    h, back, d = dev.alloc(2 * n), dev.alloc(4 * n), dev.alloc(8 * n)
    dev.exec(corpus["convert"], n // 128, 128, [_put(dev, a), h, back, d])
    halves = a.astype(np.float16)
    np.testing.assert_array_equal(_get(dev, h, "<f2", n), halves)
    np.testing.assert_array_equal(_get(dev, back, "<f4", n), halves.astype(np.float32) + np.float32(1))
    np.testing.assert_array_equal(_get(dev, d, "<f8", n), a.astype(np.float64) * 3.0 + np.arange(n))


def _stopped_at_the_dispatch(error: QueueStopped) -> None:
    assert error.queue.startswith("compute") and error.opcode == Pm4Op.DISPATCH_DIRECT


def _next_dispatch_runs(dev: Device) -> None:
    program = dev.compile(STORE, "store")
    out = dev.alloc(4 * 32)
    dev.exec(program, 1, 32, [out])
    np.testing.assert_array_equal(_get(dev, out, "<u4", 32), np.full(32, 7, np.uint32))


def test_an_unimplemented_instruction_is_a_driver_visible_error_and_the_device_runs_on(dev: Device) -> None:
    out = dev.alloc(64)
    dev.exec(dev.compile(TRAP, "trap"), 1, 32, [out])
    with pytest.raises(QueueStopped) as caught:
        dev.synchronize()
    _stopped_at_the_dispatch(caught.value)
    _next_dispatch_runs(dev)


def test_a_wild_pointer_is_a_memory_fault_naming_the_address_and_the_device_runs_on(dev: Device) -> None:
    wild = 0x7FFF_0000_0000
    dev.exec(dev.compile(STORE, "store"), 1, 32, [GpuPointer(wild)])
    with pytest.raises(DeviceError, match=f"{wild:#x}"):
        dev.synchronize()
    _next_dispatch_runs(dev)


def test_an_endless_loop_ends_at_the_step_budget_and_the_device_runs_on(
    dev: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Pm4Engine, "WAVE_STEP_BUDGET", 2000)
    out = dev.alloc(64)
    dev.fill(out, 0)
    dev.exec(dev.compile(SPIN, "spin"), 1, 32, [out])
    with pytest.raises(QueueStopped) as caught:
        dev.synchronize()
    _stopped_at_the_dispatch(caught.value)
    _next_dispatch_runs(dev)


def test_a_gfx1201_code_object_is_refused_at_load_naming_the_arch() -> None:
    program = Program("store", AmdgpuCompiler("gfx1201").compile(STORE))  # MOCKKFD+AMD:LLVM:gfx1201 is unavailable
    refused = r"built for gfx1201 \(e_flags 0x[0-9a-f]+\), expected gfx1100"
    with open_target("MOCKKFD+AMD:LLVM:gfx1100") as device, pytest.raises(KernelLoadError, match=refused):
        device.exec(program, 1, 32, [device.alloc(128)])
