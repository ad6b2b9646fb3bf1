"""The RDNA3 executor on clang-built gfx1100 kernels: a vector add, a tiled LDS matmul, and the decode cache.

    python benchmarks/bench_rdna3.py [--mode all|vadd|matmul|cache] [--elements 1048576] [--block 256]
                                     [--matmul-n 512] [--repeats 3]

Kernels are OpenCL C built by clang-19 -O2 for gfx1100 and linked by ld.lld-19; each dispatch runs the whole grid
through ``run_dispatch`` on an address space over plain VRAM. Reported:

- vadd: time per dispatch of the 1M-element f32 add in 256-thread workgroups (the decoded program comes from the
  cache after the first run, so the time is execution), lane-instructions per second (32 lane slots per wave per
  instruction) and the ratio to ``numpy.add`` of the same arrays.
- matmul: an N x N f32 matmul in 16 x 16 LDS tiles with barriers, and the ratio of its time to the host-native
  build of the same product (the portable kernel of docs/kernels.md, compiled by ``HostCCompiler`` and run by
  ``HostNativeExecutor``: one thread per output element, no LDS, which the host build cannot express).
- cache: the first dispatch of a code object on a fresh ``ProgramCache`` (instructions decoded, time) against
  the second (0 decoded, time), on a small vector add where decoding is a visible share.
"""

from __future__ import annotations

import argparse
import shutil
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tinyhil.amdgpu.code_object import CodeObject, hidden_kernargs, load_code_object, user_sgprs
from tinyhil.benchtime import best_seconds
from tinyhil.compiler import HostCCompiler
from tinyhil.emulators.amdgpu.executor import HostNativeExecutor, Launch
from tinyhil.emulators.amdgpu.mappings import FlatTranslation
from tinyhil.emulators.amdgpu.memory import AddressSpace, IoRegion, Vram
from tinyhil.emulators.amdgpu.rdna3 import DispatchSetup, DispatchStats, ProgramCache, run_dispatch
from tinyhil.spec.amdhsa import KernelCodeProperty
from tinyhil.spec.code_object import ArgKind, pack_code_object
from tinyhil.spec.code_object import CodeObject as HostCodeObject

SOURCE = """
__kernel void vadd(__global const float *a, __global const float *b, __global float *c, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  if (i < n) c[i] = a[i] + b[i]; }
__kernel void matmul(__global const float *a, __global const float *b, __global float *c, int n) {
  __local float ta[16][16], tb[16][16];
  int tx = __builtin_amdgcn_workitem_id_x(), ty = __builtin_amdgcn_workitem_id_y();
  int row = __builtin_amdgcn_workgroup_id_y() * 16 + ty, col = __builtin_amdgcn_workgroup_id_x() * 16 + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += 16) {
    ta[ty][tx] = a[row * n + k0 + tx];
    tb[ty][tx] = b[(k0 + ty) * n + col];
    __builtin_amdgcn_s_barrier();
    for (int k = 0; k < 16; k++) acc += ta[ty][k] * tb[k][tx];
    __builtin_amdgcn_s_barrier();
  }
  c[row * n + col] = acc; }
"""
HOST_MATMUL = b"""
TH_KERNEL(matmul) {
    TH_PTR(0, const th_f32, a);
    TH_PTR(1, const th_f32, b);
    TH_PTR(2, th_f32, c);
    TH_VAL(3, th_u64, n);
    TH_THREADS {
        th_u64 row = TH_GLOBAL_ID(1), col = TH_GLOBAL_ID(0);
        th_f32 acc = 0.0f;
        for (th_u64 k = 0; k < n; k++) acc += a[row * n + k] * b[k * n + col];
        c[row * n + col] = acc;
    }
}
"""
MB = 1 << 20
TILE = 16
CODE, KERNARG, HOST_CODE, HOST_ARGS, DATA = 0x100000, 0x200000, 0x300000, 0x3F0000, 0x400000
CLANG_FLAGS = ["-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-O2", "-nogpulib"]


