"""The port MOCKKFD drives a GPU through: the subset of the emulated GPU's API a kernel driver needs.

The emulated AMD GPU (``tinyhil.emulators.amdgpu.AmdGpu``) implements it; so does the memory-only fake the mock's
own tests use. MOCKKFD plays the kernel: it maps allocations into the GPU's address space, creates queues, forwards
doorbell writes and host writes to watched memory, and turns the GPU's interrupts into KFD events.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from tinyhil.emulators.kernel import EventKernel

__all__ = ["GpuPort", "Interrupt", "InterruptKind", "QueueKind"]


class QueueKind(Enum):
    """The engines a KFD queue can feed (``KFD_IOC_QUEUE_TYPE_COMPUTE`` -> ``COMPUTE``, ``..._SDMA`` -> ``SDMA``)."""

    SDMA = "SDMA"
    COMPUTE = "COMPUTE"


class InterruptKind(Enum):
    """The interrupt kinds MOCKKFD handles, matched by ``name`` against the GPU's own kind enum.

    ``TRAP`` (SDMA TRAP packet) and ``RELEASE_MEM`` (PM4 end-of-pipe interrupt) carry an event id in ``data``;
    ``MEMORY_FAULT`` carries the faulting GPU virtual address in ``va``.
    """

    TRAP = "TRAP"
    RELEASE_MEM = "RELEASE_MEM"
    MEMORY_FAULT = "MEMORY_FAULT"


@runtime_checkable
class Interrupt(Protocol):
    """What the GPU hands ``on_interrupt``: its kind (an enum whose member names include :class:`InterruptKind`'s),
    the queue it came from, the event data (``data``: interrupt context id) and, for faults, the faulting ``va``."""

    @property
    def kind(self) -> Enum: ...

    @property
    def queue(self) -> Any: ...

    @property
    def data(self) -> int: ...

    @property
    def va(self) -> int | None: ...


@runtime_checkable
class GpuPort(Protocol):
    """One emulated GPU as a kernel driver sees it.

    Addresses are GPU virtual addresses of the process's address space; a KFD process has one address space per GPU.
    """

    kernel: EventKernel
    vram_bytes: int
    gfx_target_version: int
    vram: memoryview
    on_interrupt: Callable[[Any], None] | None

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
        self, kind: Any, *, ring_va: int, ring_bytes: int, rptr_va: int, wptr_va: int, doorbell_index: int
    ) -> Any:
        """Create a queue of ``kind`` (a :class:`QueueKind`; the GPU matches it by ``name``) and return it."""
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
