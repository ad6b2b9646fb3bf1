"""The 0xF0 TLP engine: routing through the programmed bridges, byte lanes, completions (UR, injected statuses),
posted writes, stream modes, stream cancel and the stream wedge."""

from __future__ import annotations

import struct

import pytest

from tinyhil.emulators.asm2464 import Quirks, Urb, UsbStall, UsbStatus, UsbTimeout
from tinyhil.emulators.faults import Fault, FaultPlan, FaultRule, Operation
from tinyhil.spec.asm2464 import CplStatus, FmtType, RetStatus

UR, SC = int(CplStatus.UR), int(CplStatus.SC)


def test_the_endpoint_answers_0x1002_only_after_the_bridges_are_programmed(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.power_on()
    assert host.cfg(0, 0x00) == (0x2464_1B21, SC), "bridge 0 answers config type 0 on bus 0"
    assert host.cfg(4, 0x00)[1] == UR, "bus 4 is unreachable before bus numbers are programmed"
    host.program_bridges()
    assert host.cfg(4, 0x00) == (0x744C_1002, SC)
    assert host.cfg(4, 0x00, size=2) == (0x1002, SC)
    assert host.cfg(3, 0x19, size=1) == (4, SC) and host.cfg(2, 0x00)[0] & 0xFFFF == 0x1B21


def test_config_type_selects_the_bus_side(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.power_on()
    host.tlp(FmtType.CFGRD0, 1 << 24)
    assert host.completion()[1] == UR, "type 0 goes to bus 0 only"
    host.tlp(FmtType.CFGRD1, 0)
    assert host.completion()[1] == UR, "type 1 goes to buses above 0 only"
    host.tlp(FmtType.CFGRD0, 1 << 19)
    assert host.completion()[1] == UR, "bus 0 has only device 0"


def test_partially_programmed_bridges_do_not_route(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.power_on()
    host.cfg(0, 0x19, 1, 1)
    host.cfg(0, 0x1A, 4, 1)
    assert host.cfg(1, 0)[1] == SC and host.cfg(2, 0)[1] == UR, "bridge 1 has no bus numbers yet"


def test_memory_requests_reach_bars_only_through_windows_and_unmapped_ones_complete_with_ur(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.bring_up()
    host.tlp(FmtType.MWR64, 0x8_0000_0100, 0x0000_BEEF << 16, byte_enable=0b1100)  # posted, lanes 2-3
    with pytest.raises(UsbStall, match="no completion pending"):
        host.completion()
    assert host.bridge.function.mmio_read(0, 0x100, 4) == b"\x00\x00\xef\xbe"
    host.tlp(FmtType.MRD64, 0x8_0000_0100, byte_enable=0b0100)
    data, cpl, ret = host.completion()
    assert (data, cpl, ret) == (0xEF << 16, SC, 0), "completion data sits in its byte lane"
    assert host.inp(0xF0, 8)[5] == 1, "byte 5 is the byte count"
    host.tlp(FmtType.MWR32, 0xE000_0040, 0x12345678)
    assert host.bridge.function.registers[0x40:0x44].tobytes() == bytes.fromhex("78563412")
    for addr, fmt in (
        (0x1000_0000, FmtType.MRD32),
        (0x9_0000_0000, FmtType.MRD64),
        (0xE000_0000 + (2 << 20), FmtType.MRD32),
    ):
        host.tlp(fmt, addr)
        data, cpl, ret = host.completion()
        assert (data, cpl, ret) == (0, UR, 0), f"{addr:#x} is unmapped"
    completion = host.inp(0xF0, 8)
    assert completion[4] >> 5 == 0b001 and completion[:4] == b"\x00" * 4 and completion[7] == 0
    host.tlp(FmtType.MWR32, 0x1000_0000, 0xFFFFFFFF)  # posted to nowhere: vanishes, lands nowhere
    assert host.bridge.function.registers.any() and not host.bridge.function.doorbells.any()


def test_bars_stop_decoding_when_the_endpoint_memory_enable_is_cleared(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.bring_up()
    host.cfg(4, 0x04, 0x4, 2)  # MASTER only
    host.tlp(FmtType.MRD32, 0xE000_0000)
    assert host.completion()[1] == UR


@pytest.mark.parametrize(
    ("status", "field"),
    [
        (RetStatus.ERROR, "ret"),
        (RetStatus.TIMEOUT, "ret"),
        (CplStatus.CRS, "cpl"),
        (CplStatus.CA, "cpl"),
        (CplStatus.UR, "cpl"),
    ],
)
def test_completion_statuses_are_injected_by_the_fault_plan(make_host, status: int, field: str) -> None:  # type: ignore[no-untyped-def]
    fault = Fault.ret_status(status) if field == "ret" else Fault.cpl_status(status)
    host = make_host(faults=FaultPlan((FaultRule(Operation.tlp(), 2, fault),)))
    host.power_on()
    assert host.cfg(0, 0x00)[1] == SC
    host.tlp(FmtType.CFGWR0, 0x18, 0x0000_0100, byte_enable=0b0010)
    data, cpl, ret = host.completion()
    assert (data, cpl if field == "cpl" else ret) == (0, status)
    assert host.cfg(0, 0x19, size=1) == (0, SC), "the failed TLP had no effect"
    assert host.cfg(0, 0x00) == (0x2464_1B21, SC), "the third TLP is fine again"


def test_tlps_with_the_link_down_time_out_in_the_firmware(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.tlp(FmtType.CFGRD0, 0)
    assert host.completion() == (0, SC, int(RetStatus.TIMEOUT))


def test_stream_write_and_read_move_dwords_through_the_following_bulk(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.bring_up()
    payload = bytes(range(256)) * 12  # 3 KB: three 1024 B packets
    host.tlp(FmtType.MWR64, 0x8_0000_1000, len(payload) // 4, mode=1)
    before = host.bridge.kernel.now_ns
    host.bulk_out(payload)
    took = host.bridge.kernel.now_ns - before
    assert host.bridge.function.mmio_read(0, 0x1000, len(payload)) == payload
    assert took >= host.bridge.timing.stream_ns(len(payload)) > 3 * 1024 * 1_000_000_000 // 5_000_000
    assert host.xdata(0x7000, 1024) == payload[-1024:], "the last packet sits in the landing buffer"
    host.tlp(FmtType.MRD64, 0x8_0000_1000, len(payload) // 4, mode=2)
    assert host.bulk_in(len(payload)) == payload


def test_stream_read_of_an_unmapped_range_never_completes(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.bring_up()
    host.tlp(FmtType.MRD32, 0x1000_0000, 4, mode=2)
    with pytest.raises(UsbTimeout, match="no completer"):
        host.bulk_in(16, timeout_ns=1_000_000)


def test_a_new_0xf0_out_cancels_a_stream_in_flight(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.bring_up()
    payload = b"\xab" * 8192
    host.tlp(FmtType.MWR64, 0x8_0000_0000, len(payload) // 4, mode=1)
    bulk = host.front.submit(Urb(0x02, len(payload), 10**9, payload=memoryview(payload)))
    host.bridge.kernel.run_for(host.bridge.timing.bulk_setup_ns + 3 * 1024 * 1_000_000_000 // 4_000_000)
    host.cfg(0, 0x00)  # a new 0xF0 OUT
    host.front.wait(bulk)
    assert bulk.status is UsbStatus.TIMED_OUT and "cancelled" in bulk.message
    moved = bulk.actual_length
    assert moved % 1024 == 0 and 3 * 1024 <= moved < len(payload)
    vram = host.bridge.function.mmio_read(0, 0, len(payload))
    assert vram[:moved] == payload[:moved] and vram[moved:] == bytes(len(payload) - moved)


def test_a_stream_armed_but_not_started_is_cancelled_by_a_new_0xf0_out(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.bring_up()
    host.tlp(FmtType.MWR64, 0x8_0000_0000, 4, mode=1)
    host.cfg(0, 0x00)
    with pytest.raises(UsbTimeout, match="no armed operation"):
        host.bulk_out(b"\x01" * 16, timeout_ns=1_000_000)


def test_stream_wedge_then_reset(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(quirks=Quirks(stream_wedge=True))
    host.bring_up()
    host.tlp(FmtType.MWR64, 0x8_0000_0000, (4 << 20) // 4, mode=1)  # exactly 4 MB: not longer than the threshold
    assert not host.bridge.wedged
    host.tlp(FmtType.MWR64, 0x8_0000_0000, (4 << 20) // 4 + 1, mode=1)
    assert host.bridge.wedged
    for call in (
        lambda: host.inp(0xE4, 1, 0xB450, timeout_ns=1_000_000),
        lambda: host.bulk_out(b"\x00" * 16, timeout_ns=1_000_000),
    ):
        with pytest.raises(UsbTimeout, match="wedged"):
            call()
    host.bridge.reset()
    assert host.inp(0xE4, 1, 0xB450) == b"\x00" and not host.bridge.wedged


def test_without_the_quirk_long_streams_do_not_wedge(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.bring_up()
    host.tlp(FmtType.MWR64, 0x8_0000_0000, 8 << 20, mode=1)
    assert not host.bridge.wedged and host.inp(0xE4, 1, 0xB450) == b"\x78"


@pytest.mark.parametrize(
    ("value", "index", "data", "match"),
    [
        (0x0F40, 0, b"\x00" * 11, "12"),
        (0x0F41, 0, b"\x00" * 12, "fmt_type"),
        (0x0F40, 3, b"\x00" * 12, "mode"),
        (0x0040, 0, b"\x00" * 12, "byte_enable"),
        (0x0540, 0, b"\x00" * 12, "contiguous"),
        (0x1F40, 0, b"\x00" * 12, "byte_enable"),
        (0x0F40, 0, struct.pack("<III", 2, 0, 0), "dword aligned"),
        (0x0F40, 0, struct.pack("<III", 0, 1, 0), "addr_hi"),
        (0x0F04, 0, struct.pack("<III", 0, 1, 0), "addr_hi"),
        (0x0F00, 1, struct.pack("<III", 0, 0, 4), "memory write"),
        (0x0F40, 2, struct.pack("<III", 0, 0, 4), "memory read"),
        (0x0F60, 1, struct.pack("<III", 0, 0, 0), ">= 1 dword"),
    ],
)
def test_malformed_0xf0_requests_stall_and_change_nothing(
    make_host, value: int, index: int, data: bytes, match: str
) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.power_on()
    before = host.bridge.state_digest()
    with pytest.raises(UsbStall, match=match):
        host.out(0xF0, value, index, data)
    assert host.bridge.state_digest() == before


@pytest.mark.parametrize(("value", "index", "length"), [(1, 0, 8), (0, 1, 8), (0, 0, 4)])
def test_malformed_completion_reads_stall(make_host, value: int, index: int, length: int) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.power_on()
    host.cfg(0, 0)
    with pytest.raises(UsbStall, match="expected 0, 0, 8"):
        host.inp(0xF0, length, value, index)
