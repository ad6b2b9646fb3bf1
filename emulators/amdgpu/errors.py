"""What the emulated GPU raises: memory faults, stopped queues, unloadable kernels."""

from __future__ import annotations

from dataclasses import KW_ONLY, InitVar, dataclass
from typing import ClassVar

from tinyhil.errors import DetailedDeviceError, DeviceError

__all__ = ["GpuMemoryFault", "GpuQueueError", "KernelError"]


class GpuMemoryFault(DeviceError):
    """A GPU access hit an address with nothing mapped behind it; ``va`` is the first faulting byte."""

    def __init__(self, va: int, nbytes: int, reason: str = "no mapping") -> None:
        super().__init__(f"GPU memory fault at {va:#x}+{nbytes:#x}: {reason}", op="translate")
        self.va = va
        self.nbytes = nbytes
        self.reason = reason


@dataclass(eq=False, repr=False)
class GpuQueueError(DetailedDeviceError):
    """A queue stopped: unknown opcode, malformed packet, memory fault or a poll that ran out of retries.

    The message names the queue, the opcode and the ring offset (or "queue hung", or the faulting address).
    """

    OP: ClassVar[str] = "queue"
    message: InitVar[str]
    _: KW_ONLY
    queue_id: int
    status: int
    error_code: int
    error_rptr: int
    fault_va: int | None


class KernelError(DeviceError):
    """DISPATCH_DIRECT named a program the executor cannot run (not a code object, no such entry point)."""
