"""MOCKKFD: a virtual ``/dev/kfd``, DRM render nodes and KFD sysfs topology over emulated AMD GPUs.

The mock implements the file-I/O seam (:attr:`MockKFD.fileio`) and drives each GPU through :class:`GpuPort`.
"""

from __future__ import annotations

from tinyhil.mocks.kfd.device import DEFAULT_GTT_LIMIT_BYTES, MockKFD
from tinyhil.mocks.kfd.fileio import MockFileIO
from tinyhil.mocks.kfd.gpu_port import GpuPort, Interrupt, InterruptKind, QueueKind
from tinyhil.mocks.kfd.topology import GPU_MODELS, GpuModel

__all__ = [
    "DEFAULT_GTT_LIMIT_BYTES",
    "GPU_MODELS",
    "GpuModel",
    "GpuPort",
    "Interrupt",
    "InterruptKind",
    "MockFileIO",
    "MockKFD",
    "QueueKind",
]
