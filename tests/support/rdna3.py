"""Build and run gfx1100 code for the RDNA3 executor tests: llvm-mc / clang-19 / ld.lld-19, an address space over
plain VRAM, and a launcher that sets a dispatch up as a driver does (kernargs, user SGPRs, registers)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from tinyhil.amdgpu.code_object import CodeObject, hidden_kernargs, load_code_object, user_sgprs
from tinyhil.emulators.amdgpu.mappings import FlatTranslation
from tinyhil.emulators.amdgpu.memory import AddressSpace, IoRegion, Vram
from tinyhil.emulators.amdgpu.rdna3 import DispatchSetup, DispatchStats, ProgramCache, run_dispatch
from tinyhil.emulators.amdgpu.rdna3.state import SCRATCH_LANE_STRIDE
from tinyhil.spec.amdhsa import KernelCodeProperty, Rsrc1, Rsrc2

LLVM_MC = shutil.which("llvm-mc-19") or shutil.which("llvm-mc")
CLANG = shutil.which("clang-19")
LLD = shutil.which("ld.lld-19")
MISSING_LLVM = "needs llvm-mc from Debian package llvm-19 (apt-get install llvm-19)"
MISSING_CLANG = "needs clang-19 and ld.lld-19 (Debian packages clang-19, lld-19, llvm-19)"
needs_llvm_mc = pytest.mark.skipif(LLVM_MC is None, reason=MISSING_LLVM)
needs_clang = pytest.mark.skipif(CLANG is None or LLD is None, reason=MISSING_CLANG)
MC_ARGS = ["-arch=amdgcn", "-mcpu=gfx1100", "-show-encoding"]
CODE_BASE = 0x100000
KERNARG = 0x200000
DATA = 0x400000
SCRATCH = 0x2000000  # the dispatch's scratch memory, when a kernel has a private segment
VRAM_BYTES = 64 << 20
# The float fields clang -O2 writes into a gfx1100 descriptor: denormals kept (f32 and f16/f64), DX10 clamp, IEEE.
CLANG_FLOAT_MODE = (3 << Rsrc1.FLOAT_DENORM_MODE_32) | (3 << Rsrc1.FLOAT_DENORM_MODE_16_64) | (
    1 << Rsrc1.ENABLE_DX10_CLAMP) | (1 << Rsrc1.ENABLE_IEEE_MODE)  # fmt: skip


def make_space(vram_bytes: int = VRAM_BYTES) -> AddressSpace:
    """An address space over plain VRAM at GPU address 0 (no system aperture)."""
    vram = Vram(vram_bytes)
    return AddressSpace(vram, FlatTranslation(vram, vram_at_zero=True, aperture=False), IoRegion("bus"))


def make_space_with_mappings(vram_bytes: int = VRAM_BYTES) -> tuple[AddressSpace, FlatTranslation]:
    """:func:`make_space`, and its translation (to map more, read-only for instance)."""
    vram = Vram(vram_bytes)
    mappings = FlatTranslation(vram, vram_at_zero=True, aperture=False)
    return AddressSpace(vram, mappings, IoRegion("bus")), mappings


def mc_encode(lines: Sequence[str]) -> list[bytes]:
    """Each instruction's bytes, as llvm-mc encodes them for gfx1100."""
    assert LLVM_MC is not None
    run = subprocess.run(
        [LLVM_MC, *MC_ARGS], input="\n".join(lines) + "\n", capture_output=True, text=True, check=False
    )
    if run.returncode:
        raise AssertionError(f"llvm-mc rejected the program:\n{run.stderr}")
    return [bytes(int(x, 16) for x in m.split(",")) for m in re.findall(r"encoding: \[([^\]]*)\]", run.stdout)]


def assemble(source: str) -> bytes:
    """A program's machine code (branch offsets written as numbers, no labels)."""
    lines = [line.strip() for line in source.strip().splitlines() if line.strip()]
    return b"".join(mc_encode(lines))


def compile_cl(source: str, workdir: Path, extra_flags: Sequence[str] = ()) -> CodeObject:
    """An OpenCL C source built by clang-19 at -O2 for gfx1100 (plus ``extra_flags``) and linked by ld.lld-19 into
    a code object."""
    assert CLANG is not None and LLD is not None
    src, obj, out = workdir / "k.cl", workdir / "k.o", workdir / "k.co"
    src.write_text(source)
    flags = ["-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-O2", "-nogpulib"]
    subprocess.run([CLANG, *flags, *extra_flags, "-c", str(src), "-o", str(obj)], check=True, capture_output=True)
    subprocess.run([LLD, "-shared", str(obj), "-o", str(out)], check=True, capture_output=True)
    return load_code_object(out.read_bytes())


