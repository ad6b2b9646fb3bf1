"""The NV compiler: NVRTC (PyPI ``nvidia-cuda-nvrtc``, bindings in ``cuda.bindings.nvrtc``) building a cubin.

The output is a **cubin for the device's compute capability** (``sm_90``), never PTX: PTX from a newer NVRTC fails
to load on an older driver (``CUDA_ERROR_UNSUPPORTED_PTX_VERSION``), a cubin does not. Sources get the portable
kernel header in front (``tinyhil.portable_kernel``), as the host C compiler gives them, and build with
``--fmad=false`` so float results are bit-identical to the host build's (NVRTC fuses multiply-adds otherwise).
NVRTC needs no GPU and no driver: it runs wherever the wheel is installed.
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Final

from tinyhil.errors import CompileError, InvalidArgument
from tinyhil.portable_kernel import with_portable_header

__all__ = ["NVRTC_OPTIONS", "NvrtcCompiler", "load_nvrtc", "nvrtc_unavailable_reason"]

NVRTC_MODULE: Final = "cuda.bindings.nvrtc"
NVRTC_OPTIONS: Final = ("--fmad=false",)  # bit-exact against the host build
_NVRTC_SUCCESS: Final = 0
_PROGRAM_NAME: Final = b"kernel.cu"
_ARCH: Final = re.compile(r"sm_[0-9]{2,3}[a-z]?")
_NO_WHEEL: Final = "cuda-bindings is not installed (pip install 'tinyhil[nv]')"


def load_nvrtc() -> Any:
    """Import ``cuda.bindings.nvrtc``.

    Raises:
        ImportError: ``cuda-bindings`` is not installed.
    """
    return importlib.import_module(NVRTC_MODULE)


def nvrtc_unavailable_reason(module: Any = None) -> str | None:
    """``None`` when NVRTC can compile here, else why not (the bindings or the NVRTC library missing)."""
    try:
        nvrtc = load_nvrtc() if module is None else module
        result, *_ = nvrtc.nvrtcVersion()
    except ImportError:
        return _NO_WHEEL
    except RuntimeError as exc:  # cuda.pathfinder's DynamicLibNotFoundError: the nvidia-cuda-nvrtc wheel is missing
        return f"the NVRTC library is not found (pip install nvidia-cuda-nvrtc): {type(exc).__name__}: {exc}"
    if int(result) != _NVRTC_SUCCESS:
        return f"nvrtcVersion returned {getattr(result, 'name', result)}"
    return None


class NvrtcCompiler:
    """:class:`~tinyhil.compiler.Compiler` for one GPU architecture (``arch="sm_90"``): source -> cubin bytes.

    ``module`` is a ``cuda.bindings.nvrtc``-shaped object (tests inject one); by default the real bindings.
    """

    def __init__(self, arch: str = "sm_90", *, module: Any = None, options: tuple[str, ...] = NVRTC_OPTIONS) -> None:
        if not isinstance(arch, str) or not _ARCH.fullmatch(arch):
            raise InvalidArgument(f"arch={arch!r}, expected a GPU architecture such as 'sm_90' (sm_<major><minor>)")
        self.arch = arch
        self.options = (f"--gpu-architecture={arch}", *options)
        self._module = module
        self._checked = False

    @property
    def name(self) -> str:
        return f"NVRTC:{self.arch}"

    def _nvrtc(self) -> Any:
        """The bindings, once NVRTC was seen to load (checked on first use)."""
        if not self._checked:
            reason = nvrtc_unavailable_reason(self._module)
            if reason is not None:
                raise CompileError(self.name, reason)
            self._module = load_nvrtc() if self._module is None else self._module
            self._checked = True
        return self._module

    def _check(self, nvrtc: Any, call: str, returned: Any) -> tuple[Any, ...]:
        result, *outputs = returned
        if int(result) != _NVRTC_SUCCESS:
            raise CompileError(self.name, f"{call} returned {getattr(result, 'name', result)}")
        return tuple(outputs)

    def compile(self, source: bytes) -> bytes:
        """Compile ``source`` (portable or CUDA C++) to a cubin.

        Raises:
            CompileError: NVRTC rejected the source (its log is the message), or NVRTC is not installed.
        """
        nvrtc = self._nvrtc()
        created = nvrtc.nvrtcCreateProgram(with_portable_header(source), _PROGRAM_NAME, 0, [], [])
        (program,) = self._check(nvrtc, "nvrtcCreateProgram", created)
        try:
            options = [option.encode() for option in self.options]
            (result,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
            if int(result) != _NVRTC_SUCCESS:
                raise CompileError(self.name, self._log(nvrtc, program) or str(getattr(result, "name", result)))
            (size,) = self._check(nvrtc, "nvrtcGetCUBINSize", nvrtc.nvrtcGetCUBINSize(program))
            cubin = bytearray(size)
            self._check(nvrtc, "nvrtcGetCUBIN", nvrtc.nvrtcGetCUBIN(program, cubin))
            return bytes(cubin)
        finally:
            nvrtc.nvrtcDestroyProgram(program)

    def _log(self, nvrtc: Any, program: Any) -> str:
        (size,) = self._check(nvrtc, "nvrtcGetProgramLogSize", nvrtc.nvrtcGetProgramLogSize(program))
        log = bytearray(size)
        self._check(nvrtc, "nvrtcGetProgramLog", nvrtc.nvrtcGetProgramLog(program, log))
        return log.rstrip(b"\0").decode(errors="replace").strip()
