"""The NV runtime's error: a CUDA driver call that returned something other than ``CUDA_SUCCESS``."""

from __future__ import annotations

from tinyhil.errors import DeviceError
from tinyhil.nv.cuda_spec import result_name

__all__ = ["CudaError"]


class CudaError(DeviceError):
    """A CUDA driver call failed: ``call`` (``cuMemAlloc``), ``result`` (its ``CUresult`` name), ``code``."""

    def __init__(self, call: str, code: int, detail: str = "", *, target: str = "") -> None:
        self.call = call
        self.code = code
        self.result = result_name(code)
        self.detail = detail
        said = f"{call} returned {self.result} ({code})"
        super().__init__(f"{said}: {detail}" if detail else said, target=target, op=call)

    def __reduce__(self) -> tuple[type[CudaError], tuple[str, int, str]]:
        # Crosses process boundaries (worker pools): rebuild from the constructor's arguments.
        return type(self), (self.call, self.code, self.detail)
