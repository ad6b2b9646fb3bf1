"""MOCKKFD over the real emulated AMD GPU: the port fits as it is, packets run, interrupts become KFD events."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tinyhil.amdgpu import sdma_const_fill, sdma_fence, sdma_trap
from tinyhil.emulators.amdgpu import AmdGpu
from tinyhil.emulators.kernel import EventKernel
from tinyhil.kfd import KFD, KfdHwException, KfdMemoryFault, MemoryDomain, QueueEngine
from tinyhil.mocks.kfd import GpuPort, MockKFD
from tinyhil.spec.kfd_events import HwExceptionResetCause

MS = 1_000_000


@pytest.fixture
def machine() -> Iterator[tuple[MockKFD, KFD]]:
    kernel = EventKernel()
    gpus = [AmdGpu(kernel, vram_bytes=64 << 20, gfx_target_version=v, name=f"gpu{i}")
            for i, v in enumerate((110000, 90500))]  # fmt: skip
    mock = MockKFD(gpus)
    client = KFD(mock.fileio)
    yield mock, client
    client.close()
    mock.close()


def test_the_emulated_gpu_is_a_gpu_port() -> None:
    assert isinstance(AmdGpu(EventKernel(), vram_bytes=1 << 20), GpuPort)


def test_each_gpu_has_its_own_arch_memory_and_queues(machine: tuple[MockKFD, KFD]) -> None:
    mock, kfd = machine
    assert [node.arch for node in kfd.gpus] == ["gfx1100", "gfx950"]
    first, second = kfd.device(0), kfd.device(1)
    bufs = [gpu.alloc(8192, MemoryDomain.GTT) for gpu in (first, second)]
    event = kfd.create_event()
    for gpu, buf, value in zip((first, second), bufs, (0x1111_1111, 0x2222_2222), strict=True):
        queue = gpu.create_queue(QueueEngine.SDMA)
        assert event.mailbox_va is not None
        packets = [sdma_const_fill(buf.va, value, 4096), sdma_fence(event.mailbox_va, 1), sdma_trap(event.event_id)]
        queue.submit(b"".join(p.tobytes() for p in packets))
        kfd.wait(event, timeout_ms=100)
    assert [bytes(buf.read(0, 4096)) for buf in bufs] == [b"\x11" * 4096, b"\x22" * 4096]
    assert [len(port.port.queues) for port in mock.gpus] == [1, 1]  # type: ignore[attr-defined]


def test_a_kernel_reading_an_unmapped_address_fires_the_memory_event_with_it(machine: tuple[MockKFD, KFD]) -> None:
    mock, kfd = machine
    gpu = kfd.device(1)
    fault_va = 0x1234_5000
    queue = gpu.create_queue(QueueEngine.SDMA)
    queue.submit(sdma_fence(fault_va, 7).tobytes())
    with pytest.raises(KfdMemoryFault, match=f"{fault_va:#x}") as info:
        kfd.wait_events([], timeout_ms=10)
    assert (info.value.gpu_id, info.value.va) == (gpu.gpu_id, fault_va)
    assert mock.faults == [(gpu.gpu_id, fault_va)]


def test_a_bad_packet_is_recorded_as_a_queue_error(machine: tuple[MockKFD, KFD]) -> None:
    mock, kfd = machine
    gpu = kfd.device(0)
    queue = gpu.create_queue(QueueEngine.SDMA)
    queue.submit(np.array([0xFF], "<u4").tobytes())
    with pytest.raises(KfdHwException) as caught:  # amdkfd resets the failed queue: the HW exception event fires
        kfd.wait_events([], timeout_ms=1)
    assert (
        caught.value.gpu_id == gpu.gpu_id
        and caught.value.reset_cause == HwExceptionResetCause.KFD_HW_EXCEPTION_GPU_HANG
    )
    assert len(mock.queue_errors) == 1
    assert mock.queue_errors[0][0] == gpu.gpu_id and "unknown SDMA opcode 0xff" in mock.queue_errors[0][1]
