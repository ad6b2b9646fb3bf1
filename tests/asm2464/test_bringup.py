"""PCIe bring-up against the scripted bridge: bus numbering from the root down, BAR sizing, resizable BAR, address
assignment, windows, COMMAND registers, the vendor id read, and only configuration TLPs on the wire."""

from __future__ import annotations

import itertools
import struct
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyhil.asm2464 import Asm2464Controller, PcieBar, PcieError, PcieTopology, PcieWindow, pcie_bringup
from tinyhil.errors import DeviceError, DeviceTimeout, InvalidArgument
from tinyhil.spec.asm2464 import CplStatus
from tinyhil.usb import Usb3Transport

MB = 1 << 20
GB = 1 << 30


def _reg(function: Any, offset: int) -> int:
    return int(struct.unpack_from("<I", function.space, offset)[0])


def test_bring_up_programs_the_tree_and_reads_amds_vendor_id(controller: Asm2464Controller, bridge: Any) -> None:
    topology = pcie_bringup(controller)
    assert (topology.vendor_id, topology.device_id, (topology.bus, topology.dev, topology.fn)) == (
        0x1002,
        0x744C,
        (4, 0, 0),
    )
    assert topology.rebar_size == 1 * GB, "BAR0 resized to the largest size the capability offers (codes 8-10)"
    assert topology.bars == (
        PcieBar(0, 0x1_0000_0000, 1 * GB, is_64bit=True, prefetchable=True),
        PcieBar(2, 0x1020_0000, 8 * 1024, is_64bit=True, prefetchable=False),
        PcieBar(5, 0x1000_0000, 2 * MB, is_64bit=False, prefetchable=False),
    )
    memory, prefetchable = PcieWindow(0x1000_0000, 0x102F_FFFF), PcieWindow(0x1_0000_0000, 0x1_3FFF_FFFF)
    for bus, programmed in enumerate(topology.bridges):
        assert (programmed.bus, programmed.secondary, programmed.subordinate) == (bus, bus + 1, 4)
        assert (programmed.memory, programmed.prefetchable) == (memory, prefetchable)
        regs = bridge.functions[(bus, 0, 0)]
        assert regs.space[0x18:0x1B] == bytes([bus, bus + 1, 4])
        assert _reg(regs, 0x20) == 0x1020_1000 and _reg(regs, 0x24) & 0xFFF0_FFF0 == 0x3FF0_0000
        assert (_reg(regs, 0x28), _reg(regs, 0x2C)) == (1, 1)
        assert _reg(regs, 0x04) & 0xFFFF == 0x7, "bridge COMMAND = IO | MEM | MASTER"
    gpu = bridge.functions[(4, 0, 0)]
    assert _reg(gpu, 0x04) & 0xFFFF == 0x6, "GPU COMMAND = MEM | MASTER"
    assert (_reg(gpu, 0x10), _reg(gpu, 0x14)) == (0x0000_000C, 0x1), "BAR0 holds 4 GB with its 64-bit prefetch bits"
    assert (_reg(gpu, 0x18), _reg(gpu, 0x1C), _reg(gpu, 0x24)) == (0x1020_0004, 0, 0x1000_0000)
    assert _reg(gpu, 0x20) == 0x1, "the I/O BAR is left alone"
    assert _reg(gpu, 0x108) >> 8 & 0x3F == 10
    assert topology.bar(5).end == 0x1020_0000 and set(topology.bar_map) == {0, 2, 5}


def test_bring_up_uses_only_power_link_and_config_requests(controller: Asm2464Controller, handle: Any) -> None:
    pcie_bringup(controller)
    kinds = {(r[0], r[1]) for r in handle.requests()}
    assert kinds == {(0x40, 0xF3), (0xC0, 0xE4), (0x40, 0xF0), (0xC0, 0xF0)}
    assert {r[2] for r in handle.requests() if r[1] == 0xE4} == {0xB450}
    assert {r[2] & 0xFF for r in handle.requests() if r[:2] == (0x40, 0xF0)} == {0x04, 0x05, 0x44, 0x45}
    assert all(r[3] == 0 for r in handle.requests() if r[1] == 0xF0), "single TLPs only"
    assert not [c for c in handle.calls if c.kind.startswith("bulk")]


def test_bus_numbers_are_programmed_from_the_root_down(controller: Asm2464Controller, bridge: Any) -> None:
    pcie_bringup(controller)
    writes = [(address >> 24, address & 0xFFC, word) for fmt, _, address, word in bridge.tlps if fmt & 0x40]
    bus_writes = [(bus, word) for bus, reg, word in writes if bus < 4 and reg == 0x18]
    assert bus_writes == [(b, b | (b + 1) << 8 | 4 << 16) for b in range(4)]


