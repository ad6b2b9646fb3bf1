"""PCIe bring-up against the emulated bridge: bus numbering from the root down, BAR sizing, resizable BAR, address
assignment, windows, COMMAND registers, the vendor id read, and only configuration TLPs on the wire (recorded by
``support.wire``). Endpoints of other shapes are emulated endpoints with their own BARs; of the topologies the
emulator cannot have, a missing bridge is a fault plan (its config read completes with UR) and an endpoint where a
bridge belongs is one patched completion on the scripted handle."""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.scripted_usb import Call, ScriptedContext, ScriptedHandle
from support.wire import WireRecorder, recorded_board

from tinyhil.asm2464 import Asm2464Controller, PcieBar, PcieError, PcieTopology, PcieWindow, pcie_bringup
from tinyhil.emulators.asm2464 import Asm2464, Quirks
from tinyhil.emulators.faults import Fault, FaultPlan, Operation
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.emulators.pcie.endpoint import PLAIN_DEVICE_ID
from tinyhil.emulators.pcie.topology import BRIDGE_VENDOR_ID
from tinyhil.emulators.pcie.type0 import BarSpec, Type0Config
from tinyhil.errors import DeviceError, DeviceTimeout, InvalidArgument
from tinyhil.mocks.usb.context import EmulatedUsbContext
from tinyhil.spec.asm2464 import CplStatus, FmtType
from tinyhil.spec.pci import CLASS_DISPLAY_VGA, VENDOR_ID_AMD
from tinyhil.usb import Usb3Transport
from tinyhil.usb.backend import open_bridge_handle

MB = 1 << 20
GB = 1 << 30
OUT = 0x40


class ShapedEndpoint(PlainEndpoint):
    """A plain endpoint with another vendor or other BARs (its config space is the documented ``_config``)."""

    def __init__(self, *, vendor_id: int = VENDOR_ID_AMD, bars: dict[int, BarSpec] | None = None) -> None:
        super().__init__(vram_bytes=MB)
        if bars is None:
            bars = {0: BarSpec(256 * MB, is_64bit=True, prefetchable=True), 5: BarSpec(2 * MB)}
        self._config = Type0Config(
            vendor_id=vendor_id, device_id=PLAIN_DEVICE_ID, class_code=CLASS_DISPLAY_VGA, bars=bars
        )
        self.reset()


def _config_writes(wire: WireRecorder | ScriptedHandle) -> list[tuple[int, int, int]]:
    """``(bus, reg, value)`` of every config write TLP on the wire (recorded or scripted)."""
    writes = []
    for _, request, value, _, raw in wire.requests(("control_out",)):
        if request == 0xF0 and value & 0xFF in (FmtType.CFGWR0, FmtType.CFGWR1):
            lo, _, word = struct.unpack("<III", raw)
            writes.append((lo >> 24, lo & 0xFFC, word))
    return writes


def test_bring_up_programs_the_tree_and_reads_amds_vendor_id() -> None:
    with recorded_board(Asm2464(function=PlainEndpoint(vram_bytes=GB))) as board:
        topology = pcie_bringup(board.controller())
        bridge = board.bridge
    assert (topology.vendor_id, topology.device_id, (topology.bus, topology.dev, topology.fn)) == (
        VENDOR_ID_AMD,
        PLAIN_DEVICE_ID,
        (4, 0, 0),
    )
    assert topology.rebar_size == 1 * GB, "BAR0 resized to the largest size the capability offers (VRAM's)"
    assert topology.bars == (
        PcieBar(0, 0x1_0000_0000, 1 * GB, is_64bit=True, prefetchable=True),
        PcieBar(2, 0x1_4000_0000, 8 * 1024, is_64bit=True, prefetchable=True),
        PcieBar(5, 0x1000_0000, 2 * MB, is_64bit=False, prefetchable=False),
    )
    memory, prefetchable = PcieWindow(0x1000_0000, 0x101F_FFFF), PcieWindow(0x1_0000_0000, 0x1_400F_FFFF)
    for bus, programmed in enumerate(topology.bridges):
        assert (programmed.bus, programmed.secondary, programmed.subordinate) == (bus, bus + 1, 4)
        assert (programmed.memory, programmed.prefetchable) == (memory, prefetchable)
        regs = bridge.topology.bridges[bus]
        assert regs.config_read(0x18) & 0xFF_FFFF == bus | (bus + 1) << 8 | 4 << 16
        assert regs.config_read(0x20) == 0x1010_1000 and regs.config_read(0x24) & 0xFFF0_FFF0 == 0x4000_0000
        assert (regs.config_read(0x28), regs.config_read(0x2C)) == (1, 1)
        assert regs.config_read(0x04) & 0xFFFF == 0x7, "bridge COMMAND = IO | MEM | MASTER"
    gpu = bridge.function
    assert gpu.config_read(0x04) & 0xFFFF == 0x6, "GPU COMMAND = MEM | MASTER"
    assert (gpu.config_read(0x10) & ~0xF, gpu.config_read(0x14)) == (0, 0x1), "BAR0 at 4 GB"
    assert (gpu.config_read(0x18) & ~0xF, gpu.config_read(0x1C), gpu.config_read(0x24)) == (0x4000_0000, 1, 0x1000_0000)
    assert topology.bar(5).end == 0x1020_0000 and set(topology.bar_map) == {0, 2, 5}


