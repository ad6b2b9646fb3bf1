"""A memory-only GpuPort for MOCKKFD's tests: real address translation, recorded queues / doorbells / writes,
and interrupts on demand. It runs no packets: queue execution is tested against the real GPU model."""

from __future__ import annotations

import bisect
import mmap
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from tinyhil.emulators.kernel import EventKernel
from tinyhil.errors import DeviceError, InvalidArgument


class FakeMemoryFault(DeviceError):
    """An access to an unmapped GPU address."""

    def __init__(self, va: int) -> None:
        super().__init__(f"GPU memory fault at {va:#x}")
        self.va = va


class FakeInterruptKind(Enum):
    """The GPU's own enum (not MOCKKFD's): the mock matches kinds by name."""

    TRAP = 1
    END_OF_PIPE = 2
    MEMORY_FAULT = 3
    PERFCOUNTER = 4
    QUEUE_ERROR = 5


@dataclass(frozen=True)
class FakeInterrupt:
    kind: FakeInterruptKind
    queue_id: int = 0
    context: int = 0
    fault_va: int | None = None
    message: str = ""


@dataclass(eq=False)
class FakeQueue:
    kind: Any
    ring_va: int
    ring_bytes: int
    rptr_va: int
    wptr_va: int
    doorbell_index: int
    doorbells: list[int] = field(default_factory=list)


class FakeGpu:
    """Implements GpuPort over a VRAM mmap and a table of mappings."""

    def __init__(self, kernel: EventKernel, *, gfx_target_version: int = 110000, vram_bytes: int = 64 << 20) -> None:
        self.kernel = kernel
        self.gfx_target_version = gfx_target_version
        self.vram_bytes = vram_bytes
        self._vram = mmap.mmap(-1, vram_bytes)
        self.vram = memoryview(self._vram)
        self.on_interrupt: Any = None
        self._starts: list[int] = []
        self.mappings: dict[int, memoryview] = {}
        self.queues: list[FakeQueue] = []
        self.doorbells: list[tuple[int, int]] = []
        self.written: list[tuple[int, int]] = []

    def map_memory(self, va: int, backing: memoryview) -> None:
        size = len(backing)
        for start, view in self.mappings.items():
            if start < va + size and va < start + len(view):
                raise InvalidArgument(f"{va:#x}+{size:#x} overlaps the mapping at {start:#x}")
        bisect.insort(self._starts, va)
        self.mappings[va] = backing

    def unmap_memory(self, va: int) -> None:
        if va not in self.mappings:
            raise InvalidArgument(f"nothing is mapped at {va:#x}")
        del self.mappings[va]
        self._starts.remove(va)

    def _translate(self, va: int, nbytes: int) -> memoryview:
        index = bisect.bisect_right(self._starts, va) - 1
        if index >= 0:
            start = self._starts[index]
            view = self.mappings[start]
            if va + nbytes <= start + len(view):
                return view[va - start : va - start + nbytes]
        raise FakeMemoryFault(va)

    def read(self, va: int, nbytes: int) -> memoryview:
        return self._translate(va, nbytes)

    def write(self, va: int, data: Any) -> None:
        source = memoryview(data).cast("B")
        self._translate(va, len(source))[:] = source

    def create_queue(
        self, kind: Any, *, ring_va: int, ring_bytes: int, rptr_va: int, wptr_va: int, doorbell_index: int
    ) -> FakeQueue:
        queue = FakeQueue(kind, ring_va, ring_bytes, rptr_va, wptr_va, doorbell_index)
        self.queues.append(queue)
        return queue

    def destroy_queue(self, queue: FakeQueue) -> None:
        self.queues.remove(queue)

    def ring_doorbell(self, doorbell_index: int, value: int) -> None:
        self.doorbells.append((doorbell_index, value))
        for queue in self.queues:
            if queue.doorbell_index == doorbell_index:
                queue.doorbells.append(value)

    def memory_written(self, va: int, nbytes: int) -> None:
        self.written.append((va, nbytes))

    def timestamp(self) -> int:
        return self.kernel.now_ns // 10

    def interrupt(self, kind: str, *, queue_id: int = 0, context: int = 0, fault_va: int | None = None) -> None:
        """Raise an interrupt now (as an engine would from inside an event)."""
        assert self.on_interrupt is not None, "no driver attached"
        self.on_interrupt(FakeInterrupt(FakeInterruptKind[kind], queue_id, context, fault_va))

    def interrupt_at(self, delay_ns: int, kind: str, **fields: Any) -> None:
        """Schedule :meth:`interrupt` ``delay_ns`` of virtual time from now."""
        self.kernel.schedule(delay_ns, lambda: self.interrupt(kind, **fields), label=f"fake {kind}")

    def state(self) -> tuple[Any, ...]:
        mappings = tuple((va, len(view)) for va, view in sorted(self.mappings.items()))
        queues = tuple(
            (q.kind.name, q.ring_va, q.ring_bytes, q.rptr_va, q.wptr_va, q.doorbell_index) for q in self.queues
        )
        return (mappings, queues)
