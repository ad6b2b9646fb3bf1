"""The driver's side of a queue: a ring buffer writer with a write pointer and a doorbell.

One object, three transports: the emulated GPU driven directly, BAR0/BAR2 writes on the USB path, and mmaps on
the KFD path. The transport says how GPU memory is written and read and how the doorbell rings; the queue object
keeps the ring arithmetic (pointers count bytes for SDMA, dwords for PM4, and index the ring modulo its size).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyhil._check import as_readonly_bytes, check_int, check_ring_bytes
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import RING_ALIGN_BYTES, QueueKind

from ._packet import check_enum
from .queue_transport import QueueTransport

__all__ = ["AmdQueue"]


class AmdQueue:
    """Writes packets into a ring, publishes the write pointer, rings the doorbell.

    Call :meth:`initialize` before the device-side queue is created (it zeroes both pointers in memory).
    :meth:`append` stages packets without telling the GPU; :meth:`kick` publishes the write pointer (to memory,
    then the doorbell with the same value); :meth:`submit` does both, so a whole batch goes out on one doorbell.
    """

    def __init__(
        self,
        transport: QueueTransport,
        kind: QueueKind,
        *,
        ring_va: int,
        ring_bytes: int,
        rptr_va: int,
        wptr_va: int,
        doorbell_index: int,
    ) -> None:
        self.transport = transport
        self.kind = check_enum("kind", kind, QueueKind)
        check_ring_bytes("ring_bytes", ring_bytes)
        self.ring_va = check_int("ring_va", ring_va, min_value=0)
        if ring_va % RING_ALIGN_BYTES:
            raise InvalidArgument(f"ring_va={ring_va:#x}, expected a multiple of {RING_ALIGN_BYTES}")
        self.ring_bytes = ring_bytes
        self.rptr_va = check_int("rptr_va", rptr_va, min_value=0)
        self.wptr_va = check_int("wptr_va", wptr_va, min_value=0)
        self.doorbell_index = check_int("doorbell_index", doorbell_index, min_value=0)
        self.unit_bytes = self.kind.unit_bytes
        self.ring_units = ring_bytes // self.unit_bytes
        self.wptr = 0  # staged write pointer (units)
        self.published_wptr = 0
        self._rptr_seen = 0  # the read pointer as last read: the engine only moves it forward

    def __repr__(self) -> str:
        return f"<AmdQueue {self.kind.name} ring {self.ring_va:#x}+{self.ring_bytes:#x} wptr {self.wptr:#x}>"

    def initialize(self) -> None:
        """Zero the read and write pointers in memory and here (before the device-side queue exists)."""
        self.wptr = self.published_wptr = self._rptr_seen = 0
        self.transport.write_memory(self.rptr_va, bytes(8))
        self.transport.write_memory(self.wptr_va, bytes(8))

    def read_rptr(self) -> int:
        """The read pointer the engine last wrote back (units)."""
        self._rptr_seen = int.from_bytes(self.transport.read_memory(self.rptr_va, 8), "little")
        return self._rptr_seen

    def free_units(self) -> int:
        """Room left in the ring for staged packets (units)."""
        return self.ring_units - (self.wptr - self.read_rptr())

    def _has_room(self, units: int) -> bool:
        """Whether ``units`` fit: from the read pointer last seen (no device read) when that already says so."""
        if units <= self.ring_units - (self.wptr - self._rptr_seen):
            return True
        return units <= self.free_units()

    def append(self, *packets: Any) -> int:
        """Stage packets (uint32 arrays or bytes of whole dwords) into the ring; returns the staged write pointer.

        Waits (through the transport) while the ring lacks room.

        Raises:
            InvalidArgument: the packets are not whole dwords, or are larger than the whole ring.
        """
        if len(packets) == 1 and type(packets[0]) is bytes:  # a prebuilt program (a copyout piece)
            data = packets[0]
        else:
            data = b"".join(
                bytes(as_readonly_bytes("packet", np.ascontiguousarray(p) if isinstance(p, np.ndarray) else p))
                for p in packets
            )
        if len(data) % 4:
            raise InvalidArgument(f"packets of {len(data)} bytes, expected whole dwords")
        if len(data) > self.ring_bytes:
            raise InvalidArgument(
                f"packets of {len(data):#x} bytes, expected at most the ring size {self.ring_bytes:#x}; submit in parts"
            )
        units = len(data) // self.unit_bytes
        # room by the read pointer last seen, else read the device
        if units > self.ring_units - (self.wptr - self._rptr_seen) and not self._has_room(units):
            what = f"{units} free units in the {self.kind.name} ring (wptr {self.wptr:#x})"
            self.transport.wait(lambda: units <= self.free_units(), what)
        offset = (self.wptr * self.unit_bytes) % self.ring_bytes
        first = min(len(data), self.ring_bytes - offset)
        self.transport.write_memory(self.ring_va + offset, data[:first])
        if first < len(data):
            self.transport.write_memory(self.ring_va, data[first:])
        self.wptr += units
        return self.wptr

    def kick(self) -> int:
        """Publish the staged write pointer: write it to memory, then ring the doorbell with the same value.

        Only the low dword is written while the high one is unchanged (over USB every dword is a TLP)."""
        if self.wptr >> 32 == self.published_wptr >> 32:
            self.transport.write_memory(self.wptr_va, (self.wptr & 0xFFFF_FFFF).to_bytes(4, "little"))
        else:
            self.transport.write_memory(self.wptr_va, self.wptr.to_bytes(8, "little"))
        self.transport.ring_doorbell(self.doorbell_index, self.wptr)
        self.published_wptr = self.wptr
        return self.wptr

    def submit(self, *packets: Any) -> int:
        """Append the packets and kick once; returns the new write pointer."""
        self.append(*packets)
        return self.kick()

    def wait_idle(self) -> None:
        """Wait until the engine has consumed everything published."""
        target = self.published_wptr
        self.transport.wait(
            lambda: self.read_rptr() >= target, f"{self.kind.name} queue read pointer to reach {target:#x}"
        )
