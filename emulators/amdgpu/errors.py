"""What the emulated GPU raises: memory faults, stopped queues, unloadable kernels."""

from __future__ import annotations

from dataclasses import KW_ONLY, InitVar, dataclass
from typing import ClassVar

from tinyhil.errors import DetailedDeviceError, DeviceError

__all__ = ["GpuMemoryFault", "GpuQueueError", "KernelError", "WaveTrap"]


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


class WaveTrap(DeviceError):
    """A wave stopped: an unimplemented or illegal instruction, a PC outside the code, or the step budget ran out.

    ``pc`` is the GPU address of the instruction, ``text`` its disassembly (``""`` when it could not be decoded).
    """

    def __init__(self, reason: str, *, pc: int, text: str = "") -> None:
        at = f" ({text})" if text else ""
        super().__init__(f"wave trap at PC {pc:#x}{at}: {reason}", op="dispatch")
        self.pc = pc
        self.text = text
        self.reason = reason
