"""CUDA driver API constants the NV runtime uses, spelled as ``cuda.h`` spells them.

Values are those of CUDA 12/13's ``cuda.h`` (checked against ``cuda.bindings.driver`` 13.x: ``CUresult``,
``CUdevice_attribute``); docs/nv.md lists where each fact comes from.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = [
    "CU_EVENT_DEFAULT",
    "CU_STREAM_DEFAULT",
    "STICKY_RESULTS",
    "CUdevice_attribute",
    "CUresult",
    "result_name",
]

CU_STREAM_DEFAULT: Final = 0x0  # CUstream_flags: a stream that synchronises with the legacy default stream
CU_EVENT_DEFAULT: Final = 0x0  # CUevent_flags: timing enabled, busy-wait synchronisation


class CUresult(IntEnum):
    """The ``CUresult`` codes the runtime names or the test double returns (``cuda.h`` enum ``cudaError_enum``)."""

    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NOT_INITIALIZED = 3
    CUDA_ERROR_DEINITIALIZED = 4
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_INVALID_DEVICE = 101
    CUDA_ERROR_INVALID_IMAGE = 200
    CUDA_ERROR_INVALID_CONTEXT = 201
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209
    CUDA_ERROR_ECC_UNCORRECTABLE = 214
    CUDA_ERROR_INVALID_PTX = 218
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222
    CUDA_ERROR_INVALID_HANDLE = 400
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_NOT_READY = 600
    CUDA_ERROR_ILLEGAL_ADDRESS = 700
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701
    CUDA_ERROR_LAUNCH_TIMEOUT = 702
    CUDA_ERROR_ASSERT = 710
    CUDA_ERROR_HARDWARE_STACK_ERROR = 714
    CUDA_ERROR_ILLEGAL_INSTRUCTION = 715
    CUDA_ERROR_MISALIGNED_ADDRESS = 716
    CUDA_ERROR_INVALID_ADDRESS_SPACE = 717
    CUDA_ERROR_INVALID_PC = 718
    CUDA_ERROR_LAUNCH_FAILED = 719


# The errors after which "the process is left in an inconsistent state and any further CUDA work will return the
# same error" (cuda.h's comment on each): the context is lost, so the runtime refuses every later call.
STICKY_RESULTS: Final = frozenset(
    {
        CUresult.CUDA_ERROR_ECC_UNCORRECTABLE,
        CUresult.CUDA_ERROR_ILLEGAL_ADDRESS,
        CUresult.CUDA_ERROR_LAUNCH_TIMEOUT,
        CUresult.CUDA_ERROR_ASSERT,
        CUresult.CUDA_ERROR_HARDWARE_STACK_ERROR,
        CUresult.CUDA_ERROR_ILLEGAL_INSTRUCTION,
        CUresult.CUDA_ERROR_MISALIGNED_ADDRESS,
        CUresult.CUDA_ERROR_INVALID_ADDRESS_SPACE,
        CUresult.CUDA_ERROR_INVALID_PC,
        CUresult.CUDA_ERROR_LAUNCH_FAILED,
    }
)


class CUdevice_attribute(IntEnum):
    """The device attributes the runtime reads (``cuda.h`` enum ``CUdevice_attribute_enum``)."""

    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


def result_name(code: int) -> str:
    """The ``CUresult`` name of ``code`` (``CUDA_ERROR_ILLEGAL_ADDRESS``); ``CUresult(<code>)`` for one not listed."""
    try:
        return CUresult(code).name
    except ValueError:
        return f"CUresult({code})"
