"""The KFD+AMD device runtime: :class:`~tinyhil.amdgpu.driver.AmdDeviceBase` over the reference KFD client.

The same code runs on a machine with ``/dev/kfd`` (``KFD+AMD``) and on MOCKKFD (``MOCKKFD+AMD``); only the
:class:`~tinyhil.fileio.FileIO` differs. Memory placement:

| use | KFD memory |
|---|---|
| user buffers | VRAM, no CPU mapping (the host reaches them through SDMA) |
| signals, timestamps, code objects, kernel arguments | GTT, mapped for the CPU through the render node |
| copyin / copyout staging | one GTT buffer (``staging_bytes``), mapped for the CPU |
| rings, read / write pointers | userptr host memory (the client's queues) |

copyin copies the caller's bytes into the staging buffer (one slice assignment per chunk), then SDMA COPY_LINEAR
moves them to VRAM; copyout runs the reverse. Waits sleep on a KFD signal event the engines fire after each fence,
and on the process's memory- and hardware-exception events, so a GPU memory fault surfaces as
:class:`~tinyhil.kfd.KfdMemoryFault` naming the faulting address, and a queue amdkfd reset (a hang, a wave trap) as
:class:`~tinyhil.amdgpu.QueueStopped` naming this device's queue that had work left (docs/amdgpu.md "Kernel
executor"); the runtime then replaces it.

Every device a process opens on one system shares the process's KFD session (:mod:`tinyhil.kfd.session`):
``/dev/kfd`` and each GPU's render node are opened, and each VM acquired, once per process, as amdkfd requires. A
device's close frees what it allocated (buffers, queues, its event, its staging buffer); the session stays.
:meth:`KfdAmdDevice.open_peer` opens another GPU of the same session.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterable
from typing import Any, Final, cast

from tinyhil._check import check_int
from tinyhil.align import ceil_div
from tinyhil.allocator import OutOfMemory
from tinyhil.amdgpu.driver import WAIT_TIMEOUT_MS, AmdDeviceBase
from tinyhil.amdgpu.errors import QueueStopped
from tinyhil.amdgpu.interfaces import AmdRing, CompletionEvent, GpuRegion, MemoryUse
from tinyhil.compiler import Compiler
from tinyhil.device import Buffer
from tinyhil.errors import DeviceTimeout, InvalidArgument
from tinyhil.fileio import FileIO
from tinyhil.kfd.client import KfdEvent, KfdHwException, KfdMemoryFault
from tinyhil.kfd.gpu import Allocation, KfdGpu, MemoryDomain
from tinyhil.kfd.queue import KfdQueue, QueueEngine
from tinyhil.kfd.session import KfdSession, process_session
from tinyhil.kfd.topology import KfdNode
from tinyhil.spec.amdgpu import QueueKind
from tinyhil.spec.amdgpu_pm4 import PM4_HEADER_OPCODE
from tinyhil.spec.amdgpu_sdma import SDMA_HEADER_OP

__all__ = ["DEFAULT_STAGING_BYTES", "KFD_CAPABILITIES", "KfdAmdDevice"]

DEFAULT_STAGING_BYTES: Final = 64 << 20
KFD_CAPABILITIES: Final = frozenset({"kfd", "fault-recovery"})  # fault-recovery: _replace_queue
_POLL_MS: Final = 100  # one WAIT_EVENTS at most this long between checks of the awaited condition
_NS_PER_MS: Final = 1_000_000
_ENGINES: Final = {QueueKind.SDMA: QueueEngine.SDMA, QueueKind.COMPUTE: QueueEngine.COMPUTE}


class KfdAmdDevice(AmdDeviceBase):
    """GPU ``gpu_index`` of a KFD connection as a device; open it with :meth:`open` (see the module docstring)."""

    def __init__(
        self,
        name: str,
        session: KfdSession,
        *,
        gpu_index: int = 0,
        compiler: Compiler | None = None,
        capabilities: Iterable[str] = (),
        staging_bytes: int = DEFAULT_STAGING_BYTES,
        wait_timeout_ms: int = WAIT_TIMEOUT_MS,
    ) -> None:
        kfd = session.kfd
        check_int("gpu_index", gpu_index, min_value=0)
        if gpu_index >= len(kfd.gpus):
            raise InvalidArgument(f"gpu_index={gpu_index}, expected < {len(kfd.gpus)} (GPUs: {list(kfd.gpus)})")
        caps = KFD_CAPABILITIES | frozenset(capabilities)
        if len(kfd.gpus) > 1:
            caps |= {"multi-gpu"}
        session.hold(gpu_index, name)
        try:
            super().__init__(name, caps, compiler=compiler, wait_timeout_ms=wait_timeout_ms)
        except BaseException:
            session.release(gpu_index, name)
            raise
        self._session = session
        self._gpu_index = gpu_index
        self._peer_compiler = compiler
        self._peer_capabilities = frozenset(capabilities)
        self.kfd = kfd
        self._queues: list[KfdQueue] = []
        self._event: KfdEvent | None = None
        try:
            self.gpu: KfdGpu = kfd.device(gpu_index)
            self._staging = self.gpu.alloc(check_int("staging_bytes", staging_bytes, min_value=4096), MemoryDomain.GTT)
            self._staging_view = memoryview(self._cpu(self._staging)).cast("B")
            self._start()
        except BaseException:
            self._release()
            raise

    @classmethod
    def open(
        cls,
        name: str,
        fileio: FileIO | None = None,
        *,
        gpu_index: int = 0,
        compiler: Compiler | None = None,
        capabilities: Iterable[str] = (),
        on_close: Callable[[], None] | None = None,
        staging_bytes: int = DEFAULT_STAGING_BYTES,
    ) -> KfdAmdDevice:
        """GPU ``gpu_index`` of the process's KFD session on ``fileio`` (default: this machine), opening the session
        (``/dev/kfd``) if the process has none.

        ``on_close``, for a machine that lives only as long as its devices (a MOCKKFD built for this open), makes a
        session this call opens end with its last device and then runs (:class:`~tinyhil.kfd.session.KfdSession`).

        Raises:
            FileNotFoundError: no ``/dev/kfd``.
            InvalidArgument: no GPU ``gpu_index``.
        """
        try:
            session = process_session(fileio, on_end=on_close)
        except BaseException:
            if on_close is not None:
                on_close()
            raise
        try:
            return cls(name, session, gpu_index=gpu_index, compiler=compiler, capabilities=capabilities,
                       staging_bytes=staging_bytes)  # fmt: skip
        except BaseException:
            if not session.users and session.on_end is not None:
                session.end()
            raise

    # --- several GPUs --------------------------------------------------------------------------------------------
    @property
    def gpu_index(self) -> int:
        return self._gpu_index

    @property
    def gpu_count(self) -> int:
        return len(self.kfd.gpus)

    @property
    def node(self) -> KfdNode:
        """This GPU's topology node (``node.arch``: ``gfx1100`` and the like)."""
        return self.gpu.node

    def open_peer(self, index: int, name: str | None = None) -> KfdAmdDevice:
        """Open GPU ``index`` of the same KFD session as a second device (close it on its own).

        Raises:
            InvalidArgument: no such GPU, or this device's own.
        """
        if index == self._gpu_index:
            raise InvalidArgument(f"gpu_index={index} is this device's own GPU, already open as {self.name!r}; "
                                  "a peer is another GPU")  # fmt: skip
        peer_name = name if name is not None else f"{self.name}#gpu{index}"
        return KfdAmdDevice(peer_name, self._session, gpu_index=index, compiler=self._peer_compiler,
                            capabilities=self._peer_capabilities, wait_timeout_ms=self.wait_timeout_ms)  # fmt: skip

    # --- AmdDeviceBase hooks -------------------------------------------------------------------------------------
    @staticmethod
    def _cpu(allocation: Allocation) -> memoryview:
        assert allocation.cpu is not None  # allocated with cpu_access
        return memoryview(cast(Any, allocation.cpu))

    def _gpu_alloc(self, nbytes: int, use: MemoryUse) -> GpuRegion:
        """Raises:
        OutOfMemory (``InvalidArgument``, ``MemoryError``): KFD has no room for it (``ENOMEM``), as every other
            device runtime reports an allocation larger than its memory; nothing is allocated."""
        domain = MemoryDomain.VRAM if use is MemoryUse.BUFFER else MemoryDomain.GTT
        try:
            if use is MemoryUse.BUFFER:
                allocation = self.gpu.alloc(nbytes, domain, cpu_access=False)
            else:
                allocation = self.gpu.alloc(nbytes, domain, uncached=use is MemoryUse.SIGNAL)
        except OSError as error:
            if error.errno != errno.ENOMEM:
                raise
            raise OutOfMemory(f"{self.name}: cannot allocate {nbytes:#x} bytes of {domain.name}: {error}") from error
        return GpuRegion(allocation.va, allocation.size, use, allocation)

    def _gpu_free(self, region: GpuRegion) -> None:
        self.gpu.free(region.handle)

    def _host_write(self, region: GpuRegion, offset: int, data: bytes | memoryview) -> None:
        region.handle.write(offset, data)

    def _host_read(self, region: GpuRegion, offset: int, nbytes: int) -> bytes:
        data: bytes = region.handle.read(offset, nbytes)
        return data

    def _create_queue(self, kind: QueueKind) -> AmdRing:
        queue = self.gpu.create_queue(_ENGINES[kind])
        self._queues.append(queue)
        return queue

    def _replace_queue(self, kind: QueueKind, ring: AmdRing) -> AmdRing | None:
        for queue in self._queues:
            if queue is ring:
                self._queues.remove(queue)
                self.gpu.destroy_queue(queue)
                return self._create_queue(kind)
        return None

    def _completion_event(self) -> CompletionEvent | None:
        self._event = self.kfd.create_event(auto_reset=True)
        assert self._event.mailbox_va is not None  # signal events own an event-page slot
        return CompletionEvent(self._event.mailbox_va, self._event.event_id)

    def _wait(self, condition: Callable[[], bool], what: str) -> None:
        deadline = self.kfd.now_ns() + self.wait_timeout_ms * _NS_PER_MS
        events = [] if self._event is None else [self._event]
        faults = self._session.faults
        while not condition():
            pending = faults.pop(self.gpu.gpu_id, None)
            if isinstance(pending, KfdHwException):
                raise self._stopped_queue(pending)
            if pending is not None:
                raise pending
            remaining_ms = ceil_div(deadline - self.kfd.now_ns(), _NS_PER_MS)
            if remaining_ms <= 0:
                raise DeviceTimeout(f"{self.name}: timed out after {self.wait_timeout_ms} ms waiting for {what}")
            try:
                self.kfd.wait_events(events, timeout_ms=min(remaining_ms, _POLL_MS))
            except (KfdMemoryFault, KfdHwException) as fault:  # the process's events: maybe another GPU's
                if fault.gpu_id != self.gpu.gpu_id:
                    faults[fault.gpu_id] = fault
                elif isinstance(fault, KfdHwException):
                    raise self._stopped_queue(fault) from None
                else:
                    raise

    def _stopped_queue(self, exception: KfdHwException) -> QueueStopped:
        """The hardware exception as the stopped queue: amdkfd names only the GPU, so the queue is this device's
        queue with work left (the first, if several), and the packet its read pointer stopped at."""
        busy = [queue for queue in self._queues if not queue.idle] or self._queues
        queue = busy[0]
        unit = queue.engine.pointer_unit_bytes
        ring_offset = queue.read_pointer * unit % queue.ring_bytes
        header = int.from_bytes(queue.ring.read(ring_offset, 4), "little")
        name = f"{queue.engine.name.lower()} queue {queue.queue_id}"
        return QueueStopped(
            f"{self.name}: {name} stopped at ring offset {ring_offset:#x} (header {header:#010x}): {exception}",
            queue=name, status=exception.reset_type, error_code=exception.reset_cause,
            opcode=(PM4_HEADER_OPCODE if queue.engine is QueueEngine.COMPUTE else SDMA_HEADER_OP).get(header),
            sub_op=0, ring_offset=ring_offset, fault_addr=None,
        )  # fmt: skip

    def _release(self) -> None:
        try:
            for queue in self._queues:
                self.gpu.destroy_queue(queue)
            if self._event is not None:
                self._event.destroy()
                self.kfd.events.remove(self._event)
            view: memoryview | None = getattr(self, "_staging_view", None)
            if view is not None:
                view.release()
            staging: Allocation | None = getattr(self, "_staging", None)
            if staging is not None:
                self.gpu.free(staging)
        finally:
            self._queues.clear()
            self._session.release(self._gpu_index, self.name)

    # --- copyin / copyout through the staging buffer -------------------------------------------------------------
    def _copyin(self, buf: Buffer, data: memoryview, offset: int) -> None:
        staging, chunk = self._staging, self._staging.size
        self._synchronize()  # the staging buffer is free, and earlier work on buf is done
        for at in range(0, data.nbytes, chunk):
            count = min(chunk, data.nbytes - at)
            self._staging_view[:count] = data[at : at + count]
            self._dma(buf.addr + offset + at, staging.va, count, name="copyin")

    def _copyout(self, buf: Buffer, out: memoryview, offset: int) -> None:
        staging, chunk = self._staging, self._staging.size
        for at in range(0, out.nbytes, chunk):
            count = min(chunk, out.nbytes - at)
            self._dma(staging.va, buf.addr + offset + at, count, name="copyout")
            out[at : at + count] = self._staging_view[:count]

    def _copyout_bytes(self, buf: Buffer, nbytes: int, offset: int) -> bytearray:
        # One pass per chunk: the result is built from the staging bytes (no zero-fill of a fresh bytearray first).
        chunk = self._staging.size
        out: bytearray | None = None
        for at in range(0, nbytes, chunk):
            count = min(chunk, nbytes - at)
            self._dma(self._staging.va, buf.addr + offset + at, count, name="copyout")
            if out is None:
                out = bytearray(self._staging_view[:count])
            else:
                out += self._staging_view[:count]
        assert out is not None  # nbytes > 0
        return out
