"""The queue-transport seam: how a driver-side queue (:class:`~tinyhil.amdgpu.queue.AmdQueue`) reaches the GPU.

Three implementations: the emulated GPU driven directly, BAR0/BAR2 writes over the USB bridge
(:class:`~tinyhil.usbgpu.gfx1100_gpu.Gfx1100UsbGpu`), and mmaps on the KFD path. Addresses are GPU virtual addresses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["QueueTransport"]


@runtime_checkable
class QueueTransport(Protocol):
    """How a queue reaches the GPU."""

    def write_memory(self, va: int, data: bytes | memoryview) -> None:
        """Write GPU-visible memory at GPU address ``va``."""
        ...

    def read_memory(self, va: int, nbytes: int) -> bytes:
        """Read GPU-visible memory at GPU address ``va``."""
        ...

    def ring_doorbell(self, doorbell_index: int, value: int) -> None:
        """Write ``value`` (the new write pointer) to doorbell ``doorbell_index``."""
        ...

    def wait(self, condition: Callable[[], bool], what: str) -> None:
        """Block until ``condition()`` holds (emulated: run virtual time; real: poll), or raise naming ``what``."""
        ...
