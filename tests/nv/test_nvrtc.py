"""NVRTC, compile-only (no GPU, no driver): the suite's portable kernels build for sm_90 as cubins whose entry
points and parameters are what the NV runtime launches, and rejected sources raise CompileError with NVRTC's log."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tinyhil.errors import CompileError, InvalidArgument
from tinyhil.fixtures.suite.test_device import ADD_ONE, ADD_TWO
from tinyhil.fixtures.suite.test_kernels import LOAD_WORD, VECTOR_ADD
from tinyhil.fixtures.suite.test_multi_gpu import SCALE
from tinyhil.nv import NvrtcCompiler, kernel_params
from tinyhil.nv.nvrtc import NVRTC_OPTIONS, nvrtc_unavailable_reason
from tinyhil.portable_kernel import TH_ARGS_BYTES

REASON = nvrtc_unavailable_reason()
needs_nvrtc = pytest.mark.skipif(REASON is not None, reason=f"NVRTC cannot compile here: {REASON}")
SUITE_KERNELS = {"vector_add": VECTOR_ADD, "load_word": LOAD_WORD, "scale": SCALE, "add_one": ADD_ONE}


@needs_nvrtc
@pytest.mark.parametrize("name", sorted(SUITE_KERNELS))
def test_each_suite_kernel_compiles_to_an_sm_90_cubin_with_one_th_args_parameter(name: str) -> None:
    cubin = NvrtcCompiler("sm_90").compile(SUITE_KERNELS[name].encode())
    assert cubin[:4] == b"\x7fELF"  # a cubin, not PTX text
    assert kernel_params(cubin) == {name: (TH_ARGS_BYTES,)}  # extern "C": the entry name is not mangled


@needs_nvrtc
def test_programs_that_differ_in_code_differ_in_binary() -> None:
    compiler = NvrtcCompiler("sm_90")
    assert compiler.compile(ADD_ONE.encode()) != compiler.compile(ADD_TWO.encode())


@needs_nvrtc
def test_the_cubin_records_each_parameters_size_in_order() -> None:
    source = b'extern "C" __global__ void k(th_u64 a, th_u32 b, th_u8 c, th_f64 d) {}\n'
    source += b'extern "C" __global__ void e() {}'
    assert kernel_params(NvrtcCompiler("sm_90").compile(source)) == {"k": (8, 4, 1, 8), "e": ()}


@needs_nvrtc
@pytest.mark.parametrize(
    ("source", "logged"),
    [
        ("#include <stdint.h>\nTH_KERNEL(k) {}", "stdint.h"),  # NVRTC has no standard headers
        ("TH_KERNEL(k) {\n    TH_THREADS {\n        th_u32 *p = (void *)0;\n    }\n}", "kernel.cu(3)"),  # C++ rules
        ("this is not C;", "error"),
    ],
)
def test_a_rejected_source_raises_compile_error_carrying_nvrtcs_log(source: str, logged: str) -> None:
    with pytest.raises(CompileError, match="NVRTC:sm_90 failed to compile") as caught:
        NvrtcCompiler("sm_90").compile(source.encode())
    assert logged in caught.value.message and caught.value.compiler == "NVRTC:sm_90"


def test_options_build_for_the_arch_without_fused_multiply_adds() -> None:
    compiler = NvrtcCompiler("sm_89")
    assert compiler.options == ("--gpu-architecture=sm_89", "--fmad=false") and "--fmad=false" in NVRTC_OPTIONS
    assert compiler.name == "NVRTC:sm_89"


@pytest.mark.parametrize("arch", ["compute_90", "sm90", "", 90, "sm_9"])
def test_an_arch_that_is_not_sm_xy_is_refused(arch: Any) -> None:
    with pytest.raises(InvalidArgument, match="expected a GPU architecture such as 'sm_90'"):
        NvrtcCompiler(arch)


def _fake_nvrtc(version: Any = None) -> Any:
    def nvrtc_version() -> tuple[Any, ...]:
        if isinstance(version, BaseException):
            raise version
        return (0, 13, 0) if version is None else version

    return SimpleNamespace(nvrtcVersion=nvrtc_version)


class DynamicLibNotFoundError(RuntimeError):
    """The class cuda.pathfinder raises when a library is not found (by name: the probe does not import it)."""


def test_nvrtcs_availability_names_what_is_missing() -> None:
    assert nvrtc_unavailable_reason(_fake_nvrtc()) is None
    missing = nvrtc_unavailable_reason(_fake_nvrtc(DynamicLibNotFoundError('"nvrtc" not found')))
    assert missing is not None and missing.startswith("the NVRTC library is not found (pip install nvidia-cuda-nvrtc)")
    assert nvrtc_unavailable_reason(_fake_nvrtc((7, 0, 0))) == "nvrtcVersion returned 7"


def test_compiling_without_nvrtc_is_a_compile_error_naming_the_reason() -> None:
    compiler = NvrtcCompiler("sm_90", module=_fake_nvrtc(DynamicLibNotFoundError('"nvrtc" not found')))
    with pytest.raises(CompileError, match=r"NVRTC library is not found \(pip install nvidia-cuda-nvrtc\)"):
        compiler.compile(b"TH_KERNEL(k) {}")
