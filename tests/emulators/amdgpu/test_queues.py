"""Queues: creation and its bad inputs, doorbells, scheduling on virtual time, and the ring protocol as a state
machine (the reference queue object against the emulated SDMA engine)."""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tinyhil.amdgpu import (
    AmdQueue,
    sdma_const_fill,
    sdma_copy_linear,
    sdma_fence,
    sdma_nop,
    sdma_poll_regmem,
    sdma_timestamp,
    sdma_trap,
    sdma_write,
)
from tinyhil.emulators.amdgpu import AmdGpu, GpuQueueError, QueueKind
from tinyhil.emulators.kernel import EventKernel
from tinyhil.errors import InvalidArgument
from tinyhil.mocks.amdgpu import DirectQueueTransport
from tinyhil.spec.amdgpu import POLL_RETRY_FOREVER
from tinyhil.spec.amdgpu_sdma import FillSize

DATA = 0x400000
GOOD = {"ring_va": 0x100000, "ring_bytes": 0x1000, "rptr_va": 0x1000, "wptr_va": 0x1008, "doorbell_index": 0}

BAD_QUEUES = [
    ({"ring_bytes": 0x1800}, "ring_bytes=0x1800, expected a power of two"),
    ({"ring_bytes": 128}, "ring_bytes=128, expected an int >= 256"),
    ({"ring_bytes": 1 << 31}, "expected an int <= 1073741824"),
    ({"ring_va": 0x100080}, "ring_va=0x100080, expected a multiple of 256"),
    ({"rptr_va": 0x1004}, "rptr_va=0x1004, expected an 8-byte aligned address"),
    ({"wptr_va": -8}, "wptr_va=-8, expected an int >= 0"),
    ({"doorbell_index": 1024}, "doorbell_index=1024, expected an int <= 1023"),
    ({"doorbell_index": 7}, "doorbell_index=7, expected a free doorbell .SDMA queue 0."),
    ({"kind": 9}, "kind=9, expected QueueKind.SDMA or QueueKind.COMPUTE"),
]


@pytest.mark.parametrize(("change", "message"), BAD_QUEUES)
def test_bad_queue_settings_are_refused_and_change_nothing(gpu: AmdGpu, change: dict[str, int], message: str) -> None:
    gpu.create_queue(QueueKind.SDMA, **{**GOOD, "doorbell_index": 7})
    before = gpu.queues
    settings_ = {"kind": QueueKind.SDMA, **GOOD, "ring_va": 0x200000, **change}
    with pytest.raises(InvalidArgument, match=message):
        gpu.create_queue(**settings_)
    assert gpu.queues == before


def test_destroying_a_foreign_or_destroyed_queue_is_refused(gpu: AmdGpu) -> None:
    queue = gpu.create_queue(QueueKind.SDMA, **GOOD)
    gpu.destroy_queue(queue)
    with pytest.raises(InvalidArgument, match="expected a live queue of gpu0"):
        gpu.destroy_queue(queue)