def test_bring_up_uses_only_power_link_and_config_requests(wire: WireRecorder, controller: Asm2464Controller) -> None:
    pcie_bringup(controller)
    kinds = {r[:2] for r in wire.requests()}
    assert kinds == {(0x40, 0xF3), (0xC0, 0xE4), (0x40, 0xF0), (0xC0, 0xF0)}
    assert {r[2] for r in wire.requests() if r[1] == 0xE4} == {0xB450}
    assert {r[2] & 0xFF for r in wire.requests() if r[:2] == (0x40, 0xF0)} == {0x04, 0x05, 0x44, 0x45}
    assert all(r[3] == 0 for r in wire.requests() if r[1] == 0xF0), "single TLPs only"
    assert not [t for t in wire.transfers if t.kind.startswith("bulk")]


def test_bus_numbers_are_programmed_from_the_root_down(wire: WireRecorder, controller: Asm2464Controller) -> None:
    pcie_bringup(controller)
    bus_writes = [(bus, word) for bus, reg, word in _config_writes(wire) if bus < 4 and reg == 0x18]
    assert bus_writes == [(b, b | (b + 1) << 8 | 4 << 16) for b in range(4)]


def test_without_a_resizable_bar_capability_bar0_keeps_its_size() -> None:
    with recorded_board(Asm2464(function=ShapedEndpoint())) as board:
        topology = pcie_bringup(board.controller())
    assert topology.rebar_size is None and topology.bar(0).size == 256 * MB


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    bar0_code=st.integers(0, 14),
    extra=st.sets(st.integers(0, 14), max_size=4),
    mem_base_mb=st.integers(16, 3000),
)
def test_any_rebar_offer_gives_aligned_disjoint_bars_inside_the_windows(
    bar0_code: int, extra: set[int], mem_base_mb: int
) -> None:
    codes = tuple(sorted({bar0_code} | extra))
    bar0 = BarSpec(MB << bar0_code, is_64bit=True, prefetchable=True, resizable_sizes=tuple(MB << c for c in codes))
    bars = {0: bar0, 2: BarSpec(8 * 1024, is_64bit=True), 5: BarSpec(2 * MB)}
    with recorded_board(Asm2464(function=ShapedEndpoint(bars=bars))) as board:
        topology = pcie_bringup(board.controller(), mem_base=mem_base_mb * MB)
    assert topology.rebar_size == MB << max(codes) == topology.bar(0).size
    spans = sorted((b.address, b.end) for b in topology.bars)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    for bar in topology.bars:
        window = topology.bridges[0].prefetchable if bar.is_64bit and bar.prefetchable else topology.bridges[0].memory
        assert window is not None and bar.address in window and bar.end - 1 in window
        assert bar.address % bar.size == 0


def test_a_missing_bridge_stops_bring_up_naming_the_bus() -> None:
    """The emulator always has bridges on buses 0-3: the first config read of bus 2 completing with UR is what a
    missing bridge looks like, so a probe bring-up finds which TLP that is (bring-up sends only config requests, all
    non-posted, so every 0xF0 OUT counts)."""
    with recorded_board() as probe:
        pcie_bringup(probe.controller())
        tlps = [r for r in probe.wire.requests(("control_out",)) if r[1] == 0xF0]
    occurrence = next(n for n, r in enumerate(tlps, 1) if struct.unpack_from("<I", r[4])[0] >> 24 == 2)
    plan = FaultPlan.single(Operation.tlp(), occurrence, Fault.cpl_status(CplStatus.UR))
    with recorded_board(Asm2464(faults=plan)) as board, pytest.raises(PcieError, match="CFGRD1 at 0x2000000") as raised:
        pcie_bringup(board.controller())
    assert raised.value.cpl_status is CplStatus.UR


