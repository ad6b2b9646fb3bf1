"""The doorbell watcher rings exactly the slots whose value changed, through MOCKKFD's own doorbell handler."""

from __future__ import annotations

import threading

import pytest

from tinyhil.mocks.kfd import MockKFD
from tinyhil.mocks.kfd.state import GpuDevice
from tinyhil.mocks.serve.kfd import DoorbellWatcher, SharedMemory
from tinyhil.spec.kfd_queues import KFD_DOORBELL_BYTES


@pytest.fixture
def served() -> tuple[MockKFD, list[tuple[GpuDevice, int, int]], DoorbellWatcher]:
    kfd = MockKFD(gpus=2, host_memory=SharedMemory().allocate)
    kfd.ensure_process()
    rung: list[tuple[GpuDevice, int, int]] = []
    kfd.queues.doorbell_written = lambda gpu, offset, nbytes: rung.append((gpu, offset, nbytes))  # type: ignore[method-assign]
    return kfd, rung, DoorbellWatcher(kfd, threading.Lock())


def store(gpu: GpuDevice, slot: int, value: int) -> None:
    """A client's store into the shared frame: plain memory, no hook."""
    start = slot * KFD_DOORBELL_BYTES
    gpu.doorbell_page[start : start + KFD_DOORBELL_BYTES] = value.to_bytes(KFD_DOORBELL_BYTES, "little")


def test_a_changed_slot_rings_once_and_an_unchanged_one_never(served: tuple) -> None:
    kfd, rung, watcher = served
    store(kfd.gpus[1], 3, 0x40)
    assert watcher.scan() == 1
    assert rung == [(kfd.gpus[1], 3 * KFD_DOORBELL_BYTES, KFD_DOORBELL_BYTES)]
    assert watcher.scan() == 0
    store(kfd.gpus[1], 3, 0x40)  # the same value again: nothing new for the GPU to see
    assert watcher.scan() == 0
    store(kfd.gpus[0], 0, 1)
    store(kfd.gpus[0], 5, 2)
    assert watcher.scan() == 2
    assert rung[1:] == [(kfd.gpus[0], 0, KFD_DOORBELL_BYTES), (kfd.gpus[0], 5 * KFD_DOORBELL_BYTES, KFD_DOORBELL_BYTES)]
    assert watcher.rings == len(rung)


def test_without_a_kfd_process_nothing_rings(served: tuple) -> None:
    kfd, rung, watcher = served
    kfd.close()
    store(kfd.gpus[0], 0, 1)
    assert watcher.scan() == 0
    assert rung == []


def test_the_watcher_thread_notices_a_store_without_any_call(served: tuple) -> None:
    kfd, rung, watcher = served
    watcher.start()
    try:
        store(kfd.gpus[0], 2, 9)
        with watcher.lock:
            assert watcher.activity.wait_for(lambda: rung, timeout=30)  # a guard against a hang, not a timing check
    finally:
        watcher.stop()
    assert rung == [(kfd.gpus[0], 2 * KFD_DOORBELL_BYTES, KFD_DOORBELL_BYTES)]
