"""Emulated async transfers: usb1.USBTransfer's signatures, callbacks from the event pump, sync and timed modes,
statuses, cancellation, and the staging-buffer reuse bug that timed mode catches."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import usb1

from tinyhil.emulators.faults import Fault, FaultPlan, FaultRule, Operation
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.mocks.usb import EmulatedBoard, EmulatedUsbTransfer, open_emulated_board

TRANSFER_METHODS = [
    "setBulk",
    "setControl",
    "submit",
    "cancel",
    "getStatus",
    "getActualLength",
    "getBuffer",
    "getUserData",
    "setUserData",
    "isSubmitted",
    "close",
    "setCallback",
    "getCallback",
    "getEndpoint",
    "getType",
    "doom",
    "setBuffer",
]
WINDOW = 0x40000


def shape(function: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("name", TRANSFER_METHODS)
def test_method_signatures_match_usb1(name: str) -> None:
    assert shape(getattr(EmulatedUsbTransfer, name)) == shape(getattr(usb1.USBTransfer, name))


def board(mode: str = "sync", **options: Any) -> EmulatedBoard:
    return open_emulated_board(mode=mode, function=PlainEndpoint(vram_bytes=1 << 20), **options)


def arm_transfer(handle: Any, start_slot: int, slots: int, sectors: int, done: list[Any]) -> Any:
    transfer = handle.getTransfer()
    transfer.setControl(0x40, 0xF2, sectors, start_slot | slots << 8, b"", callback=done.append, user_data="arm")
    return transfer


@pytest.mark.parametrize("mode", ["sync", "timed"])
def test_callbacks_fire_from_the_event_pump_and_transfers_stay_distinct(mode: str) -> None:
    with board(mode) as b:
        done: list[Any] = []
        arm = arm_transfer(b.handle, 0, 1, 1, done)
        fence = b.handle.getTransfer()
        fence.setControl(0xC0, 0xE4, 0xA800, 0, 8, callback=done.append, user_data="fence")
        arm.submit()
        fence.submit()
        assert arm.isSubmitted() and fence.isSubmitted() and done == [], "callbacks wait for handleEvents"
        while len(done) < 2:
            b.context.handleEvents()
        assert [t.getUserData() for t in done] == ["arm", "fence"]
        assert not arm.isSubmitted() and arm.getStatus() == usb1.TRANSFER_COMPLETED
        assert fence.getActualLength() == 8 and bytes(fence.getBuffer()) == bytes(8)
        assert arm is not fence


def test_sync_mode_completes_at_submit_and_timed_mode_on_the_virtual_clock() -> None:
    for mode, expect_time_at_submit in (("sync", True), ("timed", False)):
        with board(mode) as b:
            b.handle.controlWrite(0x40, 0xF2, 512, 16 << 8, b"")
            transfer = b.handle.getTransfer()
            transfer.setBulk(0x02, b"\x01" * WINDOW)
            before = b.kernel.now_ns
            transfer.submit()
            cost = b.bridge.timing.bulk_out_ns(WINDOW)
            assert (b.kernel.now_ns - before >= cost) is expect_time_at_submit
            b.context.handleEventsTimeout(1)
            assert transfer.getStatus() == usb1.TRANSFER_COMPLETED and transfer.getActualLength() == WINDOW
            assert b.kernel.now_ns - before >= cost


def test_handle_events_timeout_advances_virtual_time_without_completions() -> None:
    with board("timed") as b:
        start = b.kernel.now_ns
        b.context.handleEventsTimeout(0.25)
        assert b.kernel.now_ns - start == 250_000_000


def stage_and_send(b: EmulatedBoard, *, reuse_before_reap: bool) -> bytes:
    """A driver that stages two chunks in one buffer; the buggy one overwrites it before reaping chunk 0."""
    staging = bytearray(WINDOW)
    chunks = [bytes([i + 1]) * WINDOW for i in range(2)]
    transfers = [b.handle.getTransfer() for _ in chunks]
    for seq, chunk in enumerate(chunks):  # the protocol's order: reap, stage, arm, submit
        if seq and not reuse_before_reap:
            while transfers[seq - 1].isSubmitted():
                b.context.handleEvents()
        staging[:] = chunk
        b.handle.controlWrite(0x40, 0xF2, 512, (seq & 1) * 16 | 16 << 8, b"")
        transfers[seq].setBulk(0x02, staging if reuse_before_reap else bytearray(staging), timeout=1000)
        transfers[seq].submit()
    while any(t.isSubmitted() for t in transfers):
        b.context.handleEvents()
    assert all(t.getStatus() == usb1.TRANSFER_COMPLETED for t in transfers)
    return b.bridge.read_sram(0, 2 * WINDOW)


def test_timed_mode_catches_a_staging_buffer_reused_before_reap() -> None:
    with board("timed") as b:
        landed = stage_and_send(b, reuse_before_reap=True)
    assert landed[:WINDOW] == b"\x02" * WINDOW, "chunk 0 went out with chunk 1's bytes: the bug is visible"


def test_sync_and_timed_modes_land_the_same_bytes_for_a_well_behaved_driver() -> None:
    landed = {}
    for mode in ("sync", "timed"):
        with board(mode) as b:
            landed[mode] = stage_and_send(b, reuse_before_reap=False)
    assert landed["sync"] == landed["timed"] == b"\x01" * WINDOW + b"\x02" * WINDOW


@pytest.mark.parametrize("mode", ["sync", "timed"])
def test_failure_statuses(mode: str) -> None:
    with board(mode) as b:
        results: list[int] = []
        stall = b.handle.getTransfer()
        stall.setControl(0x40, 0xF2, 0, 0, b"", callback=lambda t: results.append(t.getStatus()))
        unpaired = b.handle.getTransfer()
        unpaired.setBulk(0x02, b"\x00" * 512, callback=lambda t: results.append(t.getStatus()), timeout=5)
        stall.submit()
        unpaired.submit()
        while len(results) < 2:
            b.context.handleEvents()
        assert results == [usb1.TRANSFER_STALL, usb1.TRANSFER_TIMED_OUT]


def test_cancel_reports_cancelled_and_close_refuses_a_submitted_transfer() -> None:
    with board("timed") as b:
        transfer = b.handle.getTransfer()
        transfer.setBulk(0x02, b"\x00" * 512, timeout=0)
        with pytest.raises(usb1.USBErrorNotFound):
            transfer.cancel()
        transfer.submit()
        with pytest.raises(ValueError, match="submitted"):
            transfer.close()
        with pytest.raises(ValueError, match="submitted"):
            transfer.submit()
        transfer.cancel()
        b.context.handleEventsTimeout(0)
        assert transfer.getStatus() == usb1.TRANSFER_CANCELLED and not transfer.isSubmitted()
        transfer.close()
        with pytest.raises(usb1.DoomedTransferError):
            transfer.setBulk(0x02, b"\x00")


def test_bulk_in_fills_the_buffer_and_readonly_payloads_are_copied_at_setup() -> None:
    with board("timed") as b:
        b.bridge.write_sram(0, bytes(range(256)) * 4)
        b.handle.controlWrite(0x40, 0xF2, 2 | 0x8000, 1 << 8, b"")
        b.bridge.engine.released = True
        transfer = b.handle.getTransfer()
        transfer.setBulk(0x81, 1024)
        transfer.submit()
        b.context.handleEvents()
        assert transfer.getBuffer()[: transfer.getActualLength()] == bytes(range(256)) * 4
        assert transfer.getEndpoint() == 0x81 and transfer.getType() == usb1.TRANSFER_TYPE_BULK
        payload = np.full(512, 3, dtype=np.uint8)
        b.handle.controlWrite(0x40, 0xF2, 1, 0, b"")
        out = b.handle.getTransfer()
        out.setBulk(0x02, payload.tobytes())
        out.submit()
        b.context.handleEvents()
        assert b.bridge.read_sram(0, 512) == b"\x03" * 512


def test_unsubmittable_transfers() -> None:
    with board() as b:
        transfer = b.handle.getTransfer()
        with pytest.raises(ValueError, match="initialized"):
            transfer.submit()
        with pytest.raises(usb1.USBErrorInvalidParam):
            transfer.setControl(0x40, 0xF2, 0x10000, 0, b"")
        transfer.doom()
        with pytest.raises(usb1.DoomedTransferError):
            transfer.setBulk(0x02, b"")


def test_set_buffer_replaces_a_bulk_payload_and_refuses_control_transfers() -> None:
    with board() as b:
        transfer = b.handle.getTransfer()
        transfer.setBulk(0x02, b"\x01" * 512, timeout=100)
        transfer.setBuffer(b"\x02" * 512)
        b.handle.controlWrite(0x40, 0xF2, 1, 0, b"")
        transfer.submit()
        b.context.handleEvents()
        assert transfer.getStatus() == usb1.TRANSFER_COMPLETED and b.bridge.read_sram(0, 512) == b"\x02" * 512
        control = b.handle.getTransfer()
        control.setControl(0xC0, 0xE4, 0, 0, 4)
        with pytest.raises(ValueError, match="setControl"):
            control.setBuffer(4)


def test_batched_async_control_transfers_overlap_the_submission_latency() -> None:
    with board("timed") as b:
        timing = b.bridge.timing
        start = b.kernel.now_ns
        b.handle.controlWrite(0x40, 0xF2, 512, 16 << 8, b"")
        b.handle.controlRead(0xC0, 0xE4, 0xA800, 0, 8)
        sequential = b.kernel.now_ns - start
        assert sequential == 2 * timing.control_round_trip_ns()
        done: list[Any] = []
        arm, fence = arm_transfer(b.handle, 16, 16, 512, done), b.handle.getTransfer()
        fence.setControl(0xC0, 0xE4, 0xA800, 0, 8, callback=done.append)
        start = b.kernel.now_ns
        arm.submit()
        fence.submit()
        while len(done) < 2:
            b.context.handleEvents()
        batched = b.kernel.now_ns - start
        assert batched == timing.usb_latency_ns + 2 * timing.control_service_ns < sequential


@pytest.mark.parametrize("mode", ["sync", "timed"])
def test_babbling_in_transfers_complete_with_overflow_and_the_requested_bytes(mode: str) -> None:
    """The data stage moved the requested bytes before the device overran it: libusb reports TRANSFER_OVERFLOW with
    actual_length the requested length, and the bytes are in the buffer (docs/faults.md "Babble")."""
    plan = FaultPlan((FaultRule(Operation.bulk_in(), 1, Fault.babble()),
                      FaultRule(Operation.control_in(0xE4), 1, Fault.babble())))  # fmt: skip
    with board(mode, faults=plan) as b:
        sram = bytes(range(256)) * 4
        b.bridge.write_sram(0, sram)
        b.bridge.write_xdata(0x100, b"\x0a\x0b\x0c\x0d")
        b.handle.controlWrite(0x40, 0xF2, 2 | 0x8000, 1 << 8, b"")
        b.bridge.engine.released = True
        done: list[Any] = []
        bulk, control = b.handle.getTransfer(), b.handle.getTransfer()
        bulk.setBulk(0x81, len(sram), callback=done.append)
        control.setControl(0xC0, 0xE4, 0x100, 0, 4, callback=done.append)
        bulk.submit()
        control.submit()
        while len(done) < 2:
            b.context.handleEvents()
        for transfer, data in ((bulk, sram), (control, b"\x0a\x0b\x0c\x0d")):
            assert transfer.getStatus() == usb1.TRANSFER_OVERFLOW
            assert transfer.getActualLength() == len(data) and transfer.getBuffer()[: len(data)] == data
