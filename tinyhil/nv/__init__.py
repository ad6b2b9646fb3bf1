"""The NV device runtime: NVIDIA GPUs through the CUDA driver API, kernels built by NVRTC (docs/nv.md)."""

from __future__ import annotations

from tinyhil.nv.cubin import kernel_params
from tinyhil.nv.cuda_bindings import CudaBindingsDriver
from tinyhil.nv.cuda_spec import STICKY_RESULTS, CUdevice_attribute, CUresult
from tinyhil.nv.device import NV_CAPABILITIES, CudaLimits, NvDevice
from tinyhil.nv.driver_api import CudaDriver
from tinyhil.nv.errors import CudaError
from tinyhil.nv.nvrtc import NvrtcCompiler

__all__ = [
    "NV_CAPABILITIES",
    "STICKY_RESULTS",
    "CUdevice_attribute",
    "CUresult",
    "CudaBindingsDriver",
    "CudaDriver",
    "CudaError",
    "CudaLimits",
    "NvDevice",
    "NvrtcCompiler",
    "kernel_params",
]
