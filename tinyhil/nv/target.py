"""The ``NV`` target: an NVIDIA GPU through the CUDA driver API (``cuda-bindings``) with NVRTC as its compiler.

Listed in the registry by ``tinyhil.builtin_targets``. Its probe says precisely what is missing: the bindings
(``pip install 'tinyhil[nv]'``), the NVIDIA driver (``libcuda``; the bindings raise ``cuda.pathfinder``'s
``DynamicLibNotFoundError``), a GPU (``CUDA_ERROR_NO_DEVICE``), or NVRTC.
"""

from __future__ import annotations

import functools
from typing import Any, Final

from tinyhil.device import Device
from tinyhil.nv.cuda_bindings import CudaBindingsDriver, load_bindings
from tinyhil.nv.cuda_spec import CUresult
from tinyhil.nv.device import NV_CAPABILITIES, NvDevice
from tinyhil.nv.errors import CudaError
from tinyhil.nv.nvrtc import nvrtc_unavailable_reason
from tinyhil.registry import Target, target

__all__ = ["NV_RENDERERS", "NV_TARGET_CAPABILITIES", "nv", "nv_unavailable_reason"]

NV_RENDERERS: Final = {"NVRTC": "NVRTC", "CUDA": "NVRTC"}
NV_TARGET_CAPABILITIES: Final = sorted(NV_CAPABILITIES | {"real-hardware"})
_DRIVER_MISSING: Final = "DynamicLibNotFoundError"
_CUDA_VERSION_MAJOR: Final = 1000  # cuDriverGetVersion: 1000 * major + 10 * minor
_CUDA_VERSION_MINOR: Final = 10


def nv_unavailable_reason(*, bindings: Any = None, nvrtc: Any = None, version: str | None = None) -> str | None:
    """Why ``NV`` cannot run here, or ``None``: ``bindings`` and ``nvrtc`` are ``cuda.bindings.driver``- and
    ``cuda.bindings.nvrtc``-shaped modules and ``version`` the bindings' release (tests inject them); by default the
    real ones."""
    try:
        driver = CudaBindingsDriver(load_bindings() if bindings is None else bindings)
    except ImportError:
        return "cuda-bindings is not installed (pip install 'tinyhil[nv]')"
    try:
        driver.cuInit(0)
        count = driver.cuDeviceGetCount()
        supported = driver.cuDriverGetVersion()
    except CudaError as exc:
        if exc.code == CUresult.CUDA_ERROR_NO_DEVICE:
            return "no NVIDIA GPU: cuInit returned CUDA_ERROR_NO_DEVICE"
        return f"the CUDA driver failed to initialise: {exc}"
    except RuntimeError as exc:
        if type(exc).__name__ != _DRIVER_MISSING:
            raise
        return f"no NVIDIA driver: libcuda is not installed ({_DRIVER_MISSING}: {exc})"
    if count == 0:
        return "no NVIDIA GPU: cuDeviceGetCount returned 0"
    release = driver.bindings_version() if version is None else version
    return _version_mismatch(supported, release) or nvrtc_unavailable_reason(nvrtc)


def _version_mismatch(supported: int, release: str) -> str | None:
    """Why a driver for CUDA ``supported`` (``cuDriverGetVersion``) is too old for cuda-bindings ``release`` (its
    major is the CUDA major it is built for: cuda-bindings 13 needs a CUDA 13 driver), or None."""
    major = int(release.split(".")[0]) if release.split(".")[0].isdigit() else 0
    if supported // _CUDA_VERSION_MAJOR >= major:
        return None
    said = f"{supported // _CUDA_VERSION_MAJOR}.{supported % _CUDA_VERSION_MAJOR // _CUDA_VERSION_MINOR}"
    return (f"the NVIDIA driver supports CUDA {said} (cuDriverGetVersion {supported}), older than cuda-bindings "
            f"{release} is built for (CUDA {major}): install cuda-bindings {supported // _CUDA_VERSION_MAJOR}.x and "
            f"its NVRTC wheel, or a CUDA {major} driver")  # fmt: skip


def _probe() -> str | None:
    return nv_unavailable_reason()


@target(
    "NV",
    capabilities=NV_TARGET_CAPABILITIES,
    probe=_probe,
    emulated=False,
    renderers=NV_RENDERERS,
    default_renderer="NVRTC",
    summary="NVIDIA GPU through the CUDA driver API (cuda-bindings), kernels built by NVRTC (NV:<n> for GPU n)",
    indexed=True,
)
def nv(resolved: Target) -> Device:
    """An NVIDIA GPU: the NV device runtime over ``cuda.bindings.driver``; ``NV:1`` is CUDA device ordinal 1 (after
    ``CUDA_VISIBLE_DEVICES``)."""
    return NvDevice(resolved.name, _process_driver(), ordinal=resolved.spec.index or 0, capabilities={"real-hardware"})


@functools.cache
def _process_driver() -> CudaBindingsDriver:
    """The one driver seam of this process: libcuda's state (each thread's current context) is process-wide."""
    return CudaBindingsDriver()
