"""The portable kernel form: one source, built as host C for the emulated GPUs (and as CUDA C by NVRTC)."""

from __future__ import annotations

import numpy as np
import pytest

import tinyhil
from tinyhil.compiler import HostCCompiler
from tinyhil.errors import CompileError
from tinyhil.nv.nvrtc import NvrtcCompiler, nvrtc_unavailable_reason
from tinyhil.portable_kernel import PORTABLE_HEADER, TH_ARGS_BYTES, TH_MAX_ARGS, with_portable_header

# Every thread writes its 3-D global id (x + 100 y + 10000 z) at its flat index; threads with x == 1 end early.
IDS = """
TH_KERNEL(ids) {
    TH_PTR(0, th_u64, out);
    TH_VAL(1, th_u64, width);
    TH_VAL(2, th_u64, height);
    TH_THREADS {
        th_u64 x = (th_u64)TH_GROUP_ID(0) * TH_GROUP_SIZE(0) + TH_LOCAL_ID(0), y = TH_GLOBAL_ID(1), z = TH_GLOBAL_ID(2);
        if (x == 1) continue;
        out[(z * height + y) * width + x] = x + 100 * y + 10000 * z;
    }
}
"""
GRID, LOCAL = (2, 3, 2), (4, 2, 1)


def test_a_3d_kernel_sees_the_global_ids_on_an_emulated_gpu() -> None:
    width, height, depth = (g * loc for g, loc in zip(GRID, LOCAL, strict=True))
    z, y, x = np.meshgrid(np.arange(depth), np.arange(height), np.arange(width), indexing="ij")
    expected = (x + 100 * y + 10000 * z).astype(np.uint64)
    expected[x == 1] = 0xDEAD  # the threads that ended early with continue wrote nothing
    with tinyhil.open_target("MOCKKFD+AMD") as device:
        out = device.alloc(expected.nbytes)
        device.copyin(out, np.full(expected.size, 0xDEAD, np.uint64))
        device.exec(device.compile(IDS, "ids"), GRID, LOCAL, [out, width, height])
        result = np.frombuffer(device.copyout(out), np.uint64).reshape(expected.shape)
    np.testing.assert_array_equal(result, expected)


def test_thread_ids_exist_only_inside_th_threads_on_the_host() -> None:
    with pytest.raises(CompileError, match="th_lx_"):
        HostCCompiler().compile(b"TH_KERNEL(k) {\n    TH_PTR(0, th_u32, x);\n    x[0] = TH_LOCAL_ID(0);\n}\n")


def test_compiler_messages_count_the_sources_own_lines() -> None:
    with pytest.raises(CompileError, match=r"<stdin>:3:") as caught:
        HostCCompiler().compile(b"TH_KERNEL(k) {\n    TH_THREADS {\n        undeclared = 1;\n    }\n}\n")
    assert "undeclared" in caught.value.message


def test_plain_c_sources_are_unaffected_by_the_header() -> None:
    legacy = b"void k(unsigned long long *args, const unsigned *g, const unsigned *s) { (void)args; (void)g; (void)s; }"
    assert HostCCompiler().compile(legacy)[:4] == b"\x7fELF"


def test_the_header_is_guarded_and_sized_as_documented() -> None:
    once = with_portable_header(b"int x;")
    assert with_portable_header(once).count(b"#define TINYHIL_PORTABLE_KERNEL") == 2  # guarded: defined once
    assert HostCCompiler().compile(once)[:4] == b"\x7fELF"  # including it twice builds
    assert f"#define TH_MAX_ARGS {TH_MAX_ARGS}" in PORTABLE_HEADER and TH_ARGS_BYTES == 8 * TH_MAX_ARGS
    assert "stdint" not in PORTABLE_HEADER and "#include" not in PORTABLE_HEADER  # NVRTC has no standard headers


@pytest.mark.skipif(nvrtc_unavailable_reason() is not None, reason=f"NVRTC: {nvrtc_unavailable_reason()}")
def test_the_same_3d_kernel_builds_with_nvrtc() -> None:
    assert NvrtcCompiler("sm_90").compile(IDS.encode())[:4] == b"\x7fELF"
