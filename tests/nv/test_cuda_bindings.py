"""The real driver seam's adapter over a ``cuda.bindings.driver``-shaped module: outputs as ints, results as
``CudaError`` naming the call and the ``CUresult``, host buffers as addresses."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest

from tinyhil.nv import CudaBindingsDriver, CudaDriver, CudaError, CUresult
from tinyhil.nv.cuda_bindings import DEVICE_NAME_BYTES, host_address


class Handle(int):
    """Stands in for the bindings' handle types (CUdevice, CUstream, ...): an int that says which type it is."""

    kind = "handle"

    def __repr__(self) -> str:
        return f"{self.kind}({int(self)})"


def _handle_type(kind: str) -> type[Handle]:
    return type(kind, (Handle,), {"kind": kind})


class FakeBindings:
    """Records each binding call and answers ``(CUDA_SUCCESS, *outputs)``, or the result in ``fail``."""

    def __init__(self, fail: dict[str, CUresult] | None = None) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.fail = fail or {}
        for kind in ("CUdevice", "CUcontext", "CUdeviceptr", "CUmodule", "CUfunction", "CUstream", "CUevent"):
            setattr(self, kind, _handle_type(kind))
        self.CUdevice_attribute = _handle_type("CUdevice_attribute")
        self.outputs: dict[str, tuple[Any, ...]] = {
            "cuDeviceGetCount": (2,), "cuDeviceGet": (self.CUdevice(1),), "cuDeviceGetName": (b"NVIDIA H200\0\0\0",),
            "cuDeviceGetAttribute": (1024,), "cuDevicePrimaryCtxRetain": (self.CUcontext(0x70),),
            "cuCtxGetCurrent": (self.CUcontext(0x70),), "cuDriverGetVersion": (13000,),
            "cuMemAlloc": (self.CUdeviceptr(0x7F0000000000),), "cuModuleLoadData": (self.CUmodule(5),),
            "cuModuleGetFunction": (self.CUfunction(6),), "cuStreamCreate": (self.CUstream(7),),
            "cuEventCreate": (self.CUevent(8),), "cuEventElapsedTime": (1.5,),
        }  # fmt: skip

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("cu"):
            raise AttributeError(name)

        def binding(*args: Any) -> tuple[Any, ...]:
            self.calls.append((name, args))
            return (self.fail.get(name, CUresult.CUDA_SUCCESS), *self.outputs.get(name, ()))

        return binding


def test_outputs_come_back_as_plain_values_and_handles_go_in_as_the_bindings_types() -> None:
    fake = FakeBindings()
    driver = CudaBindingsDriver(fake)
    assert isinstance(driver, CudaDriver)
    assert driver.cuDeviceGetCount() == 2 and type(driver.cuDeviceGet(1)) is int
    assert driver.cuDeviceGetName(1) == "NVIDIA H200"
    assert fake.calls[-1] == ("cuDeviceGetName", (DEVICE_NAME_BYTES, 1)) and repr(fake.calls[-1][1][1]) == "CUdevice(1)"
    assert driver.cuDeviceGetAttribute(1, 1) == 1024 and repr(fake.calls[-1][1][0]) == "CUdevice_attribute(1)"
    assert driver.cuDevicePrimaryCtxRetain(1) == 0x70 and driver.cuMemAlloc(64) == 0x7F0000000000
    assert driver.cuCtxGetCurrent() == 0x70 and driver.cuDriverGetVersion() == 13000
    assert driver.cuEventElapsedTime(8, 8) == 1.5 and driver.cuStreamCreate(0) == 7
    driver.cuLaunchKernel(6, 1, 2, 3, 4, 5, 6, 0, 7, 0x1234, 0)
    name, args = fake.calls[-1]
    assert name == "cuLaunchKernel" and args[1:8] == (1, 2, 3, 4, 5, 6, 0) and args[9:] == (0x1234, 0)
    assert [repr(args[0]), repr(args[8])] == ["CUfunction(6)", "CUstream(7)"]
    assert driver.cuModuleGetFunction(5, "vector_add") == 6 and fake.calls[-1][1][1] == b"vector_add"


def test_host_buffers_cross_as_the_address_of_their_first_byte() -> None:
    fake = FakeBindings()
    driver = CudaBindingsDriver(fake)
    data = np.arange(16, dtype=np.uint8)
    driver.cuMemcpyHtoDAsync(0x1000, memoryview(data.tobytes()), 16, 7)
    out = bytearray(16)
    driver.cuMemcpyDtoHAsync(memoryview(out), 0x1000, 16, 7)
    assert fake.calls[-1][1][0] == host_address(memoryview(out)) == np.frombuffer(out, np.uint8).ctypes.data
    assert isinstance(fake.calls[-2][1][1], int)


def test_a_failed_result_is_a_cuda_error_naming_the_call_and_the_result() -> None:
    driver = CudaBindingsDriver(FakeBindings(fail={"cuMemAlloc": CUresult.CUDA_ERROR_OUT_OF_MEMORY}))
    with pytest.raises(CudaError, match=r"cuMemAlloc returned CUDA_ERROR_OUT_OF_MEMORY \(2\)") as caught:
        driver.cuMemAlloc(1 << 50)
    assert (caught.value.call, caught.value.result, caught.value.code) == ("cuMemAlloc", "CUDA_ERROR_OUT_OF_MEMORY", 2)
    assert caught.value.op == "cuMemAlloc"


def test_a_result_tinyhil_does_not_list_keeps_the_bindings_name() -> None:
    class Unlisted(int):
        name = "CUDA_ERROR_STUB_LIBRARY"

    fake = FakeBindings()
    fake.fail["cuInit"] = Unlisted(34)  # type: ignore[assignment]
    with pytest.raises(CudaError, match=r"cuInit returned CUresult\(34\) \(34\): CUDA_ERROR_STUB_LIBRARY"):
        CudaBindingsDriver(fake).cuInit(0)


def test_cuda_errors_survive_pickling_with_their_fields() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(CudaError("cuStreamSynchronize", 700, "detail")))
    assert (error.call, error.result, error.detail) == ("cuStreamSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS", "detail")


@pytest.mark.skipif(importlib.util.find_spec("cuda.bindings") is None, reason="cuda-bindings is not installed")
def test_the_real_bindings_raise_their_own_error_when_no_driver_is_installed() -> None:
    driver = CudaBindingsDriver()
    try:
        driver.cuInit(0)
    except RuntimeError as exc:
        assert type(exc).__name__ == "DynamicLibNotFoundError" and "NVIDIA" in str(exc)
    else:
        pytest.skip("an NVIDIA driver is installed here: cuInit succeeded")
