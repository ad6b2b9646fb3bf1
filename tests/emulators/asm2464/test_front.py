"""The USB front: endpoint queues on the virtual clock, control during bulk, payload read at completion,
cancellation, faults (stall halts a bulk endpoint until CLEAR_FEATURE, partial timeouts, no-device, short writes), and
the front's composition from the parts it owns."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tinyhil.emulators import asm2464
from tinyhil.emulators.asm2464 import (
    WAIT_CAP_NS,
    Asm2464,
    Urb,
    UsbBabble,
    UsbFront,
    UsbNoDevice,
    UsbStall,
    UsbStatus,
    UsbTimeout,
)
from tinyhil.emulators.asm2464.bulk import BulkEndpoints
from tinyhil.emulators.asm2464.ep0 import ControlEndpoint
from tinyhil.emulators.asm2464.inline import InlinePath
from tinyhil.emulators.faults import Fault, FaultPlan, FaultRule, Operation
from tinyhil.emulators.kernel import VirtualTimeout

SECOND_NS = 1_000_000_000


def bulk(data: bytes | bytearray, timeout_ns: int = 10**9) -> Urb:
    return Urb(0x02, len(data), timeout_ns, payload=memoryview(data))


def test_control_requests_are_taken_while_a_bulk_is_in_flight(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.arm(0, 16, 512)
    urb = host.front.submit(bulk(b"\x01" * 0x40000))
    host.arm(16, 16, 512)  # the next window's arm while the first bulk moves: accepted, not stalled
    second = host.front.submit(bulk(b"\x02" * 0x40000))
    host.front.wait(second)
    assert urb.status is second.status is UsbStatus.COMPLETED and urb.completed_ns < second.completed_ns
    assert host.bridge.read_sram(0x3FFFF, 2) == b"\x01\x02"


def test_the_8051_serves_ep0_after_the_0xf2_dma_it_is_running(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    timing = host.bridge.timing
    host.arm(0, 16, 512)
    start = host.bridge.kernel.now_ns
    urb = host.front.submit(bulk(b"\x01" * 0x40000))
    read = host.front.submit(Urb(0, 8, 10**9, setup=(0xC0, 0xE4, 0xA800, 0)))  # a fence read during the DMA
    host.front.wait(read)
    dma_end = start + timing.usb_latency_ns + timing.bulk_out_ns(0x40000)
    assert urb.completed_ns == dma_end
    assert read.completed_ns == dma_end + timing.control_ns(), "EP0 waits for the DMA, then takes its service time"


def test_ep0_runs_between_the_packets_of_an_0xf0_stream(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.program_bridges()
    host.assign_bars()
    host.tlp(0x40, 0xE000_0000, 2, mode=1)  # stream write of 2 dwords into BAR5
    stream = host.front.submit(bulk(b"\x00" * 8))
    start = host.bridge.kernel.now_ns
    read = host.front.submit(Urb(0, 1, 10**9, setup=(0xC0, 0xE4, 0xB450, 0)))
    host.front.wait(read)
    assert read.completed_ns - start == host.bridge.timing.control_round_trip_ns()
    host.front.wait(stream)
    assert stream.completed_ns > read.completed_ns


def test_the_payload_is_read_when_the_transfer_completes(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.arm(0, 1, 1)
    staging = bytearray(b"\xaa" * 512)
    urb = host.front.submit(bulk(staging))
    staging[:] = b"\xbb" * 512  # reused before the transfer completed
    host.front.wait(urb)
    assert host.bridge.read_sram(0, 512) == b"\xbb" * 512


def test_a_bulk_submitted_before_its_arm_waits_and_pairs(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    urb = host.front.submit(bulk(b"\x05" * 512))
    host.arm(3, 1, 1)
    host.front.wait(urb)
    assert urb.status is UsbStatus.COMPLETED and host.bridge.read_sram(3 * 0x4000, 512) == b"\x05" * 512


def test_cancel_ends_a_waiting_transfer(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    urb = host.front.submit(bulk(b"\x05" * 512))
    assert host.front.cancel(urb) and urb.status is UsbStatus.CANCELLED
    assert not host.front.cancel(urb)


def test_a_stalled_bulk_halts_its_endpoint_until_clear_feature(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(faults=FaultPlan.single(Operation.bulk_out(), 2, Fault.stall()))
    for attempt in range(1, 4):
        host.arm(0, 1, 1)
        if attempt == 1:
            host.bulk_out(b"\x01" * 512)
            continue
        with pytest.raises(UsbStall, match="fault plan" if attempt == 2 else "halted"):
            host.bulk_out(b"\x01" * 512)
    host.front.transfer(Urb(0, 0, 10**9, setup=(0x02, 0x01, 0, 0x02), payload=memoryview(b"")))
    host.arm(0, 1, 1)
    host.bulk_out(b"\x04" * 512)
    assert host.bridge.read_sram(0, 512) == b"\x04" * 512


def test_a_partial_timeout_moves_its_bytes_and_leaves_the_rest_armed(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(faults=FaultPlan.single(Operation.bulk_out(), 1, Fault.timeout(partial_bytes=1024)))
    host.arm(0, 1, 4)
    data = bytes(range(256)) * 8
    with pytest.raises(UsbTimeout) as info:
        host.bulk_out(data, timeout_ns=2_000_000)
    assert info.value.partial == data[:1024]
    assert host.bridge.read_sram(0, 2048) == data[:1024] + bytes(1024)
    host.bulk_out(data[1024:])  # the remaining 1024 bytes pair with what is left of the arm
    assert host.bridge.read_sram(0, 2048) == data


def test_a_short_write_completes_with_fewer_bytes(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(faults=FaultPlan.single(Operation.bulk_out(), 1, Fault.short_write(512)))
    host.arm(0, 1, 2)
    urb = host.bulk_out(b"\x06" * 1024)
    assert urb.status is UsbStatus.COMPLETED and urb.actual_length == 512


def test_device_gone_fails_everything_after(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(faults=FaultPlan.single(Operation.control_in(0xE4), 2, Fault.no_device()))
    host.inp(0xE4, 1, 0)
    for call in (lambda: host.inp(0xE4, 1, 0), lambda: host.out(0xF3, 1), lambda: host.bulk_out(b"\x00" * 4)):
        with pytest.raises(UsbNoDevice):
            call()
    assert not host.bridge.link.powered


def test_a_control_out_timeout_never_reaches_the_firmware(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(faults=FaultPlan.single(Operation.control_out(0xF3), 1, Fault.timeout()))
    with pytest.raises(UsbTimeout, match="fault plan"):
        host.out(0xF3, 1, timeout_ns=1_000_000)
    assert not host.bridge.link.powered
    host.out(0xF3, 1)
    assert host.bridge.link.powered


def test_a_control_in_partial_timeout_returns_the_first_bytes(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(faults=FaultPlan.single(Operation.control_in(0xE4), 1, Fault.timeout(partial_bytes=2)))
    host.out(0xE5, 0x10, 0x42)
    with pytest.raises(UsbTimeout) as info:
        host.inp(0xE4, 8, 0x10, timeout_ns=1_000_000)
    assert info.value.partial == b"\x42\x00"


def test_a_babbling_in_transfer_moves_the_bytes_asked_for_and_ends_babble(make_host) -> None:  # type: ignore[no-untyped-def]
    plan = FaultPlan((FaultRule(Operation.control_in(0xE4), 1, Fault.babble()),
                      FaultRule(Operation.bulk_in(), 1, Fault.babble())))  # fmt: skip
    host = make_host(faults=plan)
    host.out(0xE5, 0x10, 0x42)
    with pytest.raises(UsbBabble, match="sent more than 0x8 bytes"):
        host.inp(0xE4, 8, 0x10)
    host.bridge.write_sram(0, b"\x07" * 1024)
    host.arm(0, 1, 2, device_to_host=True)
    host.bridge.engine.released = True
    urb = host.front.complete(Urb(0x81, 1024, 10**9))
    assert urb.status is UsbStatus.BABBLE and urb.actual_length == 1024 and urb.data == b"\x07" * 1024
    assert isinstance(urb.error(), UsbBabble) and not host.front.halted
    assert host.inp(0xE4, 8, 0x10) == b"\x42" + bytes(7)  # the second read has no fault


def test_unsupported_standard_requests_stall(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    for setup in ((0x00, 0x09, 2, 0), (0x02, 0x01, 0, 0x05), (0x00, 0x05, 7, 0), (0x21, 0x09, 0, 0)):
        with pytest.raises(UsbStall):
            host.front.transfer(Urb(0, 0, 10**9, setup=setup, payload=memoryview(b"")))
    status = host.front.transfer(Urb(0, 2, 10**9, setup=(0x82, 0x00, 0, 0x02))).data
    assert status == b"\x00\x00"


def test_device_gone_ends_every_transfer_in_flight_with_no_device(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(faults=FaultPlan.single(Operation.control_in(0xE4), 1, Fault.no_device()))
    host.arm(0, 16, 512)
    moving = host.front.submit(bulk(b"\x01" * 0x40000))
    waiting = host.front.submit(Urb(0x81, 512, 10**9))
    with pytest.raises(UsbNoDevice, match="fault plan"):
        host.inp(0xE4, 1, 0)
    assert moving.status is waiting.status is UsbStatus.NO_DEVICE
    assert host.bridge.read_sram(0, 4) == bytes(4), "the bulk was cut off at its first instant: nothing moved"


def test_the_synchronous_fast_path_and_the_queued_path_agree(make_host) -> None:  # type: ignore[no-untyped-def]
    def run(inline: bool) -> tuple[str, int, list[int]]:
        host = make_host()
        completed: list[int] = []

        def go(urb: Urb) -> None:
            if inline:
                host.front.transfer(urb)
            else:
                host.front.wait(host.front.submit(urb))
            completed.append(urb.completed_ns)

        for seq in range(6):
            go(Urb(0, 0, 10**9, setup=(0x40, 0xF2, 512, (seq & 1) * 16 | 16 << 8), payload=memoryview(b"")))
            go(bulk(bytes([seq]) * 0x40000))
            go(Urb(0, 8, 10**9, setup=(0xC0, 0xE4, 0x8000, 0)))
        return host.bridge.state_digest(), host.bridge.kernel.now_ns, completed

    assert run(inline=True) == run(inline=False)


def test_a_power_cycle_during_a_synchronous_transfer_ends_it(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.bridge.kernel.schedule(1_000, host.bridge.reset)
    with pytest.raises(UsbNoDevice, match="power-cycled"):
        host.out(0xF3, 1)
    assert not host.bridge.link.powered


def test_a_dropped_bulk_out_completes_on_the_wire_and_lands_nothing(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(faults=FaultPlan.single(Operation.bulk_out(), 2, Fault.drop()))
    for fill in (b"\x01", b"\x02", b"\x03"):
        host.arm(0, 1, 1)
        urb = host.bulk_out(fill * 512)
        assert urb.status is UsbStatus.COMPLETED and urb.actual_length == 512
        if fill == b"\x02":
            assert host.bridge.read_sram(0, 512) == b"\x01" * 512, "the second transfer's bytes never landed"
    assert host.bridge.read_sram(0, 512) == b"\x03" * 512


# --- no transfer outlives the call that raised (issue 14 item 3) ---
def test_the_state_digest_counts_the_transfers_in_flight(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    before = host.bridge.state_digest()
    urb = host.front.submit(bulk(b"\x05" * 512))  # no arm: it waits on its endpoint, to take the next arm
    assert host.bridge.state_digest() != before, "a transfer left in flight is device state"
    host.front.cancel(urb)
    assert host.bridge.state_digest() == before


def test_a_wait_beyond_the_cap_abandons_its_transfer_so_the_next_bulk_takes_the_next_arm(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    before = host.bridge.state_digest()
    stale = bulk(b"\x11" * 512, timeout_ns=WAIT_CAP_NS + SECOND_NS)  # the usb1 stack refuses this; the front copes
    with pytest.raises(VirtualTimeout):
        host.front.transfer(stale)
    assert stale.status is UsbStatus.CANCELLED and "abandoned" in stale.message
    assert host.bridge.state_digest() == before
    host.arm(0, 1, 1)
    assert host.bulk_out(b"\x22" * 512).status is UsbStatus.COMPLETED
    assert host.bridge.read_sram(0, 512) == b"\x22" * 512


@pytest.mark.parametrize("during", ["submission", "dma"])
def test_an_event_that_raises_during_a_synchronous_bulk_abandons_it_and_keeps_the_arm(make_host, during: str) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.arm(0, 1, 1)
    before = host.bridge.state_digest()

    def failing_model_event() -> None:
        raise RuntimeError("a model event failed")

    latency_ns = host.bridge.timing.usb_latency_ns
    host.bridge.kernel.schedule(1 if during == "submission" else latency_ns + 1, failing_model_event)
    urb = bulk(b"\x11" * 512)
    with pytest.raises(RuntimeError, match="a model event failed"):
        host.front.transfer(urb)
    assert urb.status is UsbStatus.CANCELLED
    assert host.bridge.state_digest() == before, "the arm is still there and nothing is in flight"
    assert host.bridge.engine.inflight == 0
    assert host.bulk_out(b"\x22" * 512).status is UsbStatus.COMPLETED
    assert host.bridge.read_sram(0, 512) == b"\x22" * 512


def test_the_front_is_composed_of_the_parts_it_owns() -> None:
    """UsbFront has no mixin bases: it owns an ep0, a bulk and an inline part, each bound to it for the board's life
    (a power cycle resets the front's state, not its parts), and no module of the bridge declares another class's
    methods under TYPE_CHECKING."""
    bridge = Asm2464()
    front = bridge.front
    assert UsbFront.__bases__ == (object,)
    parts = {"ep0": ControlEndpoint, "bulk": BulkEndpoints, "inline": InlinePath}
    before = {name: getattr(front, name) for name in parts}
    bridge.reset()
    for name, kind in parts.items():
        part = getattr(front, name)
        assert type(part) is kind and part is before[name] and part.front is front
    for module in Path(asm2464.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                stubs = [n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef)]
                assert not stubs, f"{module.name} declares {stubs} under TYPE_CHECKING"
