"""Choices of this GPU model that no hardware fixes: how the engine model reports a queue's state and what stopped it.

A real GPU reports a stopped queue through its own interface (gfx1100: an interrupt vector on the IH ring, the VM
fault status registers; docs/gfx1100.md); these codes are the engine model's own encoding, carried by
:class:`~tinyhil.emulators.amdgpu.errors.GpuQueueError` and the engine's ``status`` / ``error_code``, for the model's
tests and for MOCKKFD's translation into KFD events. No driver of a real interface reads them.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

__all__ = ["ErrorCode", "QueueStatus"]


class QueueStatus(IntFlag):
    """A queue's state in the engine model (``Queue.status``; what a stopped queue's error reports)."""

    IDLE = 1 << 0  # everything up to the write pointer has executed
    HUNG = 1 << 1  # a POLL_REGMEM ran out of retries
    PACKET_ERROR = 1 << 2  # unknown opcode or malformed packet
    MEMORY_FAULT = 1 << 3  # an access to an unmapped GPU address


class ErrorCode(IntEnum):
    """What stopped a queue in the engine model (this model's own encoding, carried by its errors)."""

    NONE = 0
    UNKNOWN_OPCODE = 1
    BAD_PACKET = 2  # a field out of range, a misaligned address, a packet longer than its ring or IB
    MEMORY_FAULT = 3
    POLL_TIMEOUT = 4  # queue hung
    BAD_WPTR = 5  # the write pointer moved backwards or ran more than a ring ahead of the read pointer
    KERNEL_ERROR = 7  # DISPATCH_DIRECT: the program is not a loadable code object
    WAVE_TRAP = 8  # DISPATCH_DIRECT: a wave of GPU machine code trapped (illegal instruction, step budget, ...)
