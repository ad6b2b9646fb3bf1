"""The KFD path: the reference client that drives /dev/kfd through the file-I/O seam.

::

    with KFD(fileio) as kfd:                       # fileio: RealFileIO() or MockKFD(...).fileio
        gpu = kfd.device(0)                        # opens renderD<minor>, ACQUIRE_VM
        buf = gpu.alloc(1 << 20)                   # VRAM, mapped on the GPU and for the CPU
        queue = gpu.create_queue(QueueEngine.SDMA)
        queue.submit(packets)                      # ring + write pointer + doorbell
        kfd.wait(kfd.create_event(), timeout_ms=1000)

The ABI it speaks (``linux/kfd_ioctl.h`` as ctypes, request numbers, mmap offsets, handles, event slots, paths) is
the kernel's, shared with MOCKKFD: :mod:`tinyhil.spec.kfd_ioctls` and the ``tinyhil.spec.kfd_*`` modules beside it.
Modules: the client (:mod:`~tinyhil.kfd.client`), and the GPU (:mod:`~tinyhil.kfd.gpu`), which depends on the client
only through the :class:`~tinyhil.kfd.process.KfdProcess` protocol. amdkfd keeps a process's state for the life of the
process, so devices share one :class:`KFD` per process: :func:`process_session` (:mod:`~tinyhil.kfd.session`).
"""

from __future__ import annotations

from tinyhil.kfd.client import KFD, ClockCounters, KfdEvent, KfdHwException, KfdMemoryFault
from tinyhil.kfd.gpu import VA_WINDOW_BASE, VA_WINDOW_BYTES, Allocation, KfdGpu, MemoryDomain
from tinyhil.kfd.process import KfdProcess
from tinyhil.kfd.queue import CwsrSizes, KfdQueue, QueueEngine, QueueMemory, cwsr_sizes
from tinyhil.kfd.session import KfdSession, end_session, process_session
from tinyhil.kfd.topology import KfdNode, Topology, gfx_arch_name, parse_properties, read_topology
from tinyhil.spec.kfd_ioctls import KfdIoctl

__all__ = [
    "KFD",
    "VA_WINDOW_BASE",
    "VA_WINDOW_BYTES",
    "Allocation",
    "ClockCounters",
    "CwsrSizes",
    "KfdEvent",
    "KfdGpu",
    "KfdHwException",
    "KfdIoctl",
    "KfdMemoryFault",
    "KfdNode",
    "KfdProcess",
    "KfdQueue",
    "KfdSession",
    "MemoryDomain",
    "QueueEngine",
    "QueueMemory",
    "Topology",
    "cwsr_sizes",
    "end_session",
    "gfx_arch_name",
    "parse_properties",
    "process_session",
    "read_topology",
]
