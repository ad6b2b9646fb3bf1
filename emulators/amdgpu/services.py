"""What the GPU lends its engines and what they raise: queue configuration, engine services, interrupts.

A :class:`QueueConfig` says where a queue's ring and pointers live; :class:`EngineServices` is what every engine of
the GPU shares (memory, the event kernel, costs, the interrupt line, the kernel executor); an :class:`Interrupt` is
what an engine raises through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

from tinyhil._check import check_int, check_ring_bytes
from tinyhil.emulators.observe import Observed
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import (
    DOORBELL_SLOTS,
    RING_ALIGN_BYTES,
    TIMESTAMP_PERIOD_NS,
    QueueKind,
)

from .memory import AddressSpace
from .timing import GpuTiming

if TYPE_CHECKING:
    from tinyhil.emulators.kernel import EventKernel

    from .executor import KernelExecutor

__all__ = ["EngineServices", "Interrupt", "InterruptKind", "QueueConfig"]


class InterruptKind(IntEnum):
    """Why the GPU raised an interrupt (``AmdGpu.on_interrupt``)."""

    TRAP = 0  # SDMA TRAP: ``context`` = DW1
    END_OF_PIPE = 1  # RELEASE_MEM with int_sel: ``context`` = INT_CTXID, ``data`` = the value written
    MEMORY_FAULT = 2  # ``fault_va`` = the faulting GPU address
    QUEUE_ERROR = 3  # model extension: a queue stopped on a packet error or hung; ``message`` says why


@dataclass(frozen=True, slots=True)
class Interrupt:
    """One interrupt: its kind, the queue that raised it, the virtual time, and the kind's payload."""

    kind: InterruptKind
    queue_id: int
    time_ns: int
    context: int = 0
    data: int = 0
    fault_va: int | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """Where a queue's ring and pointers live and which doorbell kicks it (validated on construction).

    Raises:
        InvalidArgument: the ring size is not a power of two in 256 B..1 GB, the ring is not 256-byte aligned,
            a pointer address is not 8-byte aligned, or the doorbell index is outside BAR2.
    """

    kind: QueueKind
    ring_va: int
    ring_bytes: int
    rptr_va: int
    wptr_va: int
    doorbell_index: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", QueueKind(self.kind))
        check_ring_bytes("ring_bytes", self.ring_bytes)
        for name in ("ring_va", "rptr_va", "wptr_va"):
            check_int(name, getattr(self, name), min_value=0, max_value=(1 << 64) - 1)
        if self.ring_va % RING_ALIGN_BYTES:
            raise InvalidArgument(f"ring_va={self.ring_va:#x}, expected a multiple of {RING_ALIGN_BYTES}")
        for name in ("rptr_va", "wptr_va"):
            if getattr(self, name) % 8:
                raise InvalidArgument(f"{name}={getattr(self, name):#x}, expected an 8-byte aligned address (u64)")
        check_int("doorbell_index", self.doorbell_index, min_value=0, max_value=DOORBELL_SLOTS - 1)


@dataclass(frozen=True, slots=True)
class EngineServices:
    """What the GPU lends its engines: memory, the clock, costs, the interrupt line, the kernel executor, and the
    GPU's observers (``AmdGpu.observe``)."""

    memory: AddressSpace
    kernel: EventKernel
    timing: GpuTiming
    interrupt: Callable[[Interrupt], None]
    executor: KernelExecutor
    observed: Observed = field(default_factory=Observed)

    def timestamp(self) -> int:
        """The 100 MHz GPU timestamp counter: virtual time in 10 ns ticks."""
        return self.kernel.now_ns // TIMESTAMP_PERIOD_NS