def run_code(
    space: AddressSpace,
    code: bytes,
    *,
    user_data: Sequence[int] = (),
    threads: int = 32,
    groups: int = 1,
    vgpr_granules: int = 1,
    lds_granules: int = 0,
    step_budget: int = 10_000,
    scratch_wave_bytes: int = 0,
    rsrc1_float: int = CLANG_FLOAT_MODE,
) -> DispatchStats:
    """Run raw machine code: user SGPRs s0.. from ``user_data``, workgroup id x after them, v0 the thread id;
    with ``scratch_wave_bytes``, scratch memory at ``SCRATCH`` and the scratch wave offset after the group id;
    ``rsrc1_float`` is ORed into COMPUTE_PGM_RSRC1 (its float mode fields)."""
    space.write(CODE_BASE, code + b"\0" * 64)
    rsrc1 = (vgpr_granules - 1) | rsrc1_float
    rsrc2 = (len(user_data) << 1) | (1 << 7) | (lds_granules << 15)
    rsrc2 |= bool(scratch_wave_bytes) << Rsrc2.ENABLE_PRIVATE_SEGMENT
    setup = DispatchSetup(CODE_BASE >> 8, 0, rsrc1, rsrc2, user_data=tuple(user_data), num_thread=(threads, 1, 1),
                          grid=(groups, 1, 1), scratch_base=SCRATCH if scratch_wave_bytes else None,
                          scratch_wave_bytes=scratch_wave_bytes)  # fmt: skip
    return run_dispatch(space, setup, step_budget=step_budget, code_window_bytes=len(code) + 64)


def launch(
    space: AddressSpace,
    co: CodeObject,
    name: str,
    args: bytes,
    *,
    grid: int | tuple[int, int, int],
    block: int | tuple[int, int, int],
    step_budget: int = 1 << 20,
    cache: ProgramCache | None = None,
    scratch: bool = True,
    scratch_waves: int = 0,
) -> DispatchStats:
    """Upload ``co``, write ``args`` (the explicit arguments) with the hidden ones, and run ``name`` over ``grid``
    workgroups of ``block`` threads (an int is a 1-D size). ``scratch`` gives the dispatch scratch memory at
    ``SCRATCH``, sized from the descriptor's private segment, in ``scratch_waves`` slots (0: one per wave)."""
    grid3 = (grid, 1, 1) if isinstance(grid, int) else grid
    block3 = (block, 1, 1) if isinstance(block, int) else block
    entries = co.upload(space.write, CODE_BASE)
    kd = co.kernels[name]
    kernargs = bytearray(hidden_kernargs(kd, grid3, block3))
    kernargs[: len(args)] = args
    space.write(KERNARG, bytes(kernargs))
    user = user_sgprs(kd, {KernelCodeProperty.ENABLE_SGPR_KERNARG_SEGMENT_PTR: KERNARG,
                           KernelCodeProperty.ENABLE_SGPR_DISPATCH_PTR: 0, KernelCodeProperty.ENABLE_SGPR_QUEUE_PTR: 0,
                           KernelCodeProperty.ENABLE_SGPR_DISPATCH_ID: 0})  # fmt: skip
    pgm = entries[name] >> 8
    # a dword row per 4 private bytes, each row a dword per lane (docs/rdna3.md "Scratch")
    wave_bytes = -(-kd.private_segment_fixed_size // 4) * SCRATCH_LANE_STRIDE
    setup = DispatchSetup(pgm & 0xFFFFFFFF, pgm >> 32, kd.compute_pgm_rsrc1, kd.dispatch_rsrc2(),
                          kd.compute_pgm_rsrc3, tuple(user), block3, grid3, scratch_base=SCRATCH if scratch else None,
                          scratch_wave_bytes=wave_bytes, scratch_waves=scratch_waves)  # fmt: skip
    return run_dispatch(space, setup, step_budget=step_budget, cache=cache)


def cls_reference(value: int) -> int:
    """The ISA's V_CLS_I32 / S_CLS_I32 loop: the first bit below the sign that differs from it, counted from 1
    (bit 30); -1 (0xFFFFFFFF) when every bit equals the sign."""
    for i in range(1, 32):
        if (value >> (31 - i) & 1) != value >> 31:
            return i
    return 0xFFFFFFFF


def pack(*values: int | float, fmt: str) -> bytes:
    return struct.pack(fmt, *values)


def read(space: AddressSpace, va: int, count: int, dtype: str) -> np.ndarray:
    return np.frombuffer(bytes(space.read(va, count * np.dtype(dtype).itemsize)), dtype)
