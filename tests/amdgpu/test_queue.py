"""The reference queue object: ring arithmetic in bytes (SDMA) and dwords (PM4), publication order, backpressure."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tinyhil.amdgpu import AmdQueue, QueueTransport, pm4_nop, sdma_fence, sdma_nop
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import QueueKind

RING, RPTR, WPTR = 0x1000, 0x100, 0x108


class LogTransport:
    """GPU memory as a bytearray; every operation is logged in order."""

    def __init__(self) -> None:
        self.memory = bytearray(0x4000)
        self.log: list[tuple[str, int, int]] = []
        self.on_wait: Callable[[], None] = lambda: None

    def write_memory(self, va: int, data: bytes | memoryview) -> None:
        self.memory[va : va + len(data)] = data
        self.log.append(("write", va, len(data)))

    def read_memory(self, va: int, nbytes: int) -> bytes:
        return bytes(self.memory[va : va + nbytes])

    def ring_doorbell(self, doorbell_index: int, value: int) -> None:
        self.log.append(("doorbell", doorbell_index, value))

    def wait(self, condition: Callable[[], bool], what: str) -> None:
        self.log.append(("wait", 0, 0))
        self.on_wait()
        assert condition(), what


def _queue(kind: QueueKind = QueueKind.SDMA, ring_bytes: int = 256) -> tuple[AmdQueue, LogTransport]:
    transport = LogTransport()
    queue = AmdQueue(transport, kind, ring_va=RING, ring_bytes=ring_bytes, rptr_va=RPTR, wptr_va=WPTR, doorbell_index=3)
    queue.initialize()
    transport.log.clear()
    return queue, transport


def test_the_log_transport_is_a_queue_transport() -> None:
    assert isinstance(LogTransport(), QueueTransport)


def test_submit_writes_the_ring_then_the_write_pointer_then_rings_the_doorbell_once() -> None:
    queue, transport = _queue()
    wptr = queue.submit(sdma_fence(0x40, 1), sdma_fence(0x44, 2))
    assert wptr == 32 and transport.log == [("write", RING, 32), ("write", WPTR, 4), ("doorbell", 3, 32)]
    assert transport.memory[WPTR : WPTR + 8] == (32).to_bytes(8, "little")
    assert transport.memory[RING : RING + 32] == np.concatenate([sdma_fence(0x40, 1), sdma_fence(0x44, 2)]).tobytes()


def test_a_packet_straddling_the_ring_end_is_written_in_two_pieces() -> None:
    queue, transport = _queue()
    transport.memory[RPTR : RPTR + 8] = (248).to_bytes(8, "little")  # the engine consumed 248 bytes
    queue.wptr = queue.published_wptr = 248
    packet = sdma_fence(0x40, 0x1234)
    queue.submit(packet)
    assert transport.log == [("write", RING + 248, 8), ("write", RING, 8), ("write", WPTR, 4), ("doorbell", 3, 264)]
    assert bytes(transport.memory[RING + 248 : RING + 256] + transport.memory[RING : RING + 8]) == packet.tobytes()


def test_compute_queues_count_dwords() -> None:
    queue, transport = _queue(QueueKind.COMPUTE, ring_bytes=256)
    assert queue.submit(pm4_nop(3)) == 4 and transport.log[-1] == ("doorbell", 3, 4)
    assert queue.ring_units == 64


def test_append_stages_and_kick_publishes_a_batch_on_one_doorbell() -> None:
    queue, transport = _queue()
    queue.append(sdma_nop())
    queue.append(sdma_nop(1))
    assert [entry[0] for entry in transport.log] == ["write", "write"] and queue.published_wptr == 0
    assert queue.kick() == 12 and [e[0] for e in transport.log].count("doorbell") == 1


def test_a_full_ring_waits_for_the_engine_to_make_room() -> None:
    queue, transport = _queue()
    queue.submit(sdma_nop(59))  # 240 of 256 bytes in flight
    transport.on_wait = lambda: transport.memory.__setitem__(slice(RPTR, RPTR + 8), (240).to_bytes(8, "little"))
    queue.submit(sdma_fence(0, 1), sdma_fence(0, 2))
    assert ("wait", 0, 0) in transport.log and queue.wptr == 272


def test_wait_idle_waits_for_the_published_pointer() -> None:
    queue, transport = _queue()
    queue.submit(sdma_nop())
    queue.append(sdma_nop())  # staged, not published: not waited for
    transport.on_wait = lambda: transport.memory.__setitem__(slice(RPTR, RPTR + 8), (4).to_bytes(8, "little"))
    queue.wait_idle()
    assert queue.read_rptr() == 4


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda q: q.submit(b"abc"), "packets of 3 bytes, expected whole dwords"),
        (lambda q: q.submit(np.zeros(65, "<u4")), "packets of 0x104 bytes, expected at most the ring size 0x100"),
        (
            lambda q: AmdQueue(
                q.transport, QueueKind.SDMA, ring_va=0, ring_bytes=300, rptr_va=0, wptr_va=8, doorbell_index=0
            ),
            "ring_bytes=0x12c, expected a power of two",
        ),
        (
            lambda q: AmdQueue(
                q.transport, QueueKind.SDMA, ring_va=0x80, ring_bytes=256, rptr_va=0, wptr_va=8, doorbell_index=0
            ),
            "ring_va=0x80, expected a multiple of 256",
        ),
        (
            lambda q: AmdQueue(q.transport, 5, ring_va=0, ring_bytes=256, rptr_va=0, wptr_va=8, doorbell_index=0),
            "kind=5, expected one of 0 .SDMA., 1 .COMPUTE.",
        ),
    ],
)
def test_bad_submissions_and_settings_are_refused(make: Callable[[AmdQueue], object], message: str) -> None:
    queue, _ = _queue()
    with pytest.raises(InvalidArgument, match=message):
        make(queue)


def test_the_whole_write_pointer_goes_out_when_its_high_dword_changes() -> None:
    queue, transport = _queue()
    queue.wptr = queue.published_wptr = (1 << 32) - 8  # the engine consumed up to here
    transport.memory[RPTR : RPTR + 8] = queue.wptr.to_bytes(8, "little")
    queue.submit(sdma_fence(0x40, 1))
    assert ("write", WPTR, 8) in transport.log
    assert transport.memory[WPTR : WPTR + 8] == ((1 << 32) + 8).to_bytes(8, "little")