def _patched_board(patch: Callable[[Call | None, bytes], bytes]) -> tuple[Asm2464Controller, ScriptedHandle]:
    """A scripted handle forwarding every control transfer to an emulated bridge, passing each control IN's reply
    through ``patch(the TLP before it, reply)``: for answers the emulator cannot give."""
    handle, _ = open_bridge_handle(context=EmulatedUsbContext(Asm2464()))
    handle.claimInterface(0)
    last: list[Call] = []

    def respond(call: Call) -> object:
        if call.kind == "control_out":
            handle.controlWrite(call.request_type, call.request, call.value, call.index, call.data, call.timeout)
            if call.request == 0xF0:
                last[:] = [call]
            return None
        reply = handle.controlRead(call.request_type, call.request, call.value, call.index, call.length, call.timeout)
        return patch(last[0] if last and call.request == 0xF0 else None, bytes(reply))

    scripted = ScriptedHandle(respond)
    return Asm2464Controller(Usb3Transport(scripted, ScriptedContext(scripted))), scripted


def _reads(tlp: Call | None, bus: int, reg: int) -> bool:
    """``tlp`` is a config read of ``bus:00.0`` register ``reg``."""
    if tlp is None or tlp.data is None or (tlp.value or 0) & 0xFF not in (FmtType.CFGRD0, FmtType.CFGRD1):
        return False
    address = struct.unpack_from("<I", tlp.data)[0]
    return address >> 24 == bus and address & 0xFFC == reg


def test_an_endpoint_where_a_bridge_belongs_is_refused() -> None:
    """Scripted: the emulated topology's buses 0-3 are always bridges; bus 1's header type read is patched to 0x00."""

    def endpoint_on_bus_1(tlp: Call | None, reply: bytes) -> bytes:
        return reply[:2] + b"\x00" + reply[3:] if _reads(tlp, 1, 0x0C) else reply

    with pytest.raises(
        DeviceError, match=rf"1:00\.0 has vendor id {BRIDGE_VENDOR_ID:#x} and header type 0x00, expected a bridge"
    ):
        pcie_bringup(_patched_board(endpoint_on_bus_1)[0])


def test_an_io_bar_gets_its_old_value_back_and_no_address() -> None:
    """Scripted: emulated endpoints have memory BARs only; the GPU's BAR4 reads are patched to a 256-byte I/O BAR."""
    io_bar = 0xFFFF_FF01

    def io_bar4(tlp: Call | None, reply: bytes) -> bytes:
        return io_bar.to_bytes(4, "little") + reply[4:] if _reads(tlp, 4, 0x20) else reply

    controller, handle = _patched_board(io_bar4)
    topology = pcie_bringup(controller)
    writes = [word for bus, reg, word in _config_writes(handle) if (bus, reg) == (4, 0x20)]
    assert writes and writes == [0xFFFF_FFFF, io_bar] * (len(writes) // 2), "each sizing probe is undone, nothing else"
    assert set(topology.bar_map) == {0, 2, 5}, "the I/O BAR is left alone"


def test_a_foreign_gpu_is_refused_unless_accepted() -> None:
    with recorded_board(Asm2464(function=ShapedEndpoint(vendor_id=0x10DE))) as board:
        controller = board.controller()
        with pytest.raises(DeviceError, match=r"GPU at 4:00\.0 has vendor id 0x10de, expected 0x1002"):
            pcie_bringup(controller)
        assert pcie_bringup(controller, expected_vendor=None).vendor_id == 0x10DE


def test_no_link_no_bring_up() -> None:
    with recorded_board(Asm2464(quirks=Quirks(link_up_delay_ns=10_000_000_000))) as board:
        with pytest.raises(DeviceTimeout, match="PCIe link not up"):
            pcie_bringup(board.controller(), link_timeout_s=0.02)
        assert not [r for r in board.wire.requests() if r[1] == 0xF0], "no TLP before the link is up"


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
    controller: Asm2464Controller, wire: WireRecorder, kwargs: dict[str, int], message: str
) -> None:
    with pytest.raises(InvalidArgument) as raised:
        pcie_bringup(controller, **kwargs)  # type: ignore[arg-type]
    assert message in str(raised.value) and wire.transfers == []


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
