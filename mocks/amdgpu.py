"""``DirectQueueTransport``: the queue seam (:class:`~tinyhil.amdgpu.queue.QueueTransport`) onto an emulated GPU itself.

The third way a reference :class:`~tinyhil.amdgpu.queue.AmdQueue` reaches a GPU, beside BAR writes over USB
(:class:`~tinyhil.usbgpu.usb_gpu.UsbGpu`) and mmaps on the KFD path: no bridge and no kernel driver in between, for
engine-level tests and benchmarks::

    gpu = AmdGpu(EventKernel())
    queue = AmdQueue(DirectQueueTransport(gpu), QueueKind.SDMA, ring_va=..., ...)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from tinyhil.emulators.amdgpu import AmdGpu

__all__ = ["DEFAULT_WAIT_NS", "DirectQueueTransport"]

DEFAULT_WAIT_NS: Final = 1_000_000_000  # one second of virtual time


class DirectQueueTransport:
    """Writes and reads GPU memory, rings doorbells and waits (in virtual time, up to ``wait_ns``) on ``gpu``."""

    def __init__(self, gpu: AmdGpu, *, wait_ns: int = DEFAULT_WAIT_NS) -> None:
        self.gpu = gpu
        self.wait_ns = wait_ns

    def write_memory(self, va: int, data: bytes | memoryview) -> None:
        self.gpu.write(va, data)

    def read_memory(self, va: int, nbytes: int) -> bytes:
        return bytes(self.gpu.read(va, nbytes))

    def ring_doorbell(self, doorbell_index: int, value: int) -> None:
        self.gpu.ring_doorbell(doorbell_index, value)

    def wait(self, condition: Callable[[], bool], what: str) -> None:
        self.gpu.wait(condition, self.wait_ns, what=what)
