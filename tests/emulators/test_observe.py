"""The observer hook (``tinyhil.emulators.observe``): a bridge and a GPU report arms, transfers, DMA writes and
polls in order with their values; detaching stops the events; several observers each see every event."""

from __future__ import annotations

from typing import Any

import pytest
from support.boards import Board, make_board

from tinyhil.amdgpu.sdma import sdma_poll_regmem, sdma_write
from tinyhil.emulators.asm2464.sram import Arm, Direction
from tinyhil.emulators.observe import Observer
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.spec.amdgpu import SYS_APERTURE, QueueKind
from tinyhil.spec.asm2464 import PCIE_SRAM_BASE, PCIE_SYS_BUF, SECTOR_BYTES, SLOT_BYTES

SIGNAL = PCIE_SYS_BUF + 0x900  # above the fence: no quirk touches it
FLAG = 0x5EED_F1A6


class Recorder(Observer):
    """Every event as a tuple, in the order they came."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def sram_armed(self, direction: Direction, slot_start: int, arm: Arm, replaced: Arm | None) -> None:
        self.events.append(("sram_armed", direction, slot_start, arm, replaced))

    def arm_claimed(self, arm: Arm) -> None:
        self.events.append(("arm_claimed", arm))

    def arm_given_back(self, arm: Arm, moved: int) -> None:
        self.events.append(("arm_given_back", arm, moved))

    def arm_finished(self, arm: Arm) -> None:
        self.events.append(("arm_finished", arm))

    def dma_write(self, pcie_addr: int, nbytes: int) -> None:
        self.events.append(("dma_write", pcie_addr, nbytes))

    def gpu_polled(self, address: int, value: int, matched: bool) -> None:
        self.events.append(("gpu_polled", address, value, matched))


@pytest.fixture
def board() -> Any:
    with make_board() as made:
        yield made


def test_a_window_write_reports_its_arm_claim_landing_and_give_back(board: Board) -> None:
    recorder = Recorder()
    image = bytes(range(250)) * 4  # 1000 bytes: two sectors on the wire
    with board.usb.bridge.observe(recorder):
        board.ctrl.scsi_write(image, slot_start=3)
    arm = recorder.events[0][3]
    assert recorder.events == [
        ("sram_armed", Direction.OUT, 3, arm, None),
        ("arm_claimed", arm),
        ("arm_finished", arm),  # no landing delay: it lands before the transfer completes on the wire
        ("arm_given_back", arm, 2 * SECTOR_BYTES),
    ]
    assert (arm.nbytes, arm.sram_offset, arm.remaining) == (2 * SECTOR_BYTES, 3 * SLOT_BYTES, 0)
    assert board.usb.bridge.read_sram(3 * SLOT_BYTES, len(image)) == image


def test_an_arm_replacing_an_unconsumed_one_names_it(board: Board) -> None:
    recorder = Recorder()
    with board.usb.bridge.observe(recorder):
        first = board.ctrl.scsi_read_arm(SECTOR_BYTES, slot_start=1)
        board.ctrl.scsi_read_arm(SECTOR_BYTES, slot_start=2)
    assert first.sectors == 1
    (_, direction, slot, replaced_arm, none), (_, _, slot2, arm2, replaced) = recorder.events
    assert (direction, slot, none, slot2) == (Direction.IN, 1, None, 2)
    assert replaced is replaced_arm and arm2.sram_offset == 2 * SLOT_BYTES


def test_the_gpu_reports_its_polls_and_the_bridge_what_landed_where(board: Board) -> None:
    """An SDMA queue polls an SRAM dword until the host writes FLAG there, then writes a signal into sys_buf."""
    recorder = Recorder()
    polled = SYS_APERTURE + PCIE_SRAM_BASE + 5 * SLOT_BYTES
    queue = board.gpu.create_queue(
        QueueKind.SDMA, ring_va=0x300000, ring_bytes=4096, rptr_va=0x2000, wptr_va=0x2008, index=1
    )
    with board.usb.gpu.observe(recorder), board.usb.bridge.observe(recorder):
        queue.submit(sdma_poll_regmem(polled, FLAG), sdma_write(SYS_APERTURE + SIGNAL, (0xC0DE).to_bytes(4, "little")))
        board.ctrl.scsi_write(FLAG.to_bytes(4, "little"), slot_start=5)
        queue.wait_idle()
    polls = [event for event in recorder.events if event[0] == "gpu_polled"]
    assert polls[0] == ("gpu_polled", polled, 0, False), "the first check finds the SRAM dword still zero"
    assert polls[-1] == ("gpu_polled", polled, FLAG, True) and not any(p[3] for p in polls[:-1])
    after_poll = recorder.events[recorder.events.index(polls[-1]) + 1 :]
    assert ("dma_write", SIGNAL, 4) in after_poll, "the signal lands after the poll matched"
    landed = next(i for i, event in enumerate(recorder.events) if event[0] == "arm_finished")
    assert recorder.events.index(polls[-1]) > landed, "the poll matches only once the host's bytes landed"


def test_detaching_stops_the_events_and_every_attached_observer_sees_each_event(board: Board) -> None:
    first, second = Recorder(), Recorder()
    bridge = board.usb.bridge
    watching = bridge.observe(first)
    with bridge.observe(second):
        board.ctrl.scsi_write(bytes(SECTOR_BYTES))
    board.ctrl.scsi_write(bytes(SECTOR_BYTES))
    assert len(second.events) == 4 and first.events[:4] == second.events
    assert len(first.events) == 8
    watching.detach()
    watching.detach()  # detaching twice is harmless
    board.ctrl.scsi_write(bytes(SECTOR_BYTES))
    assert len(first.events) == 8 and bridge.observed.observer is None


def test_attaching_something_else_or_twice_is_refused(board: Board) -> None:
    recorder = Recorder()
    with pytest.raises(InvalidArgument, match=r"observer=object\(\)|expected an Observer"):
        board.usb.bridge.observe(object())  # type: ignore[arg-type]
    with board.usb.bridge.observe(recorder), pytest.raises(StateError, match="already attached"):
        board.usb.bridge.observe(recorder)
