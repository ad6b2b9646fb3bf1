"""What the engines share (engine.py): live views of the ring that follow remapping, and a poll that holds its
decoded packet while it waits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinyhil.amd import sdma_fence, sdma_poll_regmem
from tinyhil.emulators.amdgpu import AmdGpu, QueueKind
from tinyhil.emulators.kernel import EventKernel
from tinyhil.spec.amdgpu import POLL_RETRY_FOREVER
from tinyhil.spec.amdgpu_sdma import SdmaPollRegmemDw

DATA = 0x400000
HOST_RING_VA = 0x10_0000_0000
RING_BYTES = 0x10000


def _u32(gpu: AmdGpu, va: int) -> int:
    return int.from_bytes(gpu.read(va, 4), "little")


def test_a_ring_remapped_under_a_live_queue_is_fetched_from_its_new_backing(
    gpu: AmdGpu, make_queue: Callable[..., Any]
) -> None:
    first = bytearray(RING_BYTES)
    gpu.map_memory(HOST_RING_VA, memoryview(first))
    sdma = make_queue(QueueKind.SDMA, ring_va=HOST_RING_VA, ring_bytes=RING_BYTES)
    sdma.run(sdma_fence(DATA, 1))  # the engine has read this ring through its backing
    second = bytearray(first)
    gpu.unmap_memory(HOST_RING_VA)
    gpu.map_memory(HOST_RING_VA, memoryview(second))
    sdma.run(sdma_fence(DATA + 4, 2))
    assert (_u32(gpu, DATA), _u32(gpu, DATA + 4)) == (1, 2)
    fence_bytes = sdma_fence(0, 0).nbytes
    assert not any(first[fence_bytes:]), "the second packet went to the new backing only"


def test_a_waiting_poll_rechecks_the_memory_not_its_packet(gpu: AmdGpu, kernel: EventKernel, sdma: Any) -> None:
    sdma.driver.submit(sdma_poll_regmem(DATA, 1, retry_count=POLL_RETRY_FOREVER), sdma_fence(DATA + 4, 9))
    kernel.run_until_idle()
    assert sdma.device.waiting
    # The engine fetched and decoded the poll before it began to wait (as the hardware does): rewriting the packet
    # in the ring now changes nothing, and the next check compares memory with the reference it already holds.
    reference_va = sdma.device.config.ring_va + 4 * SdmaPollRegmemDw.REFERENCE
    gpu.write(reference_va, (2).to_bytes(4, "little"))
    gpu.write(DATA, (1).to_bytes(4, "little"))
    sdma.driver.wait_idle()
    assert _u32(gpu, DATA + 4) == 9
