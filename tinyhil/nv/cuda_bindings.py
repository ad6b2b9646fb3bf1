"""The real CUDA driver seam: NVIDIA's ``cuda.bindings.driver`` (PyPI ``cuda-bindings``, the ``nv`` extra).

Every binding returns ``(CUresult, *outputs)``; :class:`CudaBindingsDriver` returns the outputs as plain ints (or
``str``/``float``) and raises :class:`~tinyhil.nv.errors.CudaError` for any result but ``CUDA_SUCCESS``. Host
buffers cross as their addresses. Without an NVIDIA driver the bindings raise ``cuda.pathfinder``'s
``DynamicLibNotFoundError`` (a ``RuntimeError``) instead of returning a result: that is let through, so the
target's probe can say the driver is missing.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

import numpy as np

from tinyhil.nv.cuda_spec import CUresult
from tinyhil.nv.errors import CudaError

__all__ = ["DEVICE_NAME_BYTES", "CudaBindingsDriver", "host_address", "load_bindings"]

DEVICE_NAME_BYTES: Final = 256  # cuDeviceGetName's buffer (nvidia-smi's names are under 100 characters)
BINDINGS_MODULE: Final = "cuda.bindings.driver"


def load_bindings() -> Any:
    """Import ``cuda.bindings.driver``.

    Raises:
        ImportError: ``cuda-bindings`` is not installed.
    """
    return importlib.import_module(BINDINGS_MODULE)


def host_address(view: memoryview) -> int:
    """The address of the first byte of a flat (C-contiguous) byte view, read-only ones too."""
    return int(np.frombuffer(view, np.uint8).ctypes.data)


class CudaBindingsDriver:
    """:class:`~tinyhil.nv.driver_api.CudaDriver` over a ``cuda.bindings.driver``-shaped ``module``."""

    def __init__(self, module: Any = None) -> None:
        self._m = load_bindings() if module is None else module

    def _ok(self, call: str, returned: Any) -> tuple[Any, ...]:
        """The outputs of a binding's ``(CUresult, *outputs)``; a failed result raises :class:`CudaError`."""
        result, *outputs = returned if isinstance(returned, tuple) else (returned,)
        code = int(result)
        if code != CUresult.CUDA_SUCCESS:
            known = code in CUresult._value2member_map_
            raise CudaError(call, code, "" if known else str(getattr(result, "name", "")))
        return tuple(outputs)

    def _one(self, call: str, returned: Any) -> Any:
        (value,) = self._ok(call, returned)
        return value

    def bindings_version(self) -> str:
        """The ``cuda-bindings`` release (``13.5.0``); its major is the CUDA major it is built for."""
        return str(getattr(importlib.import_module("cuda.bindings"), "__version__", "0"))

    # --- context --------------------------------------------------------------------------------------------
    def cuInit(self, Flags: int) -> None:
        self._ok("cuInit", self._m.cuInit(Flags))

    def cuDriverGetVersion(self) -> int:
        """The CUDA version the driver supports, as 1000 * major + 10 * minor (12040 for 12.4)."""
        return int(self._one("cuDriverGetVersion", self._m.cuDriverGetVersion()))

    def cuDeviceGetCount(self) -> int:
        return int(self._one("cuDeviceGetCount", self._m.cuDeviceGetCount()))

    def cuDeviceGet(self, ordinal: int) -> int:
        return int(self._one("cuDeviceGet", self._m.cuDeviceGet(ordinal)))

    def cuDeviceGetName(self, dev: int) -> str:
        name = self._one("cuDeviceGetName", self._m.cuDeviceGetName(DEVICE_NAME_BYTES, self._m.CUdevice(dev)))
        raw = bytes(name)
        return raw.split(b"\0", 1)[0].decode(errors="replace")

    def cuDeviceGetAttribute(self, attrib: int, dev: int) -> int:
        attribute = self._m.CUdevice_attribute(attrib)
        return int(self._one("cuDeviceGetAttribute", self._m.cuDeviceGetAttribute(attribute, self._m.CUdevice(dev))))

    def cuDevicePrimaryCtxRetain(self, dev: int) -> int:
        return int(self._one("cuDevicePrimaryCtxRetain", self._m.cuDevicePrimaryCtxRetain(self._m.CUdevice(dev))))

    def cuDevicePrimaryCtxRelease(self, dev: int) -> None:
        self._ok("cuDevicePrimaryCtxRelease", self._m.cuDevicePrimaryCtxRelease(self._m.CUdevice(dev)))

    def cuCtxGetCurrent(self) -> int:
        return int(self._one("cuCtxGetCurrent", self._m.cuCtxGetCurrent()))

    def cuCtxSetCurrent(self, ctx: int) -> None:
        self._ok("cuCtxSetCurrent", self._m.cuCtxSetCurrent(self._m.CUcontext(ctx)))

    # --- memory ---------------------------------------------------------------------------------------------
    def cuMemAlloc(self, bytesize: int) -> int:
        return int(self._one("cuMemAlloc", self._m.cuMemAlloc(bytesize)))

    def cuMemFree(self, dptr: int) -> None:
        self._ok("cuMemFree", self._m.cuMemFree(self._m.CUdeviceptr(dptr)))

    def cuMemcpyHtoDAsync(self, dstDevice: int, srcHost: memoryview, ByteCount: int, hStream: int) -> None:
        m = self._m
        returned = m.cuMemcpyHtoDAsync(m.CUdeviceptr(dstDevice), host_address(srcHost), ByteCount, m.CUstream(hStream))
        self._ok("cuMemcpyHtoDAsync", returned)

    def cuMemcpyDtoHAsync(self, dstHost: memoryview, srcDevice: int, ByteCount: int, hStream: int) -> None:
        m = self._m
        returned = m.cuMemcpyDtoHAsync(host_address(dstHost), m.CUdeviceptr(srcDevice), ByteCount, m.CUstream(hStream))
        self._ok("cuMemcpyDtoHAsync", returned)

    def cuMemcpyDtoDAsync(self, dstDevice: int, srcDevice: int, ByteCount: int, hStream: int) -> None:
        m = self._m
        returned = m.cuMemcpyDtoDAsync(
            m.CUdeviceptr(dstDevice), m.CUdeviceptr(srcDevice), ByteCount, m.CUstream(hStream)
        )
        self._ok("cuMemcpyDtoDAsync", returned)

    def cuMemsetD8Async(self, dstDevice: int, uc: int, N: int, hStream: int) -> None:
        m = self._m
        self._ok("cuMemsetD8Async", m.cuMemsetD8Async(m.CUdeviceptr(dstDevice), uc, N, m.CUstream(hStream)))

    # --- modules and launches -------------------------------------------------------------------------------
    def cuModuleLoadData(self, image: bytes) -> int:
        data = np.frombuffer(image, np.uint8)  # kept alive for the call: the driver reads the image during it
        return int(self._one("cuModuleLoadData", self._m.cuModuleLoadData(int(data.ctypes.data))))

    def cuModuleUnload(self, hmod: int) -> None:
        self._ok("cuModuleUnload", self._m.cuModuleUnload(self._m.CUmodule(hmod)))

    def cuModuleGetFunction(self, hmod: int, name: str) -> int:
        returned = self._m.cuModuleGetFunction(self._m.CUmodule(hmod), name.encode())
        return int(self._one("cuModuleGetFunction", returned))

    def cuLaunchKernel(self, f: int, gridDimX: int, gridDimY: int, gridDimZ: int, blockDimX: int, blockDimY: int,
                       blockDimZ: int, sharedMemBytes: int, hStream: int, kernelParams: int,
                       extra: int) -> None:  # fmt: skip
        m = self._m
        returned = m.cuLaunchKernel(m.CUfunction(f), gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                    sharedMemBytes, m.CUstream(hStream), kernelParams, extra)  # fmt: skip
        self._ok("cuLaunchKernel", returned)

    # --- streams and events ---------------------------------------------------------------------------------
    def cuStreamCreate(self, Flags: int) -> int:
        return int(self._one("cuStreamCreate", self._m.cuStreamCreate(Flags)))

    def cuStreamDestroy(self, hStream: int) -> None:
        self._ok("cuStreamDestroy", self._m.cuStreamDestroy(self._m.CUstream(hStream)))

    def cuStreamSynchronize(self, hStream: int) -> None:
        self._ok("cuStreamSynchronize", self._m.cuStreamSynchronize(self._m.CUstream(hStream)))

    def cuEventCreate(self, Flags: int) -> int:
        return int(self._one("cuEventCreate", self._m.cuEventCreate(Flags)))

    def cuEventDestroy(self, hEvent: int) -> None:
        self._ok("cuEventDestroy", self._m.cuEventDestroy(self._m.CUevent(hEvent)))

    def cuEventRecord(self, hEvent: int, hStream: int) -> None:
        self._ok("cuEventRecord", self._m.cuEventRecord(self._m.CUevent(hEvent), self._m.CUstream(hStream)))

    def cuEventSynchronize(self, hEvent: int) -> None:
        self._ok("cuEventSynchronize", self._m.cuEventSynchronize(self._m.CUevent(hEvent)))

    def cuEventElapsedTime(self, hStart: int, hEnd: int) -> float:
        returned = self._m.cuEventElapsedTime(self._m.CUevent(hStart), self._m.CUevent(hEnd))
        return float(self._one("cuEventElapsedTime", returned))
