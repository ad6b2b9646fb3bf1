"""The AMDGPU compiler: portable kernels become gfx1100 code objects; missing tools and bad sources are typed."""

from __future__ import annotations

import pytest
from support.rdna3 import needs_clang

from tinyhil.amdgpu.code_object import load_code_object
from tinyhil.compiler import HostCCompiler
from tinyhil.compiler_amdgpu import AMDGPU_PACKAGES, AmdgpuCompiler, amd_compiler
from tinyhil.errors import CompileError, InvalidArgument, TargetUnavailable
from tinyhil.registry import default_registry
from tinyhil.spec.amdhsa import EF_AMDGPU_MACH_AMDGCN_GFX1100, EM_AMDGPU

SCALE = b"TH_KERNEL(scale) { TH_PTR(0, th_u32, x); TH_VAL(1, th_u32, k); TH_THREADS { x[TH_GLOBAL_ID(0)] *= k; } }"


@needs_clang
def test_a_portable_kernel_becomes_a_gfx1100_code_object_with_its_kernel() -> None:
    binary = AmdgpuCompiler().compile(SCALE)
    assert int.from_bytes(binary[18:20], "little") == EM_AMDGPU
    co = load_code_object(binary)
    kd = co.kernels["scale"]
    assert co.mach == EF_AMDGPU_MACH_AMDGCN_GFX1100 and kd.wave32
    (th_args,) = [a for a in kd.metadata[".args"] if not a[".value_kind"].startswith("hidden_")]
    assert (th_args[".offset"], th_args[".size"]) == (0, 256)  # the portable form's one by-value block
    assert kd.metadata[".max_flat_workgroup_size"] == 1024


@needs_clang
def test_a_source_clang_rejects_is_a_compile_error_with_its_message() -> None:
    with pytest.raises(CompileError, match="undeclared"):
        AmdgpuCompiler().compile(b"TH_KERNEL(k) { TH_THREADS { undeclared = 1; } }")


def test_without_the_tools_the_reason_names_the_debian_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    compiler = AmdgpuCompiler()
    assert AMDGPU_PACKAGES in str(compiler.unavailable_reason())
    with pytest.raises(CompileError, match="clang-19 lld-19"):
        compiler.compile(SCALE)
    with pytest.raises(TargetUnavailable, match=r"the LLVM renderer needs clang-19 and ld\.lld-19 not found"):
        amd_compiler("MOCKKFD+AMD:LLVM", "LLVM", None)


def test_each_renderer_selects_its_own_compiler() -> None:
    assert isinstance(amd_compiler("T", None, None), HostCCompiler)
    assert isinstance(amd_compiler("T", "CC", "gfx1100"), HostCCompiler)
    with pytest.raises(InvalidArgument, match=r"renderer 'HIP', expected one of \['CC', 'LLVM'\]"):
        amd_compiler("T", "HIP", None)
    with pytest.raises(InvalidArgument, match="arch='1100'"):
        AmdgpuCompiler("1100")


@needs_clang
def test_the_llvm_renderer_compiles_for_the_targets_arch() -> None:
    compiler = amd_compiler("T", "LLVM", "gfx1201")
    assert isinstance(compiler, AmdgpuCompiler) and compiler.arch == "gfx1201"


@pytest.mark.parametrize("text", ["MOCKKFD+AMD:HIP", "MOCKUSB+AMD:AMD", "NULL:HIP"])
def test_no_renderer_token_stands_in_for_a_compiler_tinyhil_lacks(text: str) -> None:
    with pytest.raises(InvalidArgument, match="known renderers: CC, CLANG, LLVM"):
        default_registry().resolve(text)


@needs_clang
@pytest.mark.parametrize("arch", ["gfx1201", "gfx950"])
def test_llvm_on_an_emulated_gpu_is_unavailable_for_machine_code_its_executor_cannot_run(arch: str) -> None:
    resolved = default_registry().resolve(f"MOCKKFD+AMD:LLVM:{arch}")
    reason = resolved.unavailable_reason()
    assert reason is not None and f"builds {arch} machine code" in reason and "runs gfx1100" in reason
    with pytest.raises(TargetUnavailable, match="CC renderer"):
        resolved.open()
    assert default_registry().resolve(f"MOCKKFD+AMD:CC:{arch}").unavailable_reason() is None
    assert default_registry().resolve("MOCKKFD+AMD:LLVM:gfx1100").unavailable_reason() is None
    assert default_registry().resolve("NULL:LLVM").unavailable_reason() is None  # NULL runs nothing


@pytest.mark.parametrize("text", ["MOCKKFD+AMD:LLVM", "MOCKUSB+AMD:LLVM", "NULL:LLVM"])
def test_llvm_without_the_tools_is_unavailable_before_opening(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    reason = default_registry().resolve(text).unavailable_reason()
    assert reason is not None and AMDGPU_PACKAGES in reason
