"""Choices of this GPU model that no hardware fixes: how the engine model reports a queue's state and what stopped it,
where the flat translation puts its system aperture, and which IP discovery table versions the gfx1100 model writes.

A real GPU reports a stopped queue through its own interface (gfx1100: an interrupt vector on the IH ring, the VM
fault status registers; docs/gfx1100.md); these codes are the engine model's own encoding, carried by
:class:`~tinyhil.emulators.amdgpu.errors.GpuQueueError` and the engine's ``status`` / ``error_code``, for the model's
tests and for MOCKKFD's translation into KFD events. No driver of a real interface reads any of these.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag
from typing import Final

from tinyhil.spec.amdgpu import SYS_APERTURE

__all__ = [
    "DISCOVERY_VERSION_MAJOR",
    "DISCOVERY_VERSION_MINOR",
    "IP_DISCOVERY_VERSION",
    "SYS_APERTURE_BYTES",
    "SYS_APERTURE_END",
    "ErrorCode",
    "QueueStatus",
]

SYS_APERTURE_BYTES: Final = 1 << 44  # the flat translation's aperture spans PCIe addresses 0 .. 2**44 - 1
SYS_APERTURE_END: Final = SYS_APERTURE + SYS_APERTURE_BYTES  # the first GPU address past the aperture
# docs/gfx1100.md section 3: binary_header version 1.0; ip_discovery_header version 4 (real tables carry 3 or 4)
DISCOVERY_VERSION_MAJOR: Final = 1
DISCOVERY_VERSION_MINOR: Final = 0
IP_DISCOVERY_VERSION: Final = 4


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
