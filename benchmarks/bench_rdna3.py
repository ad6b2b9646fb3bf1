"""The RDNA3 executor on a clang-built gfx1100 vector add, against numpy on the same data, side by side in one run.

    python benchmarks/bench_rdna3.py [--elements 1048576] [--block 256] [--repeats 3]

The kernel is OpenCL C built by clang-19 -O2 for gfx1100 and linked by ld.lld-19; each dispatch runs the whole
grid through ``run_dispatch`` on an address space over plain VRAM (the decoded program comes from the cache after
the first run, so the times are execution, not decoding). Reported: time per dispatch, lane-instructions per
second (32 lane slots per wave per instruction) and the ratio of the dispatch time to ``numpy.add`` of the same
arrays. The goal of issue 28 is <= 50 ms per 1M-element dispatch on this machine.
"""

from __future__ import annotations

import argparse
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from tinyhil.amdgpu.code_object import CodeObject, hidden_kernargs, load_code_object, user_sgprs
from tinyhil.benchtime import best_seconds
from tinyhil.emulators.amdgpu.mappings import FlatTranslation
from tinyhil.emulators.amdgpu.memory import AddressSpace, IoRegion, Vram
from tinyhil.emulators.amdgpu.rdna3 import DispatchSetup, DispatchStats, run_dispatch
from tinyhil.spec.amdhsa import KernelCodeProperty

SOURCE = """
__kernel void vadd(__global const float *a, __global const float *b, __global float *c, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  if (i < n) c[i] = a[i] + b[i]; }
"""
MB = 1 << 20
CODE, KERNARG, DATA = 0x100000, 0x200000, 0x400000
CLANG_FLAGS = ["-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-O2", "-nogpulib"]


def build() -> CodeObject:
    """The vector-add code object (clang-19 and ld.lld-19 from Debian's clang-19 / lld-19)."""
    clang, lld = shutil.which("clang-19"), shutil.which("ld.lld-19")
    if clang is None or lld is None:
        raise SystemExit("bench_rdna3 needs clang-19 and ld.lld-19 (Debian packages clang-19, lld-19)")
    with tempfile.TemporaryDirectory() as tmp:
        src, obj, out = Path(tmp, "k.cl"), Path(tmp, "k.o"), Path(tmp, "k.co")
        src.write_text(SOURCE)
        subprocess.run([clang, *CLANG_FLAGS, "-c", str(src), "-o", str(obj)], check=True)
        subprocess.run([lld, "-shared", str(obj), "-o", str(out)], check=True)
        return load_code_object(out.read_bytes())


def measure(elements: int, block: int = 256, repeats: int = 3) -> dict[str, float]:
    """Seconds per dispatch, lane-instructions per second and the ratio to numpy, for ``elements`` f32 adds."""
    co = build()
    vram = Vram(-(-(DATA + 12 * elements) // MB) * MB)
    space = AddressSpace(vram, FlatTranslation(vram, vram_at_zero=True, aperture=False), IoRegion("bus"))
    entry = co.upload(space.write, CODE)["vadd"]
    kd = co.kernels["vadd"]
    rng = np.random.default_rng(0)
    a, b = rng.random(elements, np.float32), rng.random(elements, np.float32)
    pa, pb, pc = DATA, DATA + 4 * elements, DATA + 8 * elements
    space.write(pa, a)
    space.write(pb, b)
    grid = (-(-elements // block), 1, 1)
    kernargs = bytearray(hidden_kernargs(kd, grid, (block, 1, 1)))
    kernargs[:28] = struct.pack("<QQQi", pa, pb, pc, elements)
    space.write(KERNARG, bytes(kernargs))
    user = user_sgprs(kd, {KernelCodeProperty.ENABLE_SGPR_KERNARG_SEGMENT_PTR: KERNARG})
    pgm = entry >> 8
    setup = DispatchSetup(pgm & 0xFFFFFFFF, pgm >> 32, kd.compute_pgm_rsrc1, kd.dispatch_rsrc2(),
                          kd.compute_pgm_rsrc3, tuple(user), (block, 1, 1), grid)  # fmt: skip
    stats: list[DispatchStats] = []
    out = np.empty_like(a)
    times = best_seconds({"emulated": lambda: stats.append(run_dispatch(space, setup)),
                          "numpy": lambda: np.add(a, b, out=out)}, repeats)  # fmt: skip
    got = np.frombuffer(bytes(space.read(pc, 4 * elements)), np.float32)
    assert np.array_equal(got, a + b), "the emulated vector add differs from numpy"
    return {
        "seconds": times["emulated"],
        "lane_instructions_per_second": stats[-1].lane_instructions / times["emulated"],
        "wave_instructions": float(stats[-1].wave_instructions),
        "ratio_to_numpy": times["emulated"] / times["numpy"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--elements", type=int, default=MB, help="f32 elements (default 1048576)")
    parser.add_argument("--block", type=int, default=256, help="threads per workgroup (default 256)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per side; the best counts (default 3)")
    args = parser.parse_args(argv)
    result = measure(args.elements, args.block, args.repeats)
    print(f"RDNA3 vadd {args.elements} f32, {args.block}-thread groups: {result['seconds'] * 1e3:.1f} ms/dispatch")
    print(f"RDNA3 lane-instructions/s: {result['lane_instructions_per_second']:.3g}")
    print(f"RDNA3 dispatch / numpy.add: {result['ratio_to_numpy']:.0f}x")
    return 0


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
