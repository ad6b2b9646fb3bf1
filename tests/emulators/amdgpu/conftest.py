"""Fixtures for the GPU model tests: a GPU on an event kernel, and reference-driver queues talking to it directly.

Test memory layout (16 MB of VRAM at GPU address 0): pointer page ``0x1000`` (queue n: rptr ``0x1000 + 0x40*n``,
wptr ``+8``), SDMA ring ``0x100000``, compute ring ``0x200000``, data from ``0x400000``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from tinyhil.amdgpu import AmdQueue
from tinyhil.emulators.amdgpu import AmdGpu, Interrupt, Queue, QueueKind
from tinyhil.emulators.kernel import EventKernel
from tinyhil.mocks.amdgpu import DirectQueueTransport

VRAM_BYTES = 16 << 20
POINTERS = 0x1000
RINGS = {QueueKind.SDMA: 0x100000, QueueKind.COMPUTE: 0x200000}
RING_BYTES = 0x10000
DATA = 0x400000
WAIT_NS = 1_000_000_000


@dataclass
class QueuePair:
    """The driver's queue object and the GPU's queue for one ring."""

    driver: AmdQueue
    device: Queue

    def run(self, *packets: object) -> None:
        """Submit and wait until the engine consumed everything (raises the queue's error if it stops)."""
        self.driver.submit(*packets)
        self.driver.wait_idle()


@pytest.fixture
def kernel() -> EventKernel:
    return EventKernel(seed=0)


@pytest.fixture
def gpu(kernel: EventKernel) -> Iterator[AmdGpu]:
    gpu = AmdGpu(kernel, vram_bytes=VRAM_BYTES, vram_at_zero=True)
    yield gpu
    gpu.reset()


@pytest.fixture
def interrupts(gpu: AmdGpu) -> list[Interrupt]:
    seen: list[Interrupt] = []
    gpu.on_interrupt = seen.append
    return seen


@pytest.fixture
def make_queue(gpu: AmdGpu) -> Callable[..., QueuePair]:
    count = [0]

    def make(kind: QueueKind, *, ring_bytes: int = RING_BYTES, ring_va: int | None = None) -> QueuePair:
        index = count[0]
        count[0] += 1
        layout = {
            "ring_va": RINGS[kind] + index * RING_BYTES if ring_va is None else ring_va,
            "ring_bytes": ring_bytes,
            "rptr_va": POINTERS + 0x40 * index,
            "wptr_va": POINTERS + 0x40 * index + 8,
            "doorbell_index": index,
        }
        driver = AmdQueue(DirectQueueTransport(gpu, wait_ns=WAIT_NS), kind, **layout)
        driver.initialize()
        return QueuePair(driver, gpu.create_queue(kind, **layout))

    return make


@pytest.fixture
def sdma(make_queue: Callable[..., QueuePair]) -> QueuePair:
    return make_queue(QueueKind.SDMA)


@pytest.fixture
def compute(make_queue: Callable[..., QueuePair]) -> QueuePair:
    return make_queue(QueueKind.COMPUTE)
