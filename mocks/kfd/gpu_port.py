"""The port MOCKKFD drives a GPU through: the subset of the emulated GPU's API a kernel driver needs.

The emulated AMD GPU (:class:`tinyhil.emulators.amdgpu.AmdGpu`) implements it as it is, and so does the memory-only
fake the mock's own tests use. MOCKKFD plays the kernel: it maps allocations into the GPU's address space, creates
queues, forwards doorbell writes and host writes to watched memory, and turns the GPU's interrupts into KFD events.

The vocabulary is the GPU's own, so there is no adapter between the two: queue kinds are
:class:`tinyhil.spec.amdgpu.QueueKind` and interrupts carry the emulator's field names (``kind``, ``queue_id``,
``context``, ``fault_va``). What they *mean* for KFD (an interrupt context is an event id, a fault fires the memory
events) lives only in MOCKKFD; the emulator knows nothing of KFD.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from tinyhil.emulators.amdgpu import InterruptKind
from tinyhil.emulators.kernel import EventKernel
from tinyhil.spec.amdgpu import QueueKind

__all__ = ["GpuPort", "Interrupt", "InterruptKind", "QueueKind"]


@runtime_checkable
class Interrupt(Protocol):
    """What the GPU hands ``on_interrupt`` (the emulator's :class:`~tinyhil.emulators.amdgpu.Interrupt`).

    ``kind`` is an enum matched by member name against :class:`InterruptKind`: ``TRAP`` (SDMA TRAP packet) and
    ``END_OF_PIPE`` (PM4 RELEASE_MEM with an interrupt) carry the interrupt context (KFD: an event id) in
    ``context``; ``MEMORY_FAULT`` carries the faulting GPU address in ``fault_va``; ``QUEUE_ERROR`` says in
    ``message`` why a queue stopped.
    """

    @property
    def kind(self) -> Enum: ...

    @property
    def queue_id(self) -> int: ...

    @property
    def context(self) -> int: ...

    @property
    def fault_va(self) -> int | None: ...

    @property
    def message(self) -> str: ...


@runtime_checkable
class GpuPort(Protocol):
    """One emulated GPU as a kernel driver sees it.

    Addresses are GPU virtual addresses of the process's address space; a KFD process has one address space per GPU.
    """

    kernel: EventKernel
    gfx_target_version: int
    on_interrupt: Callable[[Any], None] | None

    @property
    def vram_bytes(self) -> int: ...

    @property
    def vram(self) -> memoryview: ...

    def map_memory(self, va: int, backing: memoryview) -> None:
        """Map ``backing`` at ``va``. Raises ``InvalidArgument`` on overlap, with the GPU state unchanged."""
        ...

    def unmap_memory(self, va: int) -> None:
        """Remove the mapping that starts at ``va``."""
        ...

    def read(self, va: int, nbytes: int) -> memoryview:
        """Read GPU memory; an unmapped address raises the GPU's memory fault (a ``DeviceError`` with ``.va``)."""
        ...

    def write(self, va: int, data: Any) -> None:
        """Write GPU memory."""
        ...

    def create_queue(
        self, kind: QueueKind, *, ring_va: int, ring_bytes: int, rptr_va: int, wptr_va: int, doorbell_index: int
    ) -> Any:
        """Create a queue of ``kind`` and return it."""
        ...

    def destroy_queue(self, queue: Any) -> None:
        """Stop and forget a queue :meth:`create_queue` returned."""
        ...

    def ring_doorbell(self, doorbell_index: int, value: int) -> None:
        """The host wrote ``value`` to doorbell slot ``doorbell_index``: make the queue behind it runnable."""
        ...

    def memory_written(self, va: int, nbytes: int) -> None:
        """The host wrote ``[va, va + nbytes)`` of GPU-visible memory: wake engines waiting on it."""
        ...

    def timestamp(self) -> int:
        """The GPU timestamp counter (100 MHz of virtual time)."""
        ...
