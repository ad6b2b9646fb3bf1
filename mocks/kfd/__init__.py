"""MOCKKFD: a virtual ``/dev/kfd``, DRM render nodes and KFD sysfs topology over emulated AMD GPUs.

The mock implements the file-I/O seam (:attr:`MockKFD.fileio`) and drives each GPU through :class:`GpuPort`; a
:class:`KfdFaultPlan` (``MockKFD(faults=...)``) injects failing allocations, hung queues and GPU page faults.
"""

from __future__ import annotations

from tinyhil.mocks.kfd.device import DEFAULT_GTT_LIMIT_BYTES, MockKFD
from tinyhil.mocks.kfd.faults import AllocFailure, KfdFaultPlan, MemoryFaultAt, QueueHang
from tinyhil.mocks.kfd.fileio import MockFileIO
from tinyhil.mocks.kfd.gpu_port import GpuPort, Interrupt, InterruptKind, QueueKind
from tinyhil.mocks.kfd.machines import exit_processes, shared_machine
from tinyhil.mocks.kfd.state import MemKind
from tinyhil.mocks.kfd.topology import GPU_MODELS, GpuModel

__all__ = [
    "DEFAULT_GTT_LIMIT_BYTES",
    "GPU_MODELS",
    "AllocFailure",
    "GpuModel",
    "GpuPort",
    "Interrupt",
    "InterruptKind",
    "KfdFaultPlan",
    "MemKind",
    "MemoryFaultAt",
    "MockFileIO",
    "MockKFD",
    "QueueHang",
    "QueueKind",
    "exit_processes",
    "shared_machine",
]