def test_without_a_resizable_bar_capability_bar0_keeps_its_size(bridge_fake: ModuleType, usb_fake: ModuleType) -> None:
    bridge = bridge_fake.FakeBridge(functions=bridge_fake.default_topology(rebar=False))
    handle = usb_fake.ScriptedHandle(bridge)
    topology = pcie_bringup(Asm2464Controller(Usb3Transport(handle, usb_fake.ScriptedContext(handle))))
    assert topology.rebar_size is None and topology.bar(0).size == 256 * MB


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    bar0_code=st.integers(0, 14),
    extra=st.sets(st.integers(0, 14), max_size=4),
    mem_base_mb=st.integers(16, 3000),
)
def test_any_rebar_offer_gives_aligned_disjoint_bars_inside_the_windows(
    bridge_fake: ModuleType, usb_fake: ModuleType, bar0_code: int, extra: set[int], mem_base_mb: int
) -> None:
    codes = tuple(sorted({bar0_code} | extra))
    bridge = bridge_fake.FakeBridge(functions=bridge_fake.default_topology(bar0=MB << bar0_code, rebar_codes=codes))
    handle = usb_fake.ScriptedHandle(bridge)
    controller = Asm2464Controller(Usb3Transport(handle, usb_fake.ScriptedContext(handle)))
    topology = pcie_bringup(controller, mem_base=mem_base_mb * MB)
    assert topology.rebar_size == MB << max(codes) == topology.bar(0).size
    spans = sorted((b.address, b.end) for b in topology.bars)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    for bar in topology.bars:
        window = topology.bridges[0].prefetchable if bar.is_64bit and bar.prefetchable else topology.bridges[0].memory
        assert window is not None and bar.address in window and bar.end - 1 in window
        assert bar.address % bar.size == 0


def test_a_missing_bridge_stops_bring_up_naming_the_bus(bridge_fake: ModuleType, usb_fake: ModuleType) -> None:
    functions = bridge_fake.default_topology()
    del functions[(2, 0, 0)]
    handle = usb_fake.ScriptedHandle(bridge_fake.FakeBridge(functions=functions))
    with pytest.raises(PcieError, match="CFGRD1 at 0x2000000") as raised:
        pcie_bringup(Asm2464Controller(Usb3Transport(handle, usb_fake.ScriptedContext(handle))))
    assert raised.value.cpl_status is CplStatus.UR


def test_an_endpoint_where_a_bridge_belongs_is_refused(bridge_fake: ModuleType, usb_fake: ModuleType) -> None:
    functions = bridge_fake.default_topology()
    functions[(1, 0, 0)].space[0x0E] = 0x00
    handle = usb_fake.ScriptedHandle(bridge_fake.FakeBridge(functions=functions))
    with pytest.raises(DeviceError, match=r"1:00\.0 has vendor id 0x1b21 and header type 0x00, expected a bridge"):
        pcie_bringup(Asm2464Controller(Usb3Transport(handle, usb_fake.ScriptedContext(handle))))


def test_a_foreign_gpu_is_refused_unless_accepted(bridge_fake: ModuleType, usb_fake: ModuleType) -> None:
    functions = bridge_fake.default_topology()
    functions[(4, 0, 0)].space[0:2] = b"\xde\x10"
    handle = usb_fake.ScriptedHandle(bridge_fake.FakeBridge(functions=functions))
    controller = Asm2464Controller(Usb3Transport(handle, usb_fake.ScriptedContext(handle)))
    with pytest.raises(DeviceError, match=r"GPU at 4:00\.0 has vendor id 0x10de, expected 0x1002"):
        pcie_bringup(controller)
    assert pcie_bringup(controller, expected_vendor=None).vendor_id == 0x10DE


def test_no_link_no_bring_up(controller: Asm2464Controller, bridge: Any) -> None:
    bridge.link_polls_until_up = 10_000
    with pytest.raises(DeviceTimeout, match="PCIe link not up"):
        pcie_bringup(controller, link_timeout_s=0.02)
    assert not bridge.tlps


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gpu_bus": 0}, "gpu_bus=0"),
        ({"mem_base": 0x1000_0001}, "mem_base=0x10000001, expected a multiple of 0x100000 (1 MB)"),
        ({"mem_base": 1 << 32}, "mem_base=4294967296"),
        ({"pref_base": 0}, "pref_base=0"),
    ],
)
def test_bad_bring_up_arguments(
    controller: Asm2464Controller, handle: Any, kwargs: dict[str, int], message: str
) -> None:
    with pytest.raises(InvalidArgument) as raised:
        pcie_bringup(controller, **kwargs)  # type: ignore[arg-type]
    assert message in str(raised.value) and handle.calls == []


def test_topology_values_are_frozen_and_checked() -> None:
    bar = PcieBar(0, 0x4000_0000, GB, is_64bit=True, prefetchable=True)
    topology = PcieTopology(4, 0, 0, 0x1002, 0x744C, (bar,), (), None)
    with pytest.raises(AttributeError):
        topology.vendor_id = 0  # type: ignore[misc]
    with pytest.raises(InvalidArgument, match=r"BAR3 is not assigned, expected one of \[0\]"):
        topology.bar(3)
    with pytest.raises(InvalidArgument, match="expected a power-of-two size and an address aligned to it"):
        PcieBar(0, 0x1000, 0x3000, is_64bit=False, prefetchable=False)
    with pytest.raises(InvalidArgument, match="expected limit >= base"):
        PcieWindow(0x2000_0000, 0x1000_0000)
    assert PcieWindow(0x1000_0000, 0x100F_FFFF).size == MB and hash(topology) == hash(topology)
