"""The emulated AMD GPU: one core (memory, queues, engines, executor) behind two front ends (gfx1100, KFD)."""

from __future__ import annotations

import logging
import mmap
from collections.abc import Callable
from typing import Final

import numpy as np

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.spec.amdgpu import QueueKind

from ..kernel import EventKernel, VirtualTimeout
from ..observe import Observation, Observed, Observer
from ..pcie import DEFAULT_VRAM_BYTES
from .engine import EngineServices, Interrupt, QueueConfig, RingEngine
from .executor import HostNativeExecutor, KernelExecutor
from .mappings import FlatTranslation
from .memory import AddressSpace, IoRegion, Vram
from .pm4 import Pm4Engine
from .queues import Queue
from .sdma import SdmaEngine
from .system_bus import SystemBus
from .timing import DEFAULT_TIMING, GpuTiming

__all__ = ["AmdGpu"]

_log = logging.getLogger("tinyhil.emulators.amdgpu")
_ENGINES: Final[dict[QueueKind, type[RingEngine]]] = {QueueKind.SDMA: SdmaEngine, QueueKind.COMPUTE: Pm4Engine}


class AmdGpu:
    """An engine-level AMD GPU (docs/amdgpu.md) running on an :class:`EventKernel`.

    GPU address space (an :class:`AddressSpace`; by default a :class:`FlatTranslation`):

    | GPU address | what |
    |---|---|
    | ``0 .. vram_bytes`` | VRAM (``vram_at_zero``, default: when a ``system_bus`` is given) |
    | ``map_memory`` ranges | VRAM slices and host buffers (the KFD path) |
    | ``SYS_APERTURE + pcie_addr`` | a caller's ``system_bus`` (engine tests' stand-in for the bridge's memory) |

    The front ends own the registers: :mod:`tinyhil.emulators.amdgpu.gfx1100` gives this core Navi 31's register
    interface and an address space translated by its page tables (``memory``), MOCKKFD drives it through the
    kernel's uapi.

    ``on_interrupt`` receives TRAPs, RELEASE_MEM events, memory faults and queue errors (:class:`Interrupt`).
    ``vram_backing`` (a mapping of ``vram_bytes``) backs VRAM with memory the caller shares (:class:`Vram`).
    """

    def __init__(
        self,
        kernel: EventKernel,
        *,
        vram_bytes: int = DEFAULT_VRAM_BYTES,
        gfx_target_version: int = 110000,
        system_bus: SystemBus | None = None,
        name: str = "gpu0",
        vram_at_zero: bool | None = None,
        timing: GpuTiming = DEFAULT_TIMING,
        executor: KernelExecutor | None = None,
        memory: AddressSpace | None = None,
        vram_backing: mmap.mmap | None = None,
    ) -> None:
        self.kernel = kernel
        self.gfx_target_version = check_int("gfx_target_version", gfx_target_version, min_value=1)
        self.name = name
        self.timing = timing
        self.executor: KernelExecutor = executor if executor is not None else HostNativeExecutor()
        at_zero = system_bus is not None if vram_at_zero is None else vram_at_zero
        # ``memory``: a prebuilt address space (the gfx1100 front end's page tables); it fixes the VRAM size.
        if memory is None:
            vram = Vram(vram_bytes, vram_backing)
            flat = FlatTranslation(vram, vram_at_zero=at_zero, aperture=system_bus is not None)
            memory = AddressSpace(vram, flat, IoRegion("system bus", system_bus))
        self.memory = memory
        self.memory.on_write = self.memory_written
        self.on_interrupt: Callable[[Interrupt], None] | None = None
        self._services = EngineServices(self.memory, kernel, timing, self._interrupt, self.executor)
        self._queues: dict[int, Queue] = {}
        self._waiting: dict[int, Queue] = {}  # the queues waiting on a poll, by id (kept by the queues)
        self.reset()

    def reset(self) -> None:
        """Power-on state: no queues, default mappings, zeroed VRAM."""
        for queue in list(self._queues.values()):
            queue.cancel()
        self._queues = {}
        self._waiting.clear()
        self._doorbells: dict[int, Queue] = {}
        self._next_queue_id = 0
        self.memory.reset()

    def observe(self, observer: Observer) -> Observation:
        """Report this GPU's SDMA memory polls to ``observer`` until the returned handle detaches
        (:mod:`tinyhil.emulators.observe`)."""
        return self._services.observed.attach(observer)

    @property
    def observed(self) -> Observed:
        """The observers :meth:`observe` attached (front ends report their events through it)."""
        return self._services.observed

    def __repr__(self) -> str:
        return f"<AmdGpu {self.name} gfx{self.gfx_target_version} vram={self.vram_bytes >> 20} MB>"

    @property
    def vram_bytes(self) -> int:
        return self.memory.vram_bytes

    @property
    def vram(self) -> memoryview:
        """The whole VRAM (lazily committed)."""
        return self.memory.vram

    @property
    def system_bus(self) -> SystemBus | None:
        return self.memory.system_bus

    @property
    def queues(self) -> tuple[Queue, ...]:
        return tuple(self._queues.values())

    # --- memory ---
    def map_memory(self, va: int, backing: memoryview) -> None:
        """Map ``backing`` (a VRAM slice, a GTT or userptr host buffer) at GPU address ``va``.

        Raises:
            InvalidArgument: misaligned, empty, overlapping or read-only; nothing changes.
            StateError: the address space is not a flat one (page tables map the gfx1100 model's memory).
        """
        self._flat("map_memory").map(va, backing)

    def unmap_memory(self, va: int) -> None:
        """Remove the mapping starting at ``va``.

        Raises:
            InvalidArgument: no mapping starts there.
            StateError: the address space is not a flat one.
        """
        self._flat("unmap_memory").unmap(va)

    def _flat(self, method: str) -> FlatTranslation:
        translation = self.memory.translation
        if not isinstance(translation, FlatTranslation):
            raise StateError(
                f"{self.name}.{method}: the address space is translated by {type(translation).__name__}, expected "
                "a FlatTranslation (map through the page tables instead)"
            )
        return translation

    def read(self, va: int, nbytes: int) -> memoryview:
        """The bytes at GPU address ``va``, translated as the engines see them (a live read-only view when they
        lie in one mapping; copy with ``bytes()`` to keep a snapshot).

        Raises:
            GpuMemoryFault: part of the range is unmapped.
        """
        check_int("va", va, min_value=0)
        check_int("nbytes", nbytes, min_value=0)
        return self.memory.read(va, nbytes).toreadonly()

    def write(self, va: int, data: bytes | bytearray | memoryview | np.ndarray) -> None:
        """Write at GPU address ``va`` as the host (waiters on the range wake).

        Raises:
            GpuMemoryFault: part of the range is unmapped (nothing is written).
        """
        check_int("va", va, min_value=0)
        self.memory.write(va, data)

    def memory_written(self, va: int, nbytes: int) -> None:
        """The host wrote GPU-visible memory at ``[va, va + nbytes)`` directly: wake the queues polling it."""
        waiting = self._waiting
        if not waiting:  # most writes land while no queue polls
            return
        for queue_id in sorted(waiting):  # queue order, as the queues were created
            waiting[queue_id].wake(va, nbytes)

    def polling_queues(self) -> tuple[Queue, ...]:
        """The queues whose engine waits on a memory poll now, in creation order."""
        waiting = self._waiting
        if not waiting:  # most writes land while no queue polls
            return ()
        return tuple(waiting[queue_id] for queue_id in sorted(waiting))

    def timestamp(self) -> int:
        """The 100 MHz GPU timestamp counter (virtual time in 10 ns ticks)."""
        return self._services.timestamp()

    # --- queues ---
    def create_queue(
        self, kind: QueueKind, *, ring_va: int, ring_bytes: int, rptr_va: int, wptr_va: int, doorbell_index: int
    ) -> Queue:
        """Create an SDMA or compute (PM4) queue; its read pointer starts at 0.

        Raises:
            InvalidArgument: bad ring size or alignment, or the doorbell already kicks another queue.
        """
        try:
            kind = QueueKind(kind)
        except ValueError:
            raise InvalidArgument(f"kind={kind!r}, expected QueueKind.SDMA or QueueKind.COMPUTE") from None
        config = QueueConfig(kind, ring_va, ring_bytes, rptr_va, wptr_va, doorbell_index)
        other = self._doorbells.get(config.doorbell_index)
        if other is not None:
            raise InvalidArgument(f"doorbell_index={config.doorbell_index}, expected a free doorbell ({other.name})")
        queue_id = self._next_queue_id
        self._next_queue_id += 1
        name = f"{config.kind.name} queue {queue_id}"
        engine = _ENGINES[config.kind](self._services, config, queue_id, name)
        queue = Queue(queue_id, config, engine, self.kernel, self._waiting)
        self._queues[queue_id] = self._doorbells[config.doorbell_index] = queue
        return queue

    def destroy_queue(self, queue: Queue) -> None:
        """Destroy a queue: it stops at once and its doorbell is freed.

        Raises:
            InvalidArgument: the queue is not a live queue of this GPU.
        """
        if self._queues.get(getattr(queue, "id", -1)) is not queue:
            raise InvalidArgument(f"queue={queue!r}, expected a live queue of {self.name}")
        queue.cancel()
        del self._queues[queue.id]
        del self._doorbells[queue.doorbell_index]

    def ring_doorbell(self, doorbell_index: int, value: int) -> None:
        """Kick the queue bound to ``doorbell_index``; a doorbell without a queue is dropped (and logged).

        The engine takes its write pointer from memory (the queue's ``wptr_va``), which the host
        writes before ringing with the same value; ``value`` itself only appears in the log.
        """
        queue = self._doorbells.get(doorbell_index)
        if queue is None:
            _log.info("%s: doorbell %d rung with %#x but no queue uses it", self.name, doorbell_index, value)
            return
        queue.kick()

    def wait(self, condition: Callable[[], bool], timeout_ns: int, *, what: str) -> None:
        """Run the event kernel until ``condition()`` holds; a stopped queue ends the wait at once.

        Raises:
            GpuQueueError: a queue stopped before the condition held.
            VirtualTimeout: the condition did not hold within ``timeout_ns`` of virtual time; the message lists
                what each queue is doing.
        """
        try:
            self.kernel.run_until(lambda: condition() or any(q.stopped for q in self.queues), timeout_ns, what=what)
        except VirtualTimeout as timeout:
            states = "; ".join(q.describe() for q in self.queues) or "no queues"
            raise VirtualTimeout(f"{what} ({states})", timeout.timeout_ns, timeout.now_ns) from None
        if not condition():
            for queue in self.queues:
                queue.check()

    def _interrupt(self, interrupt: Interrupt) -> None:
        if self.on_interrupt is not None:
            self.on_interrupt(interrupt)
