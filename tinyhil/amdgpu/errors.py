"""What the AMD reference driver raises when the GPU reports a stopped queue, and when a kernel cannot load."""

from __future__ import annotations

from tinyhil.errors import DeviceError

__all__ = ["KernelLoadError", "QueueStopped"]


class QueueStopped(DeviceError):
    """A GPU queue stopped (BAR5 STATUS: hung, packet error or memory fault), as the driver read it back.

    ``queue`` names the queue (``"SDMA queue 0 (BAR5 0x1000)"``); ``status`` and ``error_code`` are the raw register
    values; ``opcode`` / ``sub_op`` the packet that stopped it; ``ring_offset`` its byte offset in the ring;
    ``fault_addr`` the faulting GPU address of a memory fault (else ``None``).
    """

    def __init__(
        self,
        message: str,
        *,
        queue: str,
        status: int,
        error_code: int,
        opcode: int,
        sub_op: int,
        ring_offset: int,
        fault_addr: int | None,
    ) -> None:
        super().__init__(message, op="queue")
        self.queue = queue
        self.status = status
        self.error_code = error_code
        self.opcode = opcode
        self.sub_op = sub_op
        self.ring_offset = ring_offset
        self.fault_addr = fault_addr


class KernelLoadError(DeviceError):
    """A program cannot load on the device: ``program`` names it, ``reason`` is the loader's message."""

    def __init__(self, message: str, *, program: str, reason: str, target: str = "") -> None:
        super().__init__(message, target=target, op="exec")
        self.program = program
        self.reason = reason
