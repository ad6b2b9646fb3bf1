"""MockKFD: amdkfd, the device files and the sysfs topology it publishes, over emulated GPUs.

``MockKFD([gpu0, gpu1, ...]).fileio`` is a :class:`~tinyhil.fileio.FileIO`; a KFD client given it runs unchanged
against the emulated GPUs, which MockKFD reaches only through :class:`~tinyhil.mocks.kfd.GpuPort`.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final

from tinyhil._check import check_int
from tinyhil.emulators.kernel import EventKernel
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.mocks.kfd.dispatch import IoctlDispatcher
from tinyhil.mocks.kfd.events import EventIoctls
from tinyhil.mocks.kfd.fileio import MockFileIO
from tinyhil.mocks.kfd.memory import MemoryIoctls
from tinyhil.mocks.kfd.port import GpuPort
from tinyhil.mocks.kfd.queues import QueueIoctls
from tinyhil.mocks.kfd.state import GpuDevice, Process
from tinyhil.mocks.kfd.topology import SysfsTree, gpu_identities, model_for
from tinyhil.mocks.kfd.usermem import MAPS_PATH, UserMemory

__all__ = ["DEFAULT_GTT_LIMIT_BYTES", "MockKFD"]

DEFAULT_GTT_LIMIT_BYTES: Final = 4 << 30
_PORT_ATTRIBUTES: Final = ("kernel", "vram_bytes", "gfx_target_version", "vram", "map_memory", "unmap_memory",
                           "create_queue", "destroy_queue", "ring_doorbell", "memory_written", "timestamp")  # fmt: skip


class MockKFD:
    """A virtual amdkfd with one emulated GPU per port (any number, each with its own ``gfx_target_version``).

    Device tree (see :mod:`tinyhil.mocks.kfd.fileio` for mmap offsets)::

        /dev/kfd                                            ioctls (KFD 1.11), mmaps of doorbells / events / MMIO
        /dev/dri/renderD<128+n>                             GPU n's render node: ACQUIRE_VM, mmap of its buffers
        /sys/devices/virtual/kfd/kfd/topology/nodes/0       the CPU
        /sys/devices/virtual/kfd/kfd/topology/nodes/<n+1>   GPU n (gpu_id, name, properties, mem_banks/0, io_links/0)

    GPU virtual address space of the process, per GPU (gfx9+ apertures)::

        0x0000_0001_0000 .. 0x7FFF_FFFF_FFFF    GPUVM: where allocations are mapped (the client picks VAs)
        0x0001_0000_0000_0000 + 4 GiB           LDS aperture        0x0002_0000_0000_0000 + 4 GiB   scratch aperture

    All GPUs must share one :class:`~tinyhil.emulators.kernel.EventKernel`: waits run it in virtual time. The
    KFD process (allocations, queues, events) is created at the first open of ``/dev/kfd`` and lives until
    :meth:`close`, as the kernel's lives until the process exits.

    Raises:
        InvalidArgument: a port lacks part of the GpuPort API, or the ports run on different event kernels.
    """

    def __init__(
        self, gpus: Sequence[GpuPort], *, gtt_limit_bytes: int = DEFAULT_GTT_LIMIT_BYTES, maps_path: str = MAPS_PATH
    ) -> None:
        ports = list(gpus)
        for index, port in enumerate(ports):
            missing = [name for name in _PORT_ATTRIBUTES if not hasattr(port, name)]
            if missing:
                raise InvalidArgument(f"gpus[{index}]={type(port).__name__} lacks GpuPort members {missing}")
        if len({id(port.kernel) for port in ports}) > 1:
            raise InvalidArgument("the GPUs run on different EventKernels; give every GPU of one MockKFD the same one")
        self.gtt_limit_bytes = check_int("gtt_limit_bytes", gtt_limit_bytes, min_value=0)
        self._kernel = ports[0].kernel if ports else EventKernel()
        versions = [check_int("gfx_target_version", port.gfx_target_version, min_value=1) for port in ports]
        identities = gpu_identities(versions)
        self.gpus = tuple(
            GpuDevice(port, identity, model_for(version))
            for port, identity, version in zip(ports, identities, versions, strict=True)
        )
        self.sysfs = SysfsTree(identities, versions, [port.vram_bytes for port in ports])
        self.user = UserMemory(maps_path)
        self.memory = MemoryIoctls(self)
        self.queues = QueueIoctls(self)
        self.events = EventIoctls(self)
        self.dispatcher = IoctlDispatcher(self)
        self.fileio = MockFileIO(self)
        self.faults: list[tuple[int, int]] = []
        self.unhandled_faults: list[tuple[int, int]] = []
        self.queue_errors: list[tuple[int, str]] = []
        self._process: Process | None = None
        for gpu in self.gpus:
            gpu.port.on_interrupt = functools.partial(self.events.interrupt, gpu)

    @property
    def kernel(self) -> EventKernel:
        """The event kernel every GPU runs on (waits advance its virtual clock)."""
        return self._kernel

    @property
    def has_process(self) -> bool:
        return self._process is not None

    @property
    def process(self) -> Process:
        """The KFD process.

        Raises:
            StateError: /dev/kfd was never opened.
        """
        if self._process is None:
            raise StateError("MockKFD has no process yet: open /dev/kfd through MockKFD.fileio first")
        return self._process

    def ensure_process(self) -> Process:
        if self._process is None:
            self._process = Process(self.gpus)
        return self._process

    def gpu_by_id(self, gpu_id: int) -> GpuDevice | None:
        return next((gpu for gpu in self.gpus if gpu.gpu_id == gpu_id), None)

    def close(self) -> None:
        """Process exit: destroy queues, unmap and free every allocation, close the mock's files."""
        process = self._process
        if process is not None:
            for queue in list(process.queues.values()):
                self.queues.destroy(queue)
            for pdd in process.pdds.values():
                for allocation in pdd.allocations.values():
                    for gpu_id in list(allocation.mapped_on):
                        self.memory.unmap(allocation, process.pdds[gpu_id].gpu)
            self._process = None
        for gpu in self.gpus:
            gpu.reset()
        self.fileio.close_all()

    def state(self) -> tuple[Any, ...]:
        """Everything a request can change, as plain values (compare before and after a rejected request)."""
        files = sorted((file.path, file.kind.value) for file in self.fileio.files.values())
        process = None if self._process is None else self._process.summary()
        return (process, tuple(files), tuple(self.faults), tuple(self.unhandled_faults), tuple(self.queue_errors))

    def state_digest(self) -> str:
        """A SHA-256 of :meth:`state`."""
        return hashlib.sha256(repr(self.state()).encode()).hexdigest()

    def __enter__(self) -> MockKFD:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        gpus = ", ".join(f"{gpu.identity.render_path}={gpu.port.gfx_target_version}" for gpu in self.gpus)
        return f"MockKFD({gpus or 'no GPUs'})"
