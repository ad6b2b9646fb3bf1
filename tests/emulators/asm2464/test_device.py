"""The board: unknown requests (strict / firmware), reset() defines the whole state, the PCIe host side (UR,
bus mastering, the sys_buf collision quirk), identity and construction errors."""

from __future__ import annotations

import pytest

from tinyhil.emulators.asm2464 import Asm2464, Quirks, UnknownRequests, UsbStall, UsbTimeout
from tinyhil.emulators.pcie import PcieUnsupportedRequest
from tinyhil.errors import InvalidArgument


@pytest.mark.parametrize("request_type", [0x40, 0xC0])
def test_strict_mode_stalls_unknown_requests(make_host, request_type: int) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    before = host.bridge.state_digest()
    with pytest.raises(UsbStall, match="unknown vendor request"):
        if request_type == 0x40:
            host.out(0x99)
        else:
            host.inp(0x99, 4)
    assert host.bridge.state_digest() == before


def test_firmware_mode_acks_unknown_out_requests_but_still_stalls_unknown_in(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(quirks=Quirks(unknown_requests="firmware"))
    assert host.bridge.quirks.unknown_requests is UnknownRequests.FIRMWARE
    before = host.bridge.state_digest()
    host.out(0x99, 1, 2)
    host.out(0x99, 1, 2, b"ignored")
    assert host.bridge.state_digest() == before
    with pytest.raises(UsbStall):
        host.inp(0x99, 4)


@pytest.mark.parametrize(
    ("b_request", "value", "index", "data"),
    [(0xE5, 0x100, 0x100, b""), (0xE5, 0x100, 1, b"x"), (0xF2, 1, 0, b"x"), (0xF3, 1, 0, b"x")],
)
def test_requests_without_a_data_stage_reject_data(
    make_host, b_request: int, value: int, index: int, data: bytes
) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    before = host.bridge.state_digest()
    with pytest.raises(UsbStall):
        host.out(b_request, value, index, data)
    assert host.bridge.state_digest() == before


@pytest.mark.parametrize(("addr", "length", "index"), [(0, 513, 0), (0xFFFF, 2, 0), (0, 0, 0), (0, 4, 0x100)])
def test_bad_xdata_reads_stall(make_host, addr: int, length: int, index: int) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsbStall, match="0xE4"):
        make_host().inp(0xE4, length, addr, index)


def test_usb2_boards_read_at_most_64_bytes_and_stream_512_byte_packets(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(usb3=False)
    assert host.bridge.timing.stream_packet_bytes == 512
    assert len(host.inp(0xE4, 64, 0)) == 64
    with pytest.raises(UsbStall, match=r"1\.\.64"):
        host.inp(0xE4, 65, 0)


def test_reset_defines_the_whole_state(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(quirks=Quirks(stream_wedge=True))
    fresh = Asm2464().state_digest()
    assert host.bridge.state_digest() == fresh
    host.bring_up()
    host.arm(0, 1, 1)
    host.bulk_out(b"\x01" * 512)
    host.arm(0, 1, 1)
    host.out(0xE5, 0xA000, 7)
    assert host.bridge.state_digest() != fresh
    host.bridge.reset()
    assert host.bridge.state_digest() == fresh
    with pytest.raises(UsbTimeout, match="no armed operation"):
        host.bulk_out(b"\x01" * 512, timeout_ns=1_000_000)


def test_reset_ends_transfers_in_flight_with_no_device(make_host) -> None:  # type: ignore[no-untyped-def]
    from tinyhil.emulators.asm2464 import Urb, UsbStatus

    host = make_host()
    urb = host.front.submit(Urb(0x02, 512, 10**9, payload=memoryview(b"\x00" * 512)))
    host.bridge.reset()
    assert urb.status is UsbStatus.NO_DEVICE


def test_dma_to_unmapped_addresses_is_unsupported_never_landing_elsewhere(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.bring_up()
    digest = host.bridge.state_digest()
    for addr, nbytes in ((0x100000, 4), (0x27FFFC, 8), (0x821000, 4), (0x8_0000_0000, 4)):
        with pytest.raises(PcieUnsupportedRequest) as info:
            host.bridge.dma_write(addr, b"\xff" * nbytes)
        assert info.value.addr == addr and info.value.nbytes == nbytes
    assert host.bridge.state_digest() == digest


def test_dma_needs_bus_mastering_on_the_path(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.bring_up()
    host.cfg(4, 0x04, 0x2, 2)  # endpoint: MEMORY only
    with pytest.raises(PcieUnsupportedRequest, match="bus mastering is off on the endpoint"):
        host.bridge.dma_read(0x200000, 4)
    host.cfg(4, 0x04, 0x6, 2)
    host.cfg(2, 0x04, 0x2, 2)
    with pytest.raises(PcieUnsupportedRequest, match="bridge 2"):
        host.bridge.dma_read(0x200000, 4)


@pytest.mark.parametrize("collision", [False, True])
def test_sys_buf_collision_clobbers_low_sys_buf_writes_during_a_transfer(make_host, collision: bool) -> None:  # type: ignore[no-untyped-def]
    host = make_host(quirks=Quirks(sys_buf_collision=collision, landing_delay_ns=1_000_000))
    host.bring_up()
    bridge = host.bridge
    host.arm(0, 1, 1)
    host.bulk_out(b"\x01" * 512)  # lands 1 ms after completing: in flight until then
    assert bridge.engine.inflight == 1
    bridge.dma_write(0x8207F8, b"\x11" * 16)  # straddles the stable boundary at 0x820800
    bridge.dma_write(0x820100, b"\x22" * 8)
    low, high = host.xdata(0xA7F8, 8), host.xdata(0xA800, 8)
    assert high == b"\x11" * 8, "+0x800 and up stays stable"
    assert (low == bytes(8)) is collision and (host.xdata(0xA100, 8) == bytes(8)) is collision
    bridge.kernel.run_for(1_000_000)
    assert bridge.engine.inflight == 0
    bridge.dma_write(0x820100, b"\x33" * 8)
    assert host.xdata(0xA100, 8) == b"\x33" * 8, "with nothing in flight the low sys_buf is safe"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"quirks": "strict"}, "expected a Quirks"),
        ({"faults": object()}, "expected a FaultPlan"),
        ({"vendor_id": 0x10000}, "vendor_id"),
    ],
)
def test_bad_construction(options: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        Asm2464(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"link_up_delay_ns": -1}, "link_up_delay_ns"),
        ({"unknown_requests": "lenient"}, "expected one of"),
        ({"full_window_corruption": 1}, "expected a bool"),
    ],
)
def test_bad_quirks(options: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        Quirks(**options)  # type: ignore[arg-type]
