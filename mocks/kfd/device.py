"""MockKFD: amdkfd, the device files and the sysfs topology it publishes, over emulated GPUs.

``MockKFD().fileio`` is a :class:`~tinyhil.fileio.FileIO`; a KFD client given it runs unchanged against the emulated
GPUs, which MockKFD reaches only through :class:`~tinyhil.mocks.kfd.GpuPort`. Two forms build one::

    MockKFD()                                            # a fresh machine: two emulated gfx1100 GPUs, seed 0
    MockKFD(gpus=4, arch="gfx1201", seed=3, vram_bytes=64 << 20)   # a fresh machine of n GPUs of one arch
    MockKFD([gpu0, gpu1])                                # given parts: any GpuPorts on one EventKernel
    MockKFD(gpus=4, seed=3, faults=KfdFaultPlan((AllocFailure(2),)))   # either form, with a fault plan
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final

from tinyhil._check import check_int
from tinyhil.emulators.amdgpu import AmdGpu
from tinyhil.emulators.kernel import EventKernel
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.mocks.kfd.dispatch import IoctlDispatcher
from tinyhil.mocks.kfd.events import EventIoctls
from tinyhil.mocks.kfd.faults import KfdFaultPlan, KfdFaults
from tinyhil.mocks.kfd.fileio import MockFileIO
from tinyhil.mocks.kfd.gpu_port import GpuPort
from tinyhil.mocks.kfd.memory import MemoryIoctls
from tinyhil.mocks.kfd.queues import QueueIoctls
from tinyhil.mocks.kfd.state import GpuDevice, HostMemory, Process, anonymous_memory
from tinyhil.mocks.kfd.topology import SysfsTree, gpu_identities, model_for
from tinyhil.mocks.kfd.usermem import MAPS_PATH, UserMemory

__all__ = ["DEFAULT_GTT_LIMIT_BYTES", "PORT_MEMBERS", "MockKFD"]

DEFAULT_GTT_LIMIT_BYTES: Final = 4 << 30


def _protocol_members(protocol: type) -> tuple[str, ...]:
    """The members a runtime-checkable ``protocol`` requires (its annotated attributes, properties and methods)."""
    names = set(getattr(protocol, "__annotations__", {}))
    names.update(name for name in vars(protocol) if not name.startswith("_"))
    return tuple(sorted(names))


# Derived from the protocol, so the check cannot drift from it (``isinstance(port, GpuPort)`` asks the same).
PORT_MEMBERS: Final = _protocol_members(GpuPort)
_BUILD_OPTIONS: Final = ("gpus", "arch", "seed", "vram_bytes")


def _build_ports(gpus: Any, arch: Any, seed: Any, vram_bytes: Any, host_memory: HostMemory) -> list[AmdGpu]:
    """A fresh machine: ``gpus`` emulated AMD GPUs of ``arch`` on one new EventKernel seeded with ``seed``, their
    VRAM from ``host_memory``."""
    # Imported here: the target module imports the registry, and the arch table must stay in one place.
    from tinyhil.mocks.targets import AMD_ARCHS, GFX_TARGET_VERSIONS, MOCKKFD_GPUS, MOCKKFD_MAX_GPUS, MOCKKFD_VRAM_BYTES

    if isinstance(gpus, Sequence) and not isinstance(gpus, str):
        raise InvalidArgument(f"gpus={gpus!r}, expected an int (the GPU count); pass given ports as MockKFD(ports)")
    count = check_int("gpus", MOCKKFD_GPUS if gpus is None else gpus)
    if not 1 <= count <= MOCKKFD_MAX_GPUS:
        raise InvalidArgument(f"gpus={count}, expected 1..{MOCKKFD_MAX_GPUS} (MOCKKFD_MAX_GPUS)")
    arch = AMD_ARCHS[0] if arch is None else arch
    if not isinstance(arch, str) or arch not in GFX_TARGET_VERSIONS:
        raise InvalidArgument(f"arch={arch!r}, expected one of {', '.join(AMD_ARCHS)}")
    kernel = EventKernel(check_int("seed", 0 if seed is None else seed))
    size = check_int("vram_bytes", MOCKKFD_VRAM_BYTES if vram_bytes is None else vram_bytes, min_value=1)
    version = GFX_TARGET_VERSIONS[arch]
    return [
        AmdGpu(kernel, vram_bytes=size, gfx_target_version=version, name=f"gpu{n}", vram_backing=host_memory(size))
        for n in range(count)
    ]


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

    Build a fresh machine with ``gpus`` (default two; at most ``MOCKKFD_MAX_GPUS``), ``arch`` (default ``gfx1100``;
    one of :data:`~tinyhil.mocks.targets.AMD_ARCHS`), ``seed`` (the new EventKernel's, default 0) and ``vram_bytes``
    (per GPU), or pass the parts: ``ports``, any :class:`GpuPort` objects, not both. ``faults`` (a
    :class:`~tinyhil.mocks.kfd.faults.KfdFaultPlan`, either form) injects allocation failures, hung queues and
    memory faults; :attr:`fault_plan` keeps it. ``host_memory`` (:data:`~tinyhil.mocks.kfd.state.HostMemory`) makes
    the host memory MOCKKFD hands out and the built GPUs' VRAM (``tinyhil serve kfd`` shares it with its client).

    All GPUs must share one :class:`~tinyhil.emulators.kernel.EventKernel`: waits run it in virtual time. The
    KFD process (allocations, queues, events, each GPU's VM) is per process, keyed by ``os.getpid()`` as amdkfd keys
    it by the process's mm: created at the process's first open of ``/dev/kfd`` and kept after its files close,
    until :meth:`exit_process` (what the process's exit does) or :meth:`close` (every process exits), so a second
    ``ACQUIRE_VM`` of a GPU from another render node file is ``EBUSY`` as on Linux (docs/mockkfd.md "Process
    lifetime"). A forked child is a process of its own.

    Raises:
        InvalidArgument: a bad build option (the message lists the valid choices), both ports and build options, a
            port lacks part of the GpuPort API, the ports run on different event kernels, or ``faults`` is not a
            KfdFaultPlan for this many GPUs.
    """

    def __init__(
        self,
        ports: Sequence[GpuPort] | None = None,
        *,
        gpus: int | None = None,
        arch: str | None = None,
        seed: int | None = None,
        vram_bytes: int | None = None,
        faults: KfdFaultPlan | None = None,
        gtt_limit_bytes: int = DEFAULT_GTT_LIMIT_BYTES,
        maps_path: str = MAPS_PATH,
        host_memory: HostMemory = anonymous_memory,
    ) -> None:
        options = dict(zip(_BUILD_OPTIONS, (gpus, arch, seed, vram_bytes), strict=True))
        if ports is None:
            ports = _build_ports(gpus, arch, seed, vram_bytes, host_memory)
        elif given := [f"{name}=..." for name, value in options.items() if value is not None]:
            raise InvalidArgument(f"MockKFD(ports, {', '.join(given)}): those options build a fresh machine; give "
                                  "either the ports (given parts) or the build options, not both")  # fmt: skip
        try:
            ports = list(ports)
        except TypeError:
            raise InvalidArgument(f"ports={ports!r}, expected a sequence of GpuPorts (n fresh GPUs: gpus=n)") from None
        for index, port in enumerate(ports):
            missing = [name for name in PORT_MEMBERS if not hasattr(port, name)]
            if missing:
                raise InvalidArgument(f"ports[{index}]={type(port).__name__} lacks GpuPort members {missing}")
        if len({id(port.kernel) for port in ports}) > 1:
            raise InvalidArgument("the GPUs run on different EventKernels; give every GPU of one MockKFD the same one")
        plan = KfdFaultPlan() if faults is None else faults
        if not isinstance(plan, KfdFaultPlan):
            raise InvalidArgument(f"faults={faults!r}, expected None or a KfdFaultPlan (tinyhil.mocks.kfd.faults)")
        plan.check_gpus(len(ports))
        self.fault_plan = plan
        self.host_memory = host_memory
        self.injected = KfdFaults(plan)
        self.gtt_limit_bytes = check_int("gtt_limit_bytes", gtt_limit_bytes, min_value=0)
        self._kernel = ports[0].kernel if ports else EventKernel()
        versions = [check_int("gfx_target_version", port.gfx_target_version, min_value=1) for port in ports]
        identities = gpu_identities(versions)
        self.gpus = tuple(
            GpuDevice(port, identity, model_for(version), host_memory)
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
        self._processes: dict[int, Process] = {}
        for gpu in self.gpus:
            gpu.port.on_interrupt = functools.partial(self.events.interrupt, gpu)

    @property
    def kernel(self) -> EventKernel:
        """The event kernel every GPU runs on (waits advance its virtual clock)."""
        return self._kernel

    @property
    def has_process(self) -> bool:
        """Whether the calling process has a KFD process (it opened ``/dev/kfd`` and has not exited)."""
        return os.getpid() in self._processes

    @property
    def process(self) -> Process:
        """The calling process's KFD process.

        Raises:
            StateError: this process never opened /dev/kfd (or exited since).
        """
        process = self._processes.get(os.getpid())
        if process is None:
            raise StateError(f"MockKFD has no process for pid {os.getpid()}: open /dev/kfd through its fileio first")
        return process

    def ensure_process(self) -> Process:
        """The calling process's KFD process, created on its first open of ``/dev/kfd`` (``kfd_create_process``)."""
        return self._processes.setdefault(os.getpid(), Process(self.gpus))

    def gpu_by_id(self, gpu_id: int) -> GpuDevice | None:
        return next((gpu for gpu in self.gpus if gpu.gpu_id == gpu_id), None)

    def _end(self, process: Process) -> None:
        """A KFD process ends: its queues destroyed, its allocations unmapped and freed (the event page too)."""
        for queue in list(process.queues.values()):
            self.queues.destroy(queue, process)
        for pdd in process.pdds.values():
            for allocation in pdd.allocations.values():
                for gpu_id in list(allocation.mapped_on):
                    self.memory.unmap(allocation, process.pdds[gpu_id].gpu)
                self.memory.release(allocation, pdd.gpu)
            pdd.allocations.clear()

    def exit_process(self) -> None:
        """What the calling process's exit does to amdkfd: destroy its queues, unmap and free its allocations (the
        event page too), drop its VMs and close its files. The machine stays; the process's next open of
        ``/dev/kfd`` starts a fresh KFD process (idempotent)."""
        process = self._processes.pop(os.getpid(), None)
        if process is not None:
            self._end(process)
            if not self._processes:  # the doorbell frames and MMIO pages were its own: the next process's are fresh
                for gpu in self.gpus:
                    gpu.new_process_pages()
        self.fileio.close_process_files(os.getpid())

    def close(self) -> None:
        """Every process exits (:meth:`exit_process`) and the machine is reset: the GPUs' memory and pages, and the
        fault plan's counters."""
        while self._processes:
            self._end(self._processes.popitem()[1])
        for gpu in self.gpus:
            gpu.reset()
        self.injected.reset()
        self.fileio.close_all()

    def state(self) -> tuple[Any, ...]:
        """Everything a request can change, as plain values (compare before and after a rejected request)."""
        files = sorted((file.path, file.kind.value) for file in self.fileio.files.values())
        process = tuple(self._processes[pid].summary() for pid in sorted(self._processes)) or None
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
