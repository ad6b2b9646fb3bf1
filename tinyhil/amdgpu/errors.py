"""What the AMD reference driver raises when the GPU reports a stopped queue, and when a kernel cannot load."""

from __future__ import annotations

from dataclasses import KW_ONLY, InitVar, dataclass
from typing import ClassVar

from tinyhil.errors import DetailedDeviceError, DeviceError, InvalidArgument

__all__ = ["CodeObjectError", "KernelLoadError", "QueueStopped"]


@dataclass(eq=False, repr=False)
class QueueStopped(DetailedDeviceError):
    """A GPU queue stopped (hung, a packet it could not run, or a memory fault), as the driver read it back.

    ``queue`` names the queue (``"SDMA0 queue 0"``); ``status`` and ``error_code`` are the raw values the chip
    reported (gfx1100: the interrupt vector's client id and source id); ``opcode`` / ``sub_op`` the packet that
    stopped it; ``ring_offset`` its byte offset in the ring; ``fault_addr`` the faulting GPU address of a memory
    fault (else ``None``).
    """

    OP: ClassVar[str] = "queue"
    message: InitVar[str]
    _: KW_ONLY
    queue: str
    status: int
    error_code: int
    opcode: int
    sub_op: int
    ring_offset: int
    fault_addr: int | None


class KernelLoadError(DeviceError):
    """A program cannot load on the device: ``program`` names it, ``reason`` is the loader's message."""

    def __init__(self, message: str, *, program: str, reason: str, target: str = "") -> None:
        super().__init__(message, target=target, op="exec")
        self.program = program
        self.reason = reason


class CodeObjectError(InvalidArgument):
    """An AMDHSA code object is malformed (the caller's bytes, not the device): raised at load, never at run time."""
