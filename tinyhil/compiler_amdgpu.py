"""The AMDGPU compiler: portable kernel source to a real AMDHSA code object, by clang-19 and ld.lld-19.

``LLVM`` on an AMD target selects this compiler (docs/compiler.md). Each source gets the portable kernel header
in front (``tinyhil.portable_kernel``), is compiled as OpenCL C 2.0 for ``amdgcn-amd-amdhsa`` and the target's
processor at ``-O2`` (the header's OpenCL branch makes ``TH_KERNEL`` a ``__kernel``), and linked ``-shared`` into
the ELF the driver loads (``tinyhil.amdgpu.code_object``). A plain OpenCL C source with ``__kernel`` functions
builds too. ``-nogpulib``: no ROCm device library, so kernels use the header's ids and the clang builtins, not
``get_global_id``.

clang is the AMDGPU backend's own driver: one process turns C into a code object with its metadata note.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Collection
from pathlib import Path
from typing import Final

from tinyhil.compiler import AMD_RENDERERS, COMPILE_TIMEOUT_S, Compiler, HostCCompiler
from tinyhil.errors import CompileError, InvalidArgument, TargetUnavailable
from tinyhil.portable_kernel import with_portable_header

__all__ = ["AMDGPU_PACKAGES", "DEFAULT_ARCH", "AmdgpuCompiler", "amd_compiler", "llvm_unavailable_reason"]

DEFAULT_ARCH: Final = "gfx1100"  # the arch LLVM builds for when the target string names none

CLANG: Final = "clang-19"
LD_LLD: Final = "ld.lld-19"
AMDGPU_PACKAGES: Final = "clang-19 lld-19"  # the Debian packages that provide the two tools
AMDGPU_TRIPLE: Final = "amdgcn-amd-amdhsa"


class AmdgpuCompiler:
    """clang-19 + ld.lld-19 building gfx code objects for ``arch`` (``gfx1100``, ...); see the module docstring."""

    def __init__(self, arch: str = DEFAULT_ARCH) -> None:
        if not arch.startswith("gfx") or not arch[3:].isalnum():
            raise InvalidArgument(f"arch={arch!r}, expected an AMDGPU processor name such as 'gfx1100'")
        self.arch = arch
        self.name = f"LLVM:{arch}"

    def unavailable_reason(self) -> str | None:
        """``None`` when both tools are on PATH, else which are missing and the packages that provide them."""
        missing = [tool for tool in (CLANG, LD_LLD) if shutil.which(tool) is None]
        if missing:
            return f"{' and '.join(missing)} not found on PATH: install the Debian packages {AMDGPU_PACKAGES}"
        return None

    def _run(self, cmd: list[str]) -> None:
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=COMPILE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise CompileError(self.name, f"{shlex.join(cmd)} ran longer than {COMPILE_TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise CompileError(self.name, done.stderr.decode(errors="replace").strip())

    def compile(self, source: bytes) -> bytes:
        reason = self.unavailable_reason()
        if reason is not None:
            raise CompileError(self.name, reason)
        with tempfile.TemporaryDirectory(prefix="tinyhil-amdgpu-") as tmp:
            src, obj, out = Path(tmp) / "kernel.cl", Path(tmp) / "kernel.o", Path(tmp) / "kernel.co"
            src.write_bytes(with_portable_header(source))
            self._run([CLANG, "-x", "cl", "-cl-std=CL2.0", "-target", AMDGPU_TRIPLE, f"-mcpu={self.arch}", "-O2",
                       "-nogpulib", "-c", str(src), "-o", str(obj)])  # fmt: skip
            self._run([LD_LLD, "-shared", str(obj), "-o", str(out)])
            return out.read_bytes()


def llvm_unavailable_reason(
    renderer: str | None, arch: str | None, *, runs_archs: Collection[str] | None = None
) -> str | None:
    """Why an AMD target's renderer cannot serve it here, or ``None``: ``LLVM`` without clang-19 / ld.lld-19 (the
    reason names the Debian packages), or ``LLVM`` for an ``arch`` whose machine code the target's GPU cannot run
    (``runs_archs``; ``None``: a device that runs nothing, or any arch). Other renderers: ``None``.

    A target's ``renderer_probe`` (``tinyhil.registry``), so ``tinyhil targets`` and the pytest plugin report it."""
    if renderer != AMD_RENDERERS["LLVM"]:
        return None
    arch = arch or DEFAULT_ARCH
    reason = AmdgpuCompiler(arch).unavailable_reason()
    if reason is not None:
        return f"the LLVM renderer needs {reason}"
    if runs_archs is not None and arch not in runs_archs:
        return (
            f"the LLVM renderer builds {arch} machine code, and this GPU runs {', '.join(runs_archs)} machine code "
            f"only (docs/rdna3.md); the CC renderer builds host-native kernels for {arch}"
        )
    return None


def amd_compiler(target: str, renderer: str | None, arch: str | None) -> Compiler:
    """The compiler an AMD target's renderer selects (``AMD_RENDERERS``): ``LLVM`` builds code objects for
    ``arch`` (default gfx1100), ``CC`` (or ``None``) is the host C compiler.

    Raises:
        TargetUnavailable: ``LLVM`` without clang-19 / ld.lld-19 (:func:`llvm_unavailable_reason`).
        InvalidArgument: a renderer that names no compiler of ``AMD_RENDERERS``.
    """
    if renderer in (None, AMD_RENDERERS["CC"]):
        return HostCCompiler()
    if renderer == AMD_RENDERERS["LLVM"]:
        reason = llvm_unavailable_reason(renderer, arch)
        if reason is not None:
            raise TargetUnavailable(target, reason)
        return AmdgpuCompiler(arch or DEFAULT_ARCH)
    raise InvalidArgument(f"{target}: renderer {renderer!r}, expected one of {sorted(set(AMD_RENDERERS.values()))}")
