"""XDATA and its windows: round trips through 0xE4/0xE5, and every window is a view of the bytes the GPU reaches."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhil.emulators.asm2464 import BridgeMemory
from tinyhil.errors import InvalidArgument

WINDOWS = [  # (xdata, pcie, length)
    (0x8000, 0x200000, 0x1000),
    (0xF000, 0x200000, 0x1000),
    (0xA000, 0x820000, 0x1000),
    (0xB000, 0x800000, 0x200),
    (0xB800, 0x822000, 0x800),
]


@settings(max_examples=40)
@given(addr=st.integers(0, 0xFFFF), value=st.integers(0, 0xFF))
def test_xdata_byte_write_reads_back(make_host, addr: int, value: int) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.out(0xE5, addr, value)
    expected = 0x00 if addr == 0xB450 else value  # LTSSM is read-only (link down)
    assert host.inp(0xE4, 1, addr) == bytes([expected])


@pytest.mark.parametrize(("xdata", "pcie", "length"), WINDOWS)
def test_each_window_and_its_pcie_address_are_the_same_bytes(make_host, xdata: int, pcie: int, length: int) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    host.power_on()
    host.program_bridges()
    host.assign_bars()
    host.out(0xE5, xdata + length - 1, 0x5A)
    assert bytes(host.bridge.dma_read(pcie + length - 4, 4)) == b"\x00\x00\x00\x5a"
    assert host.bridge.function.writes_seen[-1] == (pcie + length - 1, 1), "the GPU is told the host wrote there"
    host.bridge.dma_write(pcie, b"\x11\x22")
    assert host.inp(0xE4, 2, xdata) == b"\x11\x22"


def test_sram_window_reads_through_to_sram_and_a_read_may_straddle_regions() -> None:
    memory = BridgeMemory()
    memory.sram[0xFF0:0x1000] = 7
    memory.xdata[0x9000:0x9010] = 9
    assert memory.xdata_read(0x8FF0, 0x20) == bytes([7] * 16 + [9] * 16)
    memory.xdata_write(0xFFF8, b"\x01" * 8)
    assert memory.sram[0xFF8:0x1000].tolist() == [1] * 8


def test_pcie_ranges_must_lie_inside_one_region() -> None:
    memory = BridgeMemory()
    assert memory.pcie_view(0x27FFFC, 4) is not None
    assert memory.pcie_view(0x27FFFC, 8) is None, "past the end of SRAM"
    assert memory.pcie_view(0x820FFC, 8) is None, "past the end of sys_buf"
    assert memory.pcie_view(0x100000, 4) is None
    assert BridgeMemory.xdata_to_pcie(0x7000) is None and BridgeMemory.xdata_to_pcie(0xB7FF) is None


def test_bad_xdata_range() -> None:
    with pytest.raises(InvalidArgument, match="past the end"):
        BridgeMemory().xdata_read(0xFFFF, 2)
