"""The ring engines' packet vocabulary: packet dwords, op results, packet errors, IB frames and poll waits.

What :class:`~tinyhil.emulators.amdgpu.engine.RingEngine` and the SDMA / PM4 ops built on it pass between them
while a packet runs: an op gets the packet's dwords (:data:`Packet`) and returns an :class:`OpResult` (``DONE``,
``WAIT``, ``ENTER``) or raises a :class:`PacketError` that stops the queue; the engine keeps an :class:`IbFrame` per
indirect buffer it is in and a :class:`PollWait` for the poll it waits on.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Final

from tinyhil.align import ceil_div
from tinyhil.spec.amdgpu import CompareFunction

from .model_choices import ErrorCode, QueueStatus

__all__ = [
    "DONE",
    "ENTER",
    "PREFETCH_BYTES",
    "WAIT",
    "IbFrame",
    "OpResult",
    "Packet",
    "PacketError",
    "PollWait",
    "dword_bytes",
]

Packet = list[int]  # a packet's dwords as Python ints
# One ring read per packet covers every fixed-size packet of both engines (8 dwords at most: RELEASE_MEM,
# ACQUIRE_MEM), and no more: each prefetched dword becomes a Python int.
PREFETCH_BYTES: Final = 32
# packers for the data of short packets (a WRITE of a fence or a completion entry)
_DWORD_PACKERS: Final = tuple(struct.Struct(f"<{count}I") for count in range(17))


def dword_bytes(dwords: Packet) -> bytes:
    """Packet dwords (a slice of a packet used as data) as little-endian bytes."""
    count = len(dwords)
    if count < len(_DWORD_PACKERS):
        return _DWORD_PACKERS[count].pack(*dwords)
    return struct.pack(f"<{count}I", *dwords)


class OpResult(Enum):
    """What an op returns: the packet is done, waits on a poll, or entered an indirect buffer."""

    DONE = "done"  # the packet completed: advance past it
    WAIT = "wait"  # a poll is unsatisfied: stay on the packet
    ENTER = "enter"  # an indirect buffer was entered: the packet completes when the IB does


DONE: Final = OpResult.DONE
WAIT: Final = OpResult.WAIT
ENTER: Final = OpResult.ENTER


class PacketError(Exception):
    """Stops the queue; carries the status bit and error code."""

    def __init__(self, code: ErrorCode, message: str, status: QueueStatus = QueueStatus.PACKET_ERROR) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


@dataclass(slots=True)
class IbFrame:
    """An indirect buffer being executed: its base, size and the offset of its next packet (bytes)."""

    base_va: int
    size_bytes: int
    pos_bytes: int
    caller_units: int  # units of the INDIRECT packet that opened it


@dataclass(slots=True)
class PollWait:
    """An unsatisfied poll: the packet it belongs to, what it watches, and when it gives up. The engine keeps the
    decoded poll while it waits (as the hardware holds the fetched packet): a re-check reads only the polled memory."""

    key: tuple[int, int, int]
    va: int
    nbytes: int
    start_ns: int
    interval_ns: int
    deadline_ns: int | None
    # The decoded poll: the condition ((mem & mask) function reference), then the packet's size and opcode.
    reference: int
    mask: int
    function: int
    compare: Callable[[int, int], bool]  # COMPARE_OPERATORS[function]
    retry_count: int | None
    packet_bytes: int
    opcode: int | None
    sub_op: int

    @property
    def condition(self) -> str:
        """The poll's condition in words (formatted on demand: most polls are satisfied on a later check)."""
        return f"(mem & {self.mask:#x}) {CompareFunction(self.function).name} {self.reference:#x} on {self.va:#x}"

    def next_check_ns(self, now_ns: int) -> int:
        """The first poll instant (``start + k * interval``) at or after ``now_ns``."""
        if self.interval_ns == 0 or now_ns <= self.start_ns:
            return max(now_ns, self.start_ns)
        polls = ceil_div(now_ns - self.start_ns, self.interval_ns)
        return self.start_ns + polls * self.interval_ns