def build() -> CodeObject:
    """The benchmark's code object (clang-19 and ld.lld-19 from Debian's clang-19 / lld-19)."""
    clang, lld = shutil.which("clang-19"), shutil.which("ld.lld-19")
    if clang is None or lld is None:
        raise SystemExit("bench_rdna3 needs clang-19 and ld.lld-19 (Debian packages clang-19, lld-19)")
    with tempfile.TemporaryDirectory() as tmp:
        src, obj, out = Path(tmp, "k.cl"), Path(tmp, "k.o"), Path(tmp, "k.co")
        src.write_text(SOURCE)
        subprocess.run([clang, *CLANG_FLAGS, "-c", str(src), "-o", str(obj)], check=True)
        subprocess.run([lld, "-shared", str(obj), "-o", str(out)], check=True)
        return load_code_object(out.read_bytes())


def make_space(data_bytes: int) -> AddressSpace:
    vram = Vram(-(-(DATA + data_bytes) // MB) * MB)
    return AddressSpace(vram, FlatTranslation(vram, vram_at_zero=True, aperture=False), IoRegion("bus"))


def dispatch(
    space: AddressSpace, co: CodeObject, name: str, args: bytes, grid: tuple[int, int, int],
    block: tuple[int, int, int], cache: ProgramCache | None = None,
) -> Callable[[], DispatchStats]:  # fmt: skip
    """Upload ``co`` and the kernargs; returns a function that runs ``name`` once over ``grid`` workgroups."""
    entry = co.upload(space.write, CODE)[name]
    kd = co.kernels[name]
    kernargs = bytearray(hidden_kernargs(kd, grid, block))
    kernargs[: len(args)] = args
    space.write(KERNARG, bytes(kernargs))
    user = user_sgprs(kd, {KernelCodeProperty.ENABLE_SGPR_KERNARG_SEGMENT_PTR: KERNARG})
    pgm = entry >> 8
    setup = DispatchSetup(pgm & 0xFFFFFFFF, pgm >> 32, kd.compute_pgm_rsrc1, kd.dispatch_rsrc2(),
                          kd.compute_pgm_rsrc3, tuple(user), block, grid)  # fmt: skip
    return lambda: run_dispatch(space, setup, cache=cache)


def measure_vadd(co: CodeObject, elements: int, block: int = 256, repeats: int = 3) -> dict[str, float]:
    """Seconds per dispatch, lane-instructions per second and the ratio to numpy, for ``elements`` f32 adds."""
    space = make_space(12 * elements)
    rng = np.random.default_rng(0)
    a, b = rng.random(elements, np.float32), rng.random(elements, np.float32)
    pa, pb, pc = DATA, DATA + 4 * elements, DATA + 8 * elements
    space.write(pa, a)
    space.write(pb, b)
    run = dispatch(space, co, "vadd", struct.pack("<QQQi", pa, pb, pc, elements), (-(-elements // block), 1, 1),
                   (block, 1, 1))  # fmt: skip
    stats: list[DispatchStats] = []
    out = np.empty_like(a)
    times = best_seconds({"emulated": lambda: stats.append(run()), "numpy": lambda: np.add(a, b, out=out)}, repeats)
    got = np.frombuffer(bytes(space.read(pc, 4 * elements)), np.float32)
    if not np.array_equal(got, a + b):
        raise SystemExit("the emulated vector add differs from numpy")
    return {
        "seconds": times["emulated"],
        "lane_instructions_per_second": stats[-1].lane_instructions / times["emulated"],
        "ratio_to_numpy": times["emulated"] / times["numpy"],
    }


def _host_matmul(space: AddressSpace, n: int, pa: int, pb: int, pc: int) -> Callable[[], object]:
    """The portable matmul built by the host C compiler, dispatched by the host-native executor."""
    compiler = HostCCompiler()
    reason = compiler.unavailable_reason()
    if reason is not None:
        raise SystemExit(f"bench_rdna3 --mode matmul needs the host C compiler: {reason}")
    container = HostCodeObject("matmul", (ArgKind.POINTER,) * 3 + (ArgKind.VALUE,), compiler.compile(HOST_MATMUL))
    space.write(HOST_CODE, pack_code_object(container))
    space.write(HOST_ARGS, np.array([pa, pb, pc, n], "<u8"))
    executor = HostNativeExecutor()
    launch = Launch(HOST_CODE, (n // TILE, n // TILE, 1), (TILE, TILE, 1), HOST_ARGS)
    return lambda: executor.dispatch(space, launch)


def measure_matmul(co: CodeObject, n: int, repeats: int = 1) -> dict[str, float]:
    """Seconds for the LDS-tiled N x N matmul, emulated and host-native (both checked against numpy)."""
    if n % TILE:
        raise SystemExit(f"--matmul-n={n}, expected a multiple of {TILE}")
    space = make_space(12 * n * n)
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-8, 8, (n, n)).astype(np.float32) for _ in range(2))  # small integers: exact sums
    pa, pb, pc = DATA, DATA + 4 * n * n, DATA + 8 * n * n
    space.write(pa, a)
    space.write(pb, b)
    run = dispatch(space, co, "matmul", struct.pack("<QQQi", pa, pb, pc, n), (n // TILE, n // TILE, 1),
                   (TILE, TILE, 1))  # fmt: skip
    host = _host_matmul(space, n, pa, pb, pc)
    want = a @ b
    stats: list[DispatchStats] = []
    times = {}
    for name, fn in (("emulated", lambda: stats.append(run())), ("host", host)):
        space.fill(pc, 4 * n * n, 0, dword=True)
        times.update(best_seconds({name: fn}, repeats))
        if not np.array_equal(np.frombuffer(bytes(space.read(pc, 4 * n * n)), np.float32).reshape(n, n), want):
            raise SystemExit(f"the {name} matmul differs from numpy")
    return {
        "seconds": times["emulated"],
        "host_seconds": times["host"],
        "ratio_to_host": times["emulated"] / times["host"],
        "lane_instructions_per_second": stats[-1].lane_instructions / times["emulated"],
    }


def measure_cache(co: CodeObject, elements: int = 4096, repeats: int = 3) -> dict[str, float]:
    """The first and the second dispatch of the vector add on a fresh cache: instructions decoded and seconds."""
    space = make_space(12 * elements)
    args = struct.pack("<QQQi", DATA, DATA + 4 * elements, DATA + 8 * elements, elements)
    best = {"first": float("inf"), "second": float("inf")}
    decoded = {"first": 0, "second": 0}
    for _ in range(repeats):
        run = dispatch(space, co, "vadd", args, (elements // 256, 1, 1), (256, 1, 1), cache=ProgramCache())
        for name in ("first", "second"):
            start = time.perf_counter()
            decoded[name] = run().decoded
            best[name] = min(best[name], time.perf_counter() - start)
    return {"first_seconds": best["first"], "first_decoded": decoded["first"], "second_seconds": best["second"],
            "second_decoded": decoded["second"]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("all", "vadd", "matmul", "cache"), default="all")
    parser.add_argument("--elements", type=int, default=MB, help="vadd f32 elements (default 1048576)")
    parser.add_argument("--block", type=int, default=256, help="vadd threads per workgroup (default 256)")
    parser.add_argument("--matmul-n", type=int, default=512, help="matmul size, a multiple of 16 (default 512)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per side; the best counts (default 3)")
    args = parser.parse_args(argv)
    co = build()
    if args.mode in ("all", "vadd"):
        r = measure_vadd(co, args.elements, args.block, args.repeats)
        rate, ratio = r["lane_instructions_per_second"], r["ratio_to_numpy"]
        print(f"RDNA3 vadd {args.elements} f32, {args.block}-thread groups: {r['seconds'] * 1e3:.1f} ms/dispatch, "
              f"{rate:.3g} lane-instructions/s, {ratio:.0f}x numpy.add")  # fmt: skip
    if args.mode in ("all", "matmul"):
        r = measure_matmul(co, args.matmul_n, max(1, args.repeats // 2))
        print(f"RDNA3 matmul {args.matmul_n}x{args.matmul_n} f32, 16x16 LDS tiles: {r['seconds'] * 1e3:.0f} ms, "
              f"host-native build {r['host_seconds'] * 1e3:.0f} ms ({r['ratio_to_host']:.1f}x), "
              f"{r['lane_instructions_per_second']:.3g} lane-instructions/s")  # fmt: skip
    if args.mode in ("all", "cache"):
        r = measure_cache(co, repeats=args.repeats)
        print(f"RDNA3 decode cache, vadd 4096: first dispatch {r['first_seconds'] * 1e3:.2f} ms "
              f"({r['first_decoded']:.0f} decoded), second {r['second_seconds'] * 1e3:.2f} ms "
              f"({r['second_decoded']:.0f} decoded)")  # fmt: skip
    return 0


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