def test_a_doorbell_without_a_queue_is_dropped_and_logged(gpu: AmdGpu, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tinyhil.emulators.amdgpu"):
        gpu.ring_doorbell(42, 0x10)
    assert "doorbell 42 rung with 0x10 but no queue uses it" in caplog.text
    assert gpu.kernel.pending == 0


def test_a_doorbell_while_the_engine_is_busy_does_not_start_the_next_packet_early(
    gpu: AmdGpu, kernel: EventKernel, sdma: Any
) -> None:
    sdma.driver.submit(sdma_copy_linear(DATA, 0, 1 << 20))
    kernel.step()  # the copy executes at t=0; the engine is now busy for its cost
    sdma.run(sdma_timestamp(DATA + 0x200000))
    copy_ns = gpu.timing.packet_ns + gpu.timing.transfer_ns(1 << 20)
    assert int.from_bytes(gpu.read(DATA + 0x200000, 8), "little") == copy_ns // 10


def test_a_destroyed_queue_stops_running(gpu: AmdGpu, kernel: EventKernel, sdma: Any) -> None:
    sdma.driver.submit(*[sdma_fence(DATA + 4 * i, i + 1) for i in range(10)])
    kernel.step()
    gpu.destroy_queue(sdma.device)
    kernel.run_until_idle()
    assert [int.from_bytes(gpu.read(DATA + 4 * i, 4), "little") for i in range(3)] == [1, 0, 0]


def test_an_error_reaches_the_host_at_its_next_wait_at_once(gpu: AmdGpu, kernel: EventKernel, sdma: Any) -> None:
    sdma.driver.submit(sdma_nop(), np.array([0xEE], "<u4"), sdma_fence(DATA, 1))
    started = time.monotonic()
    with pytest.raises(GpuQueueError, match=r"SDMA queue 0: unknown SDMA opcode 0xee .* at ring offset 0x4"):
        gpu.wait(lambda: int.from_bytes(gpu.read(DATA, 4), "little") == 1, 10_000_000_000, what="the fence")
    assert time.monotonic() - started < 0.5, "no busy loop until a timeout"
    assert kernel.now_ns < 1_000, "the wait ended when the queue stopped, not at the 10 s virtual timeout"


class RingProtocol(RuleBasedStateMachine):
    """The driver's queue object feeds a small SDMA ring; the engine's results must match a byte model of VRAM."""

    def __init__(self) -> None:
        super().__init__()
        self.gpu = AmdGpu(EventKernel(), vram_bytes=16 << 20, vram_at_zero=True)
        self.model = bytearray(0x1000)

    @initialize(ring_bytes=st.sampled_from([256, 512, 4096]))
    def create(self, ring_bytes: int) -> None:

        layout = {**GOOD, "ring_bytes": ring_bytes}
        self.queue = AmdQueue(DirectQueueTransport(self.gpu), QueueKind.SDMA, **layout)
        self.queue.initialize()
        self.device = self.gpu.create_queue(QueueKind.SDMA, **layout)

    @rule(offset=st.integers(0, 0x3FF), value=st.integers(0, 2**32 - 1))
    def fence(self, offset: int, value: int) -> None:
        self.queue.submit(sdma_fence(DATA + 4 * offset, value))
        self.model[4 * offset : 4 * offset + 4] = value.to_bytes(4, "little")

    @rule(offset=st.integers(0, 0x3F0), values=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=12))
    def write(self, offset: int, values: list[int]) -> None:
        self.queue.submit(sdma_write(DATA + 4 * offset, values))
        self.model[4 * offset : 4 * offset + 4 * len(values)] = np.array(values, "<u4").tobytes()

    @rule(src=st.integers(0, 0xF00), dst=st.integers(0, 0xF00), nbytes=st.integers(1, 0x100))
    def copy(self, src: int, dst: int, nbytes: int) -> None:
        self.queue.submit(sdma_copy_linear(DATA + dst, DATA + src, nbytes))
        self.model[dst : dst + nbytes] = self.model[src : src + nbytes]

    @rule(offset=st.integers(0, 0x3F0), value=st.integers(0, 255), nbytes=st.integers(1, 0x40))
    def fill(self, offset: int, value: int, nbytes: int) -> None:
        self.queue.submit(sdma_const_fill(DATA + offset, value, nbytes, fill_size=FillSize.BYTE))
        self.model[offset : offset + nbytes] = bytes([value]) * nbytes

    @rule(batch=st.integers(2, 5))
    def batch_of_nops_on_one_doorbell(self, batch: int) -> None:
        for _ in range(batch):
            self.queue.append(sdma_nop(1))
        self.queue.kick()

    @rule(duration_ns=st.integers(0, 2_000))
    def let_time_pass(self, duration_ns: int) -> None:
        self.gpu.kernel.run_for(duration_ns)

    @precondition(lambda self: hasattr(self, "queue"))
    @rule()
    def drain_and_compare(self) -> None:
        self.queue.wait_idle()
        assert bytes(self.gpu.read(DATA, 0x1000)) == bytes(self.model)

    @invariant()
    def pointers_stay_ordered(self) -> None:
        if hasattr(self, "queue"):
            assert self.device.rptr <= self.queue.published_wptr <= self.queue.wptr
            assert self.queue.wptr - self.device.rptr <= self.queue.ring_units
            assert not self.device.stopped, self.device.describe()


TestRingProtocol = RingProtocol.TestCase
TestRingProtocol.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)


def test_one_write_releases_every_queue_polling_it_in_queue_order(
    gpu: AmdGpu, kernel: EventKernel, make_queue: Any, interrupts: list[Any]
) -> None:
    first, second = make_queue(QueueKind.SDMA), make_queue(QueueKind.SDMA)
    for pair in (second, first):  # the later queue starts waiting first: the wake order is still the queue order
        pair.driver.submit(sdma_poll_regmem(DATA, 1, retry_count=POLL_RETRY_FOREVER), sdma_trap(pair.device.id))
        kernel.run_until_idle()
        assert pair.device.waiting
    gpu.write(DATA, (1).to_bytes(4, "little"))
    first.driver.wait_idle()
    second.driver.wait_idle()
    assert [interrupt.context for interrupt in interrupts] == [first.device.id, second.device.id]
    assert interrupts[0].time_ns == interrupts[1].time_ns
