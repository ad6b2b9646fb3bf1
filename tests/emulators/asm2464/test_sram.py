"""The 0xF2 engine: slot windows, bounds-checked arms, pairing, landing (delay, notification), quirk 1, copyout."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhil.emulators.asm2464 import Direction, Quirks, Urb, UsbStall, UsbTimeout
from tinyhil.emulators.pcie import PlainEndpoint

SLOT = 0x4000
WINDOW = 0x40000


def pattern(nbytes: int, seed: int = 1) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8).tobytes()


def test_slot_writes_read_back_through_the_8000_window_and_at_pcie_addresses(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.bring_up()
    data = pattern(3 * SLOT)
    host.arm(0, 3, len(data) // 512)
    host.bulk_out(data)
    assert host.xdata(0x8000, 0x1000) == data[:0x1000], "XDATA 0x8000 is SRAM bytes 0-0xFFF"
    assert host.xdata(0xF000, 0x1000) == data[:0x1000], "XDATA 0xF000 is slot 0 as the engine addresses it"
    assert bytes(host.bridge.dma_read(0x200000, len(data))) == data
    other = pattern(SLOT, seed=2)
    host.arm(20, 1, SLOT // 512)
    host.bulk_out(other)
    assert bytes(host.bridge.dma_read(0x200000 + 20 * SLOT, SLOT)) == other
    assert host.bridge.read_sram(0, len(data)) == data, "other slots untouched"


@pytest.mark.parametrize("window", [0, 1])
@pytest.mark.parametrize("corrupt", [False, True])
def test_full_window_corruption_switch(make_host, window: int, corrupt: bool) -> None:  # type: ignore[no-untyped-def]
    host = make_host(quirks=Quirks(full_window_corruption=corrupt))
    data = pattern(WINDOW, seed=window)
    host.arm(16 * window, 16, WINDOW // 512)
    host.bulk_out(data)
    landed = host.bridge.read_sram(window * WINDOW, WINDOW)
    assert landed[:-512] == data[:-512]
    if corrupt:
        assert landed[-512:] != data[-512:], "the last sector of a full-window transfer lands corrupted"
        assert landed[-512:] == bytes(b ^ 0xFF for b in data[-512:])
    else:
        assert landed == data


def test_full_window_corruption_spares_transfers_that_do_not_fill_their_window(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(quirks=Quirks(full_window_corruption=True))
    data = pattern(15 * SLOT + 512)  # the sentinel-sector revision's wire image ends mid-window
    host.arm(0, 16, len(data) // 512)
    host.bulk_out(data)
    assert host.bridge.read_sram(0, len(data)) == data


@settings(max_examples=60)
@given(start=st.integers(0, 40), count=st.integers(0, 40), sectors=st.integers(0, 0x7FFF), to_host=st.booleans())
def test_arms_are_bounds_checked_and_a_rejected_arm_changes_nothing(  # type: ignore[no-untyped-def]
    make_host, start: int, count: int, sectors: int, to_host: bool
) -> None:
    host = make_host()
    before = host.bridge.state_digest()
    slots = count or 1
    valid = start + slots <= 32 and 1 <= sectors <= slots * 32 and start <= 0xFF
    index = (start & 0xFF) | count << 8
    if not valid:
        with pytest.raises(UsbStall, match="0xF2 arm"):
            host.out(0xF2, sectors | (0x8000 if to_host else 0), index)
        assert host.bridge.state_digest() == before
        return
    host.out(0xF2, sectors | (0x8000 if to_host else 0), index)
    arm = host.bridge.engine.arms[Direction.IN if to_host else Direction.OUT]
    assert arm is not None and (arm.sram_offset, arm.nbytes) == (start * SLOT, sectors * 512)


def test_unpaired_and_missized_bulks_time_out_in_virtual_time_and_keep_the_arm(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    start = host.bridge.kernel.now_ns
    with pytest.raises(UsbTimeout, match="no armed operation") as info:
        host.bulk_out(b"\x01" * 512, timeout_ns=5_000_000)
    assert info.value.partial == b"" and host.bridge.kernel.now_ns - start == 5_000_000
    host.arm(0, 1, 2)
    with pytest.raises(UsbTimeout, match="expects exactly 1024 bytes, got 512"):
        host.bulk_out(b"\x01" * 512, timeout_ns=5_000_000)
    host.bulk_out(b"\x02" * 1024)
    assert host.bridge.read_sram(0, 1024) == b"\x02" * 1024
    with pytest.raises(UsbTimeout, match="no armed operation"):
        host.bulk_out(b"\x03" * 1024, timeout_ns=1_000_000)
    assert host.bridge.read_sram(0, 1024) == b"\x02" * 1024, "one arm pairs one bulk"


def test_a_new_arm_replaces_the_unconsumed_one(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.arm(0, 1, 1)
    host.arm(5, 1, 2)
    host.bulk_out(b"\x07" * 1024)
    assert host.bridge.read_sram(5 * SLOT, 1024) == b"\x07" * 1024 and host.bridge.read_sram(0, 1) == b"\x00"


@pytest.mark.parametrize(
    ("request_type", "b_request", "value", "index"),
    [(0x02, 0x01, 0, 0x02), (0x00, 0x09, 1, 0), (0x01, 0x0B, 0, 0)],
    ids=["CLEAR_FEATURE(HALT)", "SET_CONFIGURATION", "SET_INTERFACE"],
)
def test_standard_requests_reset_the_engine(
    make_host, request_type: int, b_request: int, value: int, index: int
) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.arm(0, 1, 1)
    host.front.transfer(Urb(0, 0, 10**9, setup=(request_type, b_request, value, index), payload=memoryview(b"")))
    with pytest.raises(UsbTimeout, match="no armed operation"):
        host.bulk_out(b"\x01" * 512, timeout_ns=1_000_000)


def test_landing_is_an_event_after_the_landing_delay_and_wakes_the_endpoint(make_host) -> None:  # type: ignore[no-untyped-def]
    endpoint = PlainEndpoint(vram_bytes=1 << 20)
    host = make_host(quirks=Quirks(landing_delay_ns=50_000), function=endpoint)
    host.arm(2, 1, 1)
    host.bulk_out(b"\x09" * 512)
    assert host.bridge.read_sram(2 * SLOT, 512) == bytes(512), "transfer complete does not mean landed"
    assert list(endpoint.writes_seen) == []
    host.bridge.kernel.run_for(50_000)
    assert host.bridge.read_sram(2 * SLOT, 512) == b"\x09" * 512
    assert list(endpoint.writes_seen) == [(0x200000 + 2 * SLOT, 512)]


def test_landing_jitter_reorders_across_transfers_deterministically(make_host) -> None:  # type: ignore[no-untyped-def]
    def landing_order(seed: int) -> list[int]:
        endpoint = PlainEndpoint(vram_bytes=1 << 20)
        host = make_host(quirks=Quirks(landing_jitter_ns=10_000_000), function=endpoint, seed=seed)
        for slot in range(8):
            host.arm(slot, 1, 1)
            host.bulk_out(bytes([slot]) * 512)
        host.bridge.kernel.run_for(20_000_000)
        return [(addr - 0x200000) // SLOT for addr, _n in endpoint.writes_seen]

    orders = [landing_order(seed) for seed in range(6)]
    assert all(sorted(order) == list(range(8)) for order in orders)
    assert any(order != list(range(8)) for order in orders), "jitter larger than the transfer time reorders"
    assert landing_order(3) == orders[3], "same seed, same order"


def test_copyout_blocks_in_virtual_time_until_the_cq_write(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.bring_up()
    host.bridge.write_sram(0, b"\x44" * 1024)
    host.bridge.dma_write(0x822000 + 12, b"\x01\x00\x00\x00")  # before the arm: does not count
    host.arm(0, 1, 2, device_to_host=True)
    kernel = host.bridge.kernel
    release_at = kernel.now_ns + 3_000_000
    kernel.schedule(3_000_000, lambda: host.bridge.dma_write(0x822000 + 12, b"\x01\x00\x00\x00"))
    assert host.bulk_in(1024) == b"\x44" * 1024
    assert kernel.now_ns >= release_at, "the bulk IN returned only after the GPU's completion-queue write"


def test_copyout_without_the_cq_write_times_out(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.arm(0, 1, 2, device_to_host=True)
    start = host.bridge.kernel.now_ns
    with pytest.raises(UsbTimeout, match="copyout not released"):
        host.bulk_in(1024, timeout_ns=7_000_000)
    assert host.bridge.kernel.now_ns - start == 7_000_000
