"""The compiler seam (source bytes in, binary bytes out, or a :class:`CompileError`) and the host C compiler."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

from tinyhil.errors import CompileError, InvalidArgument
from tinyhil.portable_kernel import with_portable_header

__all__ = ["AMD_RENDERERS", "COMPILE_TIMEOUT_S", "HOST_CC_RENDERERS", "Compiler", "HostCCompiler"]

COMPILE_TIMEOUT_S: Final = 120.0
# Renderer tokens a target accepts, mapped to the compiler each selects (docs/compiler.md): ``CC`` and tinygrad's
# ``CLANG`` are the host C compiler (host-native code objects, the emulated GPUs' fast path); ``LLVM`` is real GPU
# code, an AMDHSA code object from clang's AMDGPU backend (``tinyhil.compiler_amdgpu``). No other token is
# accepted: tinyhil has no HIP compiler, so ``HIP`` and ``AMD`` are unknown renderers, never another compiler.
HOST_CC_RENDERERS: Final = {"CC": "CC", "CLANG": "CC"}
AMD_RENDERERS: Final = {**HOST_CC_RENDERERS, "LLVM": "LLVM"}


@runtime_checkable
class Compiler(Protocol):
    """Turns program source into a binary for one target."""

    @property
    def name(self) -> str:
        """Short name shown in errors and target listings (``CC``, ``QEMUCC:aarch64``)."""
        ...

    def compile(self, source: bytes) -> bytes:
        """Compile ``source``.

        Raises:
            CompileError: the compiler rejected the source; its message is attached.
        """
        ...


class HostCCompiler:
    """The host C compiler (``$CC``, else ``cc``) building a position-independent shared object.

    The output is what the host-native kernel executor loads: an ELF shared object for this machine. Every source
    is compiled with the portable kernel header in front (``tinyhil.portable_kernel``, docs/kernels.md), so a
    portable kernel builds here as it builds for NVRTC; a plain C source is unaffected.
    """

    name = "CC"

    def __init__(self, cc: str | None = None, flags: tuple[str, ...] = ("-O2", "-shared", "-fPIC")) -> None:
        self.command = shlex.split(cc or os.environ.get("CC", "cc"))
        if not self.command:
            raise InvalidArgument(f"cc={cc!r}, expected a compiler command such as 'cc' or 'gcc -m64'")
        self.flags = flags

    def unavailable_reason(self) -> str | None:
        """``None`` when the compiler can run here, else why not."""
        if shutil.which(self.command[0]) is None:
            return f"host C compiler {self.command[0]!r} not found on PATH (set CC)"
        return None

    def compile(self, source: bytes) -> bytes:
        reason = self.unavailable_reason()
        if reason is not None:
            raise CompileError(self.name, reason)
        with tempfile.TemporaryDirectory(prefix="tinyhil-cc-") as tmp:
            out = Path(tmp) / "program.so"
            cmd = [*self.command, *self.flags, "-x", "c", "-", "-o", str(out)]
            code = with_portable_header(source)
            try:
                done = subprocess.run(cmd, input=code, capture_output=True, timeout=COMPILE_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired:
                raise CompileError(self.name, f"{shlex.join(cmd)} ran longer than {COMPILE_TIMEOUT_S} s") from None
            if done.returncode != 0:
                raise CompileError(self.name, done.stderr.decode(errors="replace").strip())
            return out.read_bytes()
