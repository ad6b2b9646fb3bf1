"""Issue 3's checks end to end: the ASM2464 client over MockUSB3 (the real transport, the emulated usb1 stack, the
bridge emulator), one test per check; each fails if the behaviour it names breaks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import usb1
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyhil.asm2464 import Asm2464Controller, PcieError, SramArm, pcie_bringup
from tinyhil.emulators.asm2464 import Asm2464, Quirks
from tinyhil.emulators.faults import Fault, FaultKind, FaultPlan, Operation, Transfer
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.errors import InvalidArgument
from tinyhil.fixtures.strategies import fault_plans
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.asm2464 import (
    BULK_OUT_EP,
    PCIE_SRAM_BASE,
    SECTOR_BYTES,
    SLOT_BYTES,
    SLOT_SECTORS,
    SLOTS,
    SRAM_WINDOW_BYTES,
    WINDOW_BYTES,
    WINDOW_SLOTS,
    XDATA_READ_MAX_USB2,
    XDATA_READ_MAX_USB3,
    CplStatus,
    FmtType,
    Request,
    Xdata,
)
from tinyhil.spec.pci import Command, Config
from tinyhil.usb import ShortTransfer
from tinyhil.usb.transport import SYNC_CONTROL_MAX

SMALL_VRAM = 1 << 20


def small_usb(**options: Any) -> MockUSB3:
    """A board with a 1 MB plain endpoint behind it (fast to build; the checks do not need a GPU)."""
    mode = options.pop("mode", "sync")
    return MockUSB3.over(Asm2464(function=PlainEndpoint(vram_bytes=SMALL_VRAM), **options), mode=mode)


@pytest.fixture
def usb() -> Iterator[MockUSB3]:
    with small_usb() as transport:
        yield transport


@pytest.fixture
def ctrl(usb: MockUSB3) -> Asm2464Controller:
    return Asm2464Controller(usb, retry_delay_s=0)


def pattern(nbytes: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8).tobytes()


def count_calls(monkeypatch: pytest.MonkeyPatch, usb: MockUSB3, name: str) -> list[tuple[Any, ...]]:
    """Record the arguments of every call to ``usb.<name>`` (still forwarded to the transport)."""
    calls: list[tuple[Any, ...]] = []
    original = getattr(usb, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(usb, name, spy)
    return calls


# --- XDATA ---
def test_xdata_write_read_round_trip(ctrl: Asm2464Controller, usb: MockUSB3) -> None:
    data = pattern(37, seed=1)
    ctrl.xdata_write(0x5000, data)
    assert ctrl.xdata_read(0x5000, len(data)) == data
    assert usb.bridge.read_xdata(0x5000, len(data)) == data
    assert ctrl.xdata_read(0x5000 + len(data), 4) == bytes(4), "a write past its bytes"


def test_xdata_reads_beyond_the_request_maximum_are_chunked(
    ctrl: Asm2464Controller, usb: MockUSB3, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = pattern(3 * XDATA_READ_MAX_USB3 + 100, seed=2)
    usb.bridge.write_xdata(0x4000, data)
    reads = count_calls(monkeypatch, usb, "control_read")
    assert ctrl.xdata_read(0x4000, len(data)) == data
    assert [call[1] for call in reads] == [XDATA_READ_MAX_USB3] * 3 + [100]
    assert [call[2] for call in reads] == [0x4000 + i * XDATA_READ_MAX_USB3 for i in range(4)]


def test_usb2_boards_take_64_byte_xdata_reads_and_stall_on_larger_ones() -> None:
    data = pattern(200, seed=3)
    with small_usb(usb3=False) as usb:
        usb.bridge.write_xdata(0x4000, data)
        assert Asm2464Controller(usb, usb2=True).xdata_read(0x4000, len(data)) == data
        with pytest.raises(usb1.USBErrorPipe):
            usb.control_read(Request.XDATA_READ, XDATA_READ_MAX_USB2 + 1, 0x4000)


# --- SRAM windows (0xF2) ---
def test_scsi_write_lands_in_sram_and_reads_back_through_the_0x8000_window(ctrl: Asm2464Controller) -> None:
    data = pattern(SRAM_WINDOW_BYTES + 3 * SECTOR_BYTES + 7, seed=4)  # not sector aligned: padded on the wire
    arm = ctrl.scsi_write(data, slot_start=0)
    assert arm.sectors == 12 and arm.wire_bytes == 12 * SECTOR_BYTES
    assert ctrl.xdata_read(Xdata.SRAM_WINDOW, SRAM_WINDOW_BYTES) == data[:SRAM_WINDOW_BYTES]


@pytest.mark.parametrize("slot_start", [0, 1, WINDOW_SLOTS - 1, WINDOW_SLOTS, SLOTS - 2])
def test_scsi_write_lands_at_the_slot_s_pcie_address(slot_start: int) -> None:
    data = pattern(SLOT_BYTES + SECTOR_BYTES, seed=slot_start)  # spills one sector into the next slot
    with small_usb() as usb:
        ctrl = Asm2464Controller(usb, retry_delay_s=0)
        pcie_bringup(ctrl)  # the GPU reaches SRAM only with bus mastering on the path
        ctrl.scsi_write(data, slot_start=slot_start)
        base = PCIE_SRAM_BASE + slot_start * SLOT_BYTES
        assert bytes(usb.bridge.dma_read(base, len(data))) == data
        after = usb.bridge.dma_read(base + len(data), SECTOR_BYTES)
        assert bytes(after) == bytes(SECTOR_BYTES), "bytes past the transfer were touched"
        if slot_start:
            assert bytes(usb.bridge.dma_read(base - SECTOR_BYTES, SECTOR_BYTES)) == bytes(SECTOR_BYTES)


@pytest.mark.parametrize("quirk", [True, False], ids=["quirk-on", "quirk-off"])
@pytest.mark.parametrize("slot_start", [0, WINDOW_SLOTS])
def test_full_window_corruption_switch(quirk: bool, slot_start: int) -> None:
    data = pattern(WINDOW_BYTES, seed=5)  # 16 slots: the whole window
    with small_usb(quirks=Quirks(full_window_corruption=quirk)) as usb:
        arm = Asm2464Controller(usb).scsi_write(data, slot_start=slot_start)
        assert arm.slot_count == WINDOW_SLOTS
        landed = usb.bridge.read_sram(slot_start * SLOT_BYTES, WINDOW_BYTES)
        assert landed[:-SECTOR_BYTES] == data[:-SECTOR_BYTES]
        assert (landed[-SECTOR_BYTES:] == data[-SECTOR_BYTES:]) is not quirk


def test_full_window_corruption_spares_a_transfer_one_sector_short_of_the_window() -> None:
    data = pattern(WINDOW_BYTES - SECTOR_BYTES, seed=6)
    with small_usb(quirks=Quirks(full_window_corruption=True)) as usb:
        Asm2464Controller(usb).scsi_write(data)
        assert usb.bridge.read_sram(0, len(data)) == data


# --- PCIe bring-up ---
def test_pcie_bringup_over_mockusb3_reads_vendor_0x1002_and_assigns_every_bar() -> None:
    with MockUSB3() as usb:  # the default function behind the bridges
        ctrl = Asm2464Controller(usb, retry_delay_s=0)
        topology = pcie_bringup(ctrl)
        config = usb.bridge.function.config
        assert topology.vendor_id == 0x1002 == ctrl.pcie_cfg_read(4, 0, 0, Config.VENDOR_ID, 2)
        assert [bar.index for bar in topology.bars] == sorted(config.bar_specs)
        for bar in topology.bars:
            assert (config.bar_base(bar.index), config.bar_size(bar.index)) == (bar.address, bar.size)
        assert topology.rebar_size == config.bar_size(0)
        assert config.command & (Command.MEMORY | Command.MASTER) == Command.MEMORY | Command.MASTER
        assert [(b.bus, b.secondary, b.subordinate) for b in topology.bridges] == [(b, b + 1, 4) for b in range(4)]
        for bridge in topology.bridges:  # every bridge forwards every BAR: 64-bit prefetchable ones in its
            for bar in topology.bars:  # prefetchable window, the others in its memory window
                window = bridge.prefetchable if bar.is_64bit and bar.prefetchable else bridge.memory
                assert window is not None and bar.address in window and bar.end - 1 in window


def test_after_bringup_memory_streams_reach_the_function_bars(ctrl: Asm2464Controller, usb: MockUSB3) -> None:
    topology = pcie_bringup(ctrl)
    vram = topology.bar(0).address
    data = pattern(3 * 1024 + 8, seed=7)
    ctrl.pcie_mem_write(vram + 0x1000, data)
    assert bytes(usb.bridge.function.vram[0x1000 : 0x1000 + len(data)]) == data  # type: ignore[attr-defined]
    assert ctrl.pcie_mem_read(vram + 0x1000, len(data)) == data


# --- fault plans ---
@pytest.mark.parametrize("nth", [1, 2, 3])
def test_a_stall_on_the_nth_bulk_raises_pipe_at_that_call_and_clear_halt_recovers(nth: int) -> None:
    plan = FaultPlan.single(Operation.bulk_out(), nth, Fault.stall())
    chunks = [pattern(2 * SECTOR_BYTES, seed=i) for i in range(nth + 2)]
    with small_usb(faults=plan) as usb:
        ctrl = Asm2464Controller(usb)
        for call, chunk in enumerate(chunks[:nth], start=1):
            if call < nth:
                ctrl.scsi_write(chunk)
                continue
            with pytest.raises(usb1.USBErrorPipe):
                ctrl.scsi_write(chunk)
        with pytest.raises(usb1.USBErrorPipe):  # the endpoint stays halted until CLEAR_FEATURE(HALT)
            ctrl.scsi_write(chunks[nth])
        usb.clear_halt(BULK_OUT_EP)
        ctrl.scsi_write(chunks[nth + 1], slot_start=3)
        assert usb.bridge.read_sram(3 * SLOT_BYTES, len(chunks[nth + 1])) == chunks[nth + 1]
        if nth > 1:
            assert usb.bridge.read_sram(0, len(chunks[nth - 2])) == chunks[nth - 2]


_BULK_FAULT_ERRORS: dict[FaultKind, type[BaseException]] = {
    FaultKind.STALL: usb1.USBErrorPipe,
    FaultKind.TIMEOUT: usb1.USBErrorTimeout,
    FaultKind.SHORT_WRITE: ShortTransfer,
    FaultKind.NO_DEVICE: usb1.USBErrorNoDevice,
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=fault_plans(transfers=(Transfer.BULK_OUT,), max_rules=3, max_occurrence=4))
def test_bulk_fault_plans_fail_exactly_the_planned_writes_and_clear_halt_recovers(plan: FaultPlan) -> None:
    with small_usb(faults=plan) as usb:
        ctrl = Asm2464Controller(usb)
        for attempt in range(1, 6):
            chunk = pattern(4 * SECTOR_BYTES, seed=attempt)
            fault = plan.fault_for(Operation.bulk_out(), attempt)
            if fault is not None and fault.kind is FaultKind.SHORT_WRITE and fault.partial_bytes >= len(chunk):
                fault = None  # "short" by at least the whole transfer: it completes
            if fault is None:
                ctrl.scsi_write(chunk, slot_start=attempt)
                assert usb.bridge.read_sram(attempt * SLOT_BYTES, len(chunk)) == chunk
                continue
            if fault.kind is FaultKind.DROP:  # the wire reports success and nothing lands
                ctrl.scsi_write(chunk, slot_start=attempt)
                assert usb.bridge.read_sram(attempt * SLOT_BYTES, len(chunk)) == bytes(len(chunk))
                continue
            with pytest.raises(_BULK_FAULT_ERRORS[fault.kind]) as info:
                ctrl.scsi_write(chunk, slot_start=attempt, timeout=50)
            if fault.kind is FaultKind.NO_DEVICE:
                with pytest.raises(usb1.USBErrorNoDevice):
                    ctrl.scsi_write(chunk)
                return
            if fault.kind is FaultKind.TIMEOUT:
                assert info.value.transferred <= min(fault.partial_bytes, len(chunk))  # type: ignore[attr-defined]
            usb.clear_halt(BULK_OUT_EP)  # also resets the 0xF2 engine (a partial transfer leaves its arm)


# --- timed mode ---
@pytest.mark.parametrize(("mode", "lands"), [("timed", "overwritten"), ("sync", "original")])
def test_timed_mode_catches_staging_buffer_reuse_before_reap(mode: str, lands: str) -> None:
    original, overwritten = pattern(8 * SECTOR_BYTES, seed=8), pattern(8 * SECTOR_BYTES, seed=9)
    staging = bytearray(original)
    with small_usb(mode=mode) as usb:
        arm = SramArm.for_bytes(len(staging))
        usb.control_write(Request.SRAM_ARM, arm.value, arm.index)
        tag = usb.bulk_write_async(staging)
        staging[:] = overwritten  # the driver bug: reuse before reaping
        usb.bulk_wait(tag)
        expected = overwritten if lands == "overwritten" else original
        assert usb.bridge.read_sram(0, len(staging)) == expected


# --- bad input over the transport ---
def test_a_tlp_to_an_unmapped_address_raises_naming_ur(ctrl: Asm2464Controller, usb: MockUSB3) -> None:
    topology = pcie_bringup(ctrl)
    unmapped = max(bar.end for bar in topology.bars if not bar.is_64bit) + 0x1000_0000
    with pytest.raises(PcieError, match=r"\bUR\b") as info:
        ctrl.pcie_request(FmtType.MRD32, unmapped)
    assert info.value.cpl_status == CplStatus.UR
    with pytest.raises(usb1.USBErrorTimeout, match="no completer"):  # a stream read has no completion to carry UR
        ctrl.pcie_mem_read(unmapped, 64)


def test_config_reads_beyond_unprogrammed_bridges_raise_naming_ur(ctrl: Asm2464Controller) -> None:
    ctrl.set_pcie_power(True)
    ctrl.wait_pcie_link(1.0)
    with pytest.raises(PcieError, match=r"\bUR\b"):
        ctrl.pcie_cfg_read(4, 0, 0, Config.VENDOR_ID, 2)


BAD_ARMS = [
    ("slots past the end", SLOT_SECTORS, SLOTS - 1 | 2 << 8),
    ("start slot 32", 1, SLOTS),
    ("more sectors than the slots hold", 2 * SLOT_SECTORS + 1, 0 | 2 << 8),
    ("zero sectors", 0, 0),
    ("whole SRAM plus one sector", SLOTS * SLOT_SECTORS + 1, 0 | SLOTS << 8),
]


@pytest.mark.parametrize(("what", "value", "index"), BAD_ARMS, ids=[r[0] for r in BAD_ARMS])
def test_an_arm_that_overruns_sram_stalls_and_changes_nothing(usb: MockUSB3, what: str, value: int, index: int) -> None:
    before = usb.bridge.state_digest()
    with pytest.raises(usb1.USBErrorPipe):
        usb.control_write(Request.SRAM_ARM, value, index)
    assert usb.bridge.state_digest() == before, what
    with pytest.raises(usb1.USBErrorTimeout):  # nothing was armed
        usb.bulk_write(bytes(SECTOR_BYTES), timeout=10)


def test_the_whole_sram_is_one_valid_arm(ctrl: Asm2464Controller, usb: MockUSB3) -> None:
    data = pattern(SLOTS * SLOT_BYTES, seed=10)
    ctrl.scsi_write(data)
    assert usb.bridge.read_sram(0, len(data)) == data


BAD_BULKS: list[tuple[str, Callable[[MockUSB3], Any], str]] = [
    ("bulk OUT without an arm", lambda usb: usb.bulk_write(bytes(SECTOR_BYTES), timeout=20), "transferred"),
    ("bulk IN without an arm", lambda usb: usb.bulk_read(SECTOR_BYTES, timeout=20), "received"),
    (
        "bulk OUT longer than its arm",
        lambda usb: (usb.control_write(Request.SRAM_ARM, 1, 0), usb.bulk_write(bytes(2 * SECTOR_BYTES), timeout=20)),
        "transferred",
    ),
    (
        "bulk OUT shorter than its arm",
        lambda usb: (usb.control_write(Request.SRAM_ARM, 2, 0), usb.bulk_write(bytes(SECTOR_BYTES), timeout=20)),
        "transferred",
    ),
]


@pytest.mark.parametrize(("what", "call", "field"), BAD_BULKS, ids=[r[0] for r in BAD_BULKS])
def test_an_unpaired_or_mis_sized_bulk_times_out_with_what_moved(
    usb: MockUSB3, what: str, call: Callable[[MockUSB3], Any], field: str
) -> None:
    sram_before = usb.bridge.read_sram(0, 2 * SECTOR_BYTES)
    start_ns = usb.kernel.now_ns
    with pytest.raises(usb1.USBErrorTimeout) as info:
        call(usb)
    assert not getattr(info.value, field), what  # nothing moved (0 bytes, or an empty buffer)
    assert hasattr(info.value, field)
    assert usb.kernel.now_ns - start_ns >= 20_000_000, "the timeout runs in virtual time"
    assert usb.bridge.read_sram(0, 2 * SECTOR_BYTES) == sram_before


# --- random vendor requests through the transport ---
# a synchronous control IN takes 0..SYNC_CONTROL_MAX bytes (length 0 goes to the board, which stalls it)
_FIELD_LIMITS = {"request": 0xFF, "value": 0xFFFF, "index": 0xFFFF, "length": SYNC_CONTROL_MAX}


def _field(limit: int) -> st.SearchStrategy[int]:
    return st.one_of(st.integers(0, limit), st.integers(-3, -1), st.integers(limit + 1, limit + 3))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    request=st.one_of(st.sampled_from([int(r) for r in Request]), _field(_FIELD_LIMITS["request"])),
    value=st.one_of(st.sampled_from([0, 1, 0xB450, 0x8000, 0x44 | 0xF << 8]), _field(_FIELD_LIMITS["value"])),
    index=st.one_of(st.sampled_from([0, 1, 2, 0x1000]), _field(_FIELD_LIMITS["index"])),
    data=st.binary(max_size=16),
    length=st.one_of(st.sampled_from([1, 8, 512, 513]), _field(_FIELD_LIMITS["length"])),
    direction_in=st.booleans(),
)
def test_random_vendor_requests_raise_only_usb1_errors_and_rejections_change_nothing(
    request: int, value: int, index: int, data: bytes, length: int, direction_in: bool
) -> None:
    fields = {"request": request, "value": value, "index": index}
    if direction_in:
        fields["length"] = length
    out_of_range = [name for name, v in fields.items() if not 0 <= v <= _FIELD_LIMITS[name]]
    with small_usb() as usb:
        usb.control_write(Request.PCIE_POWER, 1)
        before = usb.bridge.state_digest()
        try:
            if direction_in:
                result = usb.control_read(request, length, value, index, timeout=100)
                assert isinstance(result, bytearray) and len(result) == length
            else:
                usb.control_write(request, value, index, data, timeout=100)
        except InvalidArgument as exc:
            assert out_of_range, f"InvalidArgument for in-range fields: {exc}"
            assert usb.bridge.state_digest() == before
        except usb1.USBError:
            assert not out_of_range, f"fields {out_of_range} out of range reached the device"
            assert usb.bridge.state_digest() == before
        else:
            assert not out_of_range, f"fields {out_of_range} out of range were accepted"
