"""What the emulated GPU raises: memory faults, stopped queues, unloadable kernels."""

from __future__ import annotations

from tinyhil.errors import DeviceError

__all__ = ["GpuMemoryFault", "GpuQueueError", "KernelError"]


class GpuMemoryFault(DeviceError):
    """A GPU access hit an address with nothing mapped behind it; ``va`` is the first faulting byte."""

    def __init__(self, va: int, nbytes: int, reason: str = "no mapping") -> None:
        super().__init__(f"GPU memory fault at {va:#x}+{nbytes:#x}: {reason}", op="translate")
        self.va = va
        self.nbytes = nbytes
        self.reason = reason


class GpuQueueError(DeviceError):
    """A queue stopped: unknown opcode, malformed packet, memory fault or a poll that ran out of retries.

    The message names the queue, the opcode and the ring offset (or "queue hung", or the faulting address).
    """

    def __init__(
        self, message: str, *, queue_id: int, status: int, error_code: int, error_rptr: int, fault_va: int | None
    ) -> None:
        super().__init__(message, op="queue")
        self.queue_id = queue_id
        self.status = status
        self.error_code = error_code
        self.error_rptr = error_rptr
        self.fault_va = fault_va


class KernelError(DeviceError):
    """DISPATCH_DIRECT named a program the executor cannot run (not a code object, no such entry point)."""
