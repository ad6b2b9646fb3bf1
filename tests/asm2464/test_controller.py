"""Asm2464Controller at the wire level against the emulated bridge: exact request encodings of every operation,
chunking, padding without needless copies, TLP retries, named completion errors, streams, power and link. Each test
checks both the result (the bridge's state through its backdoors, or what the controller returned) and the wire
traffic (``support.wire``); errors are injected with fault plans and quirks."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest
import usb1
from support.scripted_usb import ScriptedContext, ScriptedHandle, ok
from support.wire import Recorded, Transfer, WireRecorder, recorded_board

from tinyhil.asm2464 import Asm2464Controller, PcieError, PcieTopology
from tinyhil.asm2464.controller import MIN_POLL_S
from tinyhil.asm2464.stream import MAX_MEM_ACCESS_BYTES
from tinyhil.emulators.asm2464 import Asm2464, Quirks
from tinyhil.emulators.faults import Fault, FaultPlan, FaultRule, Operation
from tinyhil.emulators.pcie.topology import BRIDGE_DEVICE_ID, BRIDGE_VENDOR_ID
from tinyhil.errors import DeviceTimeout, InvalidArgument
from tinyhil.spec.asm2464 import CPL_RELEASE_OFFSET, PCIE_CQ_WINDOW, CplStatus, FmtType, RetStatus
from tinyhil.usb import MAX_TIMEOUT_MS, Usb3Transport

OUT, IN = 0x40, 0xC0
LTSSM = 0xB450
BRIDGE_ID = BRIDGE_DEVICE_ID << 16 | BRIDGE_VENDOR_ID


def _tlp(fmt_type: int, enables: int, mode: int, lo: int, hi: int, word: int) -> tuple[Any, ...]:
    return (OUT, 0xF0, fmt_type | enables << 8, mode, struct.pack("<III", lo, hi, word))


CPL_READ = (IN, 0xF0, 0, 0, 8)


def _linked(controller: Asm2464Controller, wire: WireRecorder) -> None:
    controller.set_pcie_power(True)
    controller.wait_pcie_link()
    wire.clear()


def _release_copyout(bridge: Asm2464) -> None:
    """What the GPU does when its copy into SRAM is done: write the completion-queue entry that releases the IN."""
    bridge.dma_write(PCIE_CQ_WINDOW + CPL_RELEASE_OFFSET, b"\x01\x00\x00\x00")


def test_xdata_read_is_chunked_at_512_bytes(controller: Asm2464Controller, wire: WireRecorder, bridge: Asm2464) -> None:
    bridge.write_xdata(0x8000, bytes(range(256)) * 5 + bytes(20))
    assert controller.xdata_read(0x8000, 0x514) == bridge.read_xdata(0x8000, 0x514)
    assert wire.requests() == [(IN, 0xE4, 0x8000, 0, 512), (IN, 0xE4, 0x8200, 0, 512), (IN, 0xE4, 0x8400, 0, 0x114)]
    assert b"".join(t.received or b"" for t in wire.transfers) == bridge.read_xdata(0x8000, 0x514)


def test_usb2_reads_at_most_64_bytes_a_request() -> None:
    with recorded_board(Asm2464(usb3=False)) as board:
        controller = Asm2464Controller(board.transport, usb2=True)
        assert controller.xdata_read(0xA800, 130) == board.bridge.read_xdata(0xA800, 130)
        assert [r[4] for r in board.wire.requests()] == [64, 64, 2] and controller.stream_packet_bytes == 512


def test_xdata_write_sends_one_request_per_byte(
    controller: Asm2464Controller, wire: WireRecorder, bridge: Asm2464
) -> None:
    controller.xdata_write(0xA800, b"\x01\x02\xff")
    assert wire.requests() == [
        (OUT, 0xE5, 0xA800, 1, b""),
        (OUT, 0xE5, 0xA801, 2, b""),
        (OUT, 0xE5, 0xA802, 0xFF, b""),
    ]
    assert bridge.read_xdata(0xA800, 3) == b"\x01\x02\xff"


def test_scsi_write_arms_then_sends_the_padded_image(
    controller: Asm2464Controller, wire: WireRecorder, bridge: Asm2464
) -> None:
    image = bytes(range(250)) * 4
    arm = controller.scsi_write(image, slot_start=3)
    arm_request, bulk = wire.transfers
    assert arm_request.setup == (OUT, 0xF2, 2, 3 | 1 << 8, b"")
    assert (bulk.kind, bulk.endpoint, bulk.out, bulk.error) == ("bulk_out", 0x02, image + bytes(24), None)
    assert bridge.read_sram(3 * 0x4000, 1024) == image + bytes(24)
    assert (arm.sectors, arm.slot_count, arm.wire_bytes) == (2, 1, 1024)
    assert arm_request.timeout == 1000


@pytest.mark.parametrize(
    ("nbytes", "slot_start", "value", "index"),
    [
        (0x40000 - 4, 0, 512, 0x1000),
        (0x40000 - 4, 16, 512, 0x1010),
        (0x3C000, 16, 480, 0x0F10),
        (0x80000, 0, 1024, 0x2000),
    ],
)
def test_scsi_write_window_arms(
    controller: Asm2464Controller,
    wire: WireRecorder,
    bridge: Asm2464,
    nbytes: int,
    slot_start: int,
    value: int,
    index: int,
) -> None:
    payload = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    controller.scsi_write(payload, slot_start)
    assert wire.requests()[0] == (OUT, 0xF2, value, index, b"")
    assert bridge.read_sram(slot_start * 0x4000, nbytes) == payload.tobytes()


def test_sector_aligned_images_are_sent_without_a_copy() -> None:
    seen: list[Any] = []

    class Spy(WireRecorder):
        def bulkWrite(self, endpoint: int, data: Any, timeout: int = 0) -> int:
            seen.append(data)
            return super().bulkWrite(endpoint, data, timeout)

    with recorded_board() as board:
        controller = Asm2464Controller(Usb3Transport(Spy(board.wire.handle), board.context))
        image = bytearray(4096)
        controller.scsi_write(image)
        controller.scsi_write(bytearray(100))
    assert seen[0].obj is image, "an aligned image reaches the handle as a view of the caller's buffer"
    assert seen[1].obj is not None and len(seen[1]) == 512


def test_scsi_read_arms_device_to_host_and_its_bulk_in_waits_for_the_gpu(
    controller: Asm2464Controller, wire: WireRecorder, bridge: Asm2464, topology: PcieTopology
) -> None:
    bridge.write_sram(2 * 0x4000, bytes(range(256)) * 4)
    with pytest.raises(usb1.USBErrorTimeout) as raised:
        controller.scsi_read(1000, slot_start=2, timeout=5)  # nothing released the copyout: the IN never pairs
    assert wire.requests() == [(OUT, 0xF2, 0x8002, 2 | 1 << 8, b"")]
    assert (wire.transfers[1].kind, wire.transfers[1].endpoint, wire.transfers[1].length) == ("bulk_in", 0x81, 1024)
    assert wire.transfers[1].error == type(raised.value).__name__ == "USBErrorTimeout"
    wire.clear()
    controller.scsi_read_arm(1000, slot_start=2)
    _release_copyout(bridge)
    data = controller.scsi_read(1000, slot_start=2, arm=False)
    assert data == bytes(range(256)) * 3 + bytes(range(232)) and isinstance(data, bytearray)
    assert [t.kind for t in wire.transfers] == ["control_out", "bulk_in"]
    assert wire.transfers[1].received == bridge.read_sram(2 * 0x4000, 1024)


@pytest.mark.parametrize("size", [512, 3 * 512, 1000], ids=["one-sector", "sectors", "padded"])
def test_scsi_read_into_fills_the_buffer_with_what_the_sram_holds(
    controller: Asm2464Controller, wire: WireRecorder, bridge: Asm2464, topology: PcieTopology, size: int
) -> None:
    bridge.write_sram(0x4000, bytes(range(256)) * 8)
    out = np.full(size + 2, 0xEE, dtype=np.uint8)
    controller.scsi_read_arm(size, slot_start=1)
    _release_copyout(bridge)
    controller.scsi_read_into(out[1 : size + 1], slot_start=1, arm=False)
    assert out[1 : size + 1].tobytes() == bridge.read_sram(0x4000, size)
    assert out[0] == out[-1] == 0xEE
    (read,) = wire.of("bulk_in")
    in_place = size % 512 == 0  # whole sectors: an asynchronous read into the buffer itself
    assert (read.length, read.is_async) == (-(-size // 512) * 512, in_place)


def test_scsi_read_into_refuses_a_read_only_buffer(controller: Asm2464Controller, wire: WireRecorder) -> None:
    with pytest.raises(InvalidArgument, match="out is a read-only bytes buffer"):
        controller.scsi_read_into(bytes(512))
    assert wire.transfers == []


def test_messages_read_no_completion() -> None:
    """Scripted: the emulated bridge does not model message TLPs (it stalls them); only the encoding is checked."""
    handle = ScriptedHandle(ok)
    controller = Asm2464Controller(Usb3Transport(handle, ScriptedContext(handle)))
    assert controller.pcie_request(0x34, 0, None) is None
    assert controller.pcie_request(0x74, 0, 0x1234) is None
    assert [r[1] for r in handle.requests()] == [0xF0, 0xF0] and all(r[0] == OUT for r in handle.requests())


def test_config_requests_pick_type_0_on_bus_0_and_type_1_above(
    controller: Asm2464Controller, wire: WireRecorder
) -> None:
    _linked(controller, wire)
    assert controller.pcie_cfg_read(0, 0, 0, 0x00) == BRIDGE_ID
    controller.pcie_cfg_write(0, 0, 0, 0x19, 1, size=1)
    controller.pcie_cfg_write(0, 0, 0, 0x1A, 1, size=1)
    assert controller.pcie_cfg_read(1, 0, 0, 0x02, size=2) == BRIDGE_DEVICE_ID
    assert wire.requests() == [
        _tlp(0x04, 0b1111, 0, 0x0000_0000, 0, 0),
        CPL_READ,
        _tlp(0x44, 0b0010, 0, 0x0000_0018, 0, 0x0000_0100),
        CPL_READ,
        _tlp(0x44, 0b0100, 0, 0x0000_0018, 0, 0x0001_0000),
        CPL_READ,
        _tlp(0x05, 0b1100, 0, 0x0100_0000, 0, 0),
        CPL_READ,
    ]


def test_config_address_layout(controller: Asm2464Controller, wire: WireRecorder) -> None:
    _linked(controller, wire)
    with pytest.raises(PcieError, match="completed with UR"):  # no function at 0:1f.7
        controller.pcie_cfg_read(0, 0x1F, 7, 0xFFC)
    lo, hi, _ = struct.unpack("<III", wire.transfers[0].out or b"")
    assert hi << 32 | lo == 0 << 24 | 0x1F << 19 | 7 << 16 | 0xFFC


@pytest.mark.parametrize("failures", [1, 3, 10])
def test_ret_status_errors_are_retried(recorded: Recorded, failures: int) -> None:
    controller = recorded.controller(retry_delay_s=0.002)
    _linked(controller, recorded.wire)
    statuses = [RetStatus.ERROR, RetStatus.TIMEOUT] * 5
    recorded.bridge.faults = FaultPlan(
        tuple(FaultRule(Operation.tlp(), n + 1, Fault.ret_status(statuses[n])) for n in range(failures))
    )
    pauses: list[float] = []
    pause = recorded.transport.pause
    recorded.transport.pause = lambda seconds: (pauses.append(seconds), pause(seconds))[1]  # type: ignore[method-assign]
    assert controller.pcie_cfg_read(0, 0, 0, 0) == BRIDGE_ID
    tlps = [r for r in recorded.wire.requests() if r[0] == OUT]
    assert len(tlps) == failures + 1 and len(set(tlps)) == 1, "the same TLP is re-issued"
    completions = [t.received for t in recorded.wire.transfers if t.kind == "control_in"]
    assert [c[7] if c else None for c in completions] == [*statuses[:failures], RetStatus.OK]
    assert pauses == [0.002] * failures


def test_ret_status_failing_11_times_raises_naming_it(
    controller: Asm2464Controller, wire: WireRecorder, bridge: Asm2464
) -> None:
    _linked(controller, wire)
    bridge.faults = FaultPlan(
        tuple(FaultRule(Operation.tlp(), n, Fault.ret_status(RetStatus.TIMEOUT)) for n in range(1, 12))
    )
    with pytest.raises(PcieError) as raised:
        controller.pcie_cfg_read(2, 0, 0, 0x10)
    assert str(raised.value).startswith(
        "CFGRD1 at 0x2000010+0x4 failed: firmware ret_status TIMEOUT (0xff) on 11 attempt(s) (1 + up to 10 retries)"
    )
    assert raised.value.__notes__ == ["config read of 2:00.0 register 0x010 (4 bytes)"]
    assert (raised.value.ret_status, raised.value.cpl_status, raised.value.attempts) == (RetStatus.TIMEOUT, None, 11)
    assert sum(r == CPL_READ for r in wire.requests()) == 11


def test_an_unknown_ret_status_is_not_retried() -> None:
    """Scripted: the emulated firmware only ever reports OK, ERROR or TIMEOUT (fault plans refuse other values)."""
    handle = ScriptedHandle(lambda call: None if call.kind == "control_out" else bytes(7) + b"\x02")
    controller = Asm2464Controller(Usb3Transport(handle, ScriptedContext(handle)), retry_delay_s=0)
    with pytest.raises(PcieError, match=r"ret_status unknown 0x02 \(0x02\) on 1 attempt"):
        controller.pcie_cfg_read(0, 0, 0, 0)
    assert len(handle.calls) == 2


@pytest.mark.parametrize(
    ("status", "name"),
    [
        (CplStatus.UR, "UR (unsupported request)"),
        (CplStatus.CRS, "CRS (configuration request retry status)"),
        (CplStatus.CA, "CA (completer abort)"),
    ],
)
def test_completion_errors_raise_naming_the_status(
    controller: Asm2464Controller, wire: WireRecorder, bridge: Asm2464, topology: PcieTopology, status: int, name: str
) -> None:
    address = topology.bar(0).address + 0x2345_6788
    bridge.faults = FaultPlan.single(Operation.tlp(), 1, Fault.cpl_status(status))
    with pytest.raises(PcieError) as raised:
        controller.pcie_request(FmtType.MRD64, address, size=4)
    assert str(raised.value) == f"MRD64 at {address:#x}+0x4 completed with {name}"
    assert raised.value.cpl_status == status and raised.value.address == address and raised.value.attempts == 1
    assert len(wire.transfers) == 2, "completion errors are not retried"
    assert (wire.transfers[1].received or b"")[4] >> 5 == status


def test_a_reserved_completion_status_is_named() -> None:
    """Scripted: no completer sends the reserved status 0b011, so neither the emulator nor a fault plan does."""
    handle = ScriptedHandle(
        lambda call: None if call.kind == "control_out" else bytes(4) + bytes([0b011 << 5]) + bytes(3)
    )
    controller = Asm2464Controller(Usb3Transport(handle, ScriptedContext(handle)))
    with pytest.raises(PcieError, match=r"completed with reserved 0b011 \(undefined completion status\)"):
        controller.pcie_request(FmtType.MRD64, 0x1_2345_6788, size=4)


def test_config_to_a_bus_no_bridge_forwards_is_ur(controller: Asm2464Controller, wire: WireRecorder) -> None:
    _linked(controller, wire)
    with pytest.raises(PcieError, match="CFGRD1 at 0x4000000") as raised:
        controller.pcie_cfg_read(4, 0, 0, 0)
    assert raised.value.cpl_status is CplStatus.UR


def test_power_and_link() -> None:
    """With a link that trains in 15 ms, the third of the 10 ms polls finds it up."""
    with recorded_board(Asm2464(quirks=Quirks(link_up_delay_ns=15_000_000))) as board:
        controller = board.controller()
        assert not controller.pcie_link_up()
        controller.set_pcie_power(True)
        controller.wait_pcie_link(timeout_s=0.1, poll_s=0.01)
        assert controller.pcie_link_state() == 0x78
        requests = board.wire.requests()
        assert requests[1] == (OUT, 0xF3, 1, 0, b"")
        assert requests[2:5] == [(IN, 0xE4, LTSSM, 0, 1)] * 3
        assert [t.received for t in board.wire.transfers[2:6]] == [b"\x00", b"\x00", b"\x78", b"\x78"]
        controller.set_pcie_power(False)
        assert board.wire.requests()[-1] == (OUT, 0xF3, 0, 0, b"") and not controller.pcie_link_up()


def test_a_link_that_never_comes_up_times_out_naming_the_ltssm(
    controller: Asm2464Controller, wire: WireRecorder
) -> None:
    with pytest.raises(DeviceTimeout) as raised:
        controller.wait_pcie_link(timeout_s=0.05, poll_s=0.01)
    assert str(raised.value) == (
        "PCIe link not up after 6 polls over 0.05s: LTSSM at XDATA 0xb450 reads 0x00, expected 0x78 (L0); is PCIe "
        "powered (set_pcie_power(True))?"
    )
    assert wire.transfers == [Transfer("control_in", IN, 0xE4, LTSSM, 0, length=1, received=b"\x00", timeout=1000)] * 6


BAD_CALLS = [
    ("xdata_read", (0xFFFF, 2), {}, "XDATA read range 0xffff+0x2 ends at 0x10001, past the end 0x10000"),
    ("xdata_read", (0, 0), {}, "size=0, expected an int >= 1"),
    ("xdata_write", (0, b""), {}, "data of 0 bytes"),
    ("xdata_write", (0xFFFF, b"ab"), {}, "XDATA write range 0xffff+0x2"),
    ("xdata_write", (0, "ab"), {}, "data=str object, expected a bytes-like object"),
    ("scsi_write", (b"",), {}, "buf of 0 bytes"),
    ("scsi_write", (bytes(0x80001),), {}, "SRAM arm of 1025 sectors"),
    ("scsi_write", (b"x",), {"slot_start": 32}, "slot_start=32"),
    ("scsi_write", (b"x",), {"slot_start": True}, "slot_start=True, expected an int"),
    ("scsi_read_arm", (512,), {"slot_start": 1.0}, "slot_start=1.0, expected an int"),
    ("scsi_write", (bytes(0x4001),), {"slot_start": 31}, "from slot 31 over 2 slots"),
    ("scsi_read_arm", (0,), {}, "nbytes=0"),
    ("scsi_read", (-1,), {}, "nbytes=-1"),
    ("pcie_request", (0x100, 0), {}, "fmt_type=256"),
    ("pcie_request", (FmtType.MWR32, 0x1_0000_0000, 1), {}, "use the 64-bit form"),
    ("pcie_request", (FmtType.MRD32, 1), {"size": 4}, "offset=1 size=4 crosses a dword boundary"),
    ("pcie_request", (FmtType.MWR32, 0, 0x1_0000_0000), {}, "value=4294967296"),
    ("pcie_cfg_read", (256, 0, 0, 0), {}, "bus=256"),
    ("pcie_cfg_read", (0, 32, 0, 0), {}, "dev=32"),
    ("pcie_cfg_read", (0, 0, 8, 0), {}, "fn=8"),
    ("pcie_cfg_read", (0, 0, 0, 0x1000), {}, "reg=4096"),
    ("pcie_cfg_read", (0, 0, 0, 0x103), {"size": 2}, "offset=3 size=2 crosses a dword boundary"),
    ("pcie_cfg_write", (0, 0, 0, 0x04, 0x10000), {"size": 2}, "value=65536"),
    ("pcie_mem_read", (0x1000_0000, 0), {}, "size=0"),
    ("pcie_mem_write", (0x1000_0000, b""), {}, "data of 0 bytes"),
    ("pcie_mem_write", ((1 << 64) - 1, b"ab"), {}, "past the 64-bit PCIe address space"),
    ("set_pcie_power", (1,), {}, "on=1, expected True or False"),
    ("wait_pcie_link", (0,), {}, "timeout_s=0, expected a number of seconds in (0, 60.0]"),
    ("wait_pcie_link", (1,), {"poll_s": True}, "poll_s=True"),
    # a bad timeout is refused before the 0xF2 arm goes out (the arm would be left behind for the next transfer)
    ("scsi_write", (b"x",), {"timeout": 1.5}, "timeout (ms)=1.5, expected an int"),
    ("scsi_write", (b"x",), {"timeout": 0}, "timeout (ms)=0, expected an int >= 1"),
    ("scsi_write", (b"x",), {"timeout": MAX_TIMEOUT_MS + 1}, "timeout (ms)=7200001, expected an int <= 7200000"),
    ("scsi_read", (512,), {"timeout": 1.5}, "timeout (ms)=1.5"),
    ("scsi_read", (512,), {"timeout": 1 << 32}, "timeout (ms)=4294967296"),
    ("scsi_read_into", (bytearray(512),), {"timeout": "1"}, "timeout (ms)='1'"),
    ("scsi_read_into", (bytearray(100),), {"timeout": -1}, "timeout (ms)=-1"),
    # sizes and addresses against the documented limits, before anything is allocated or planned
    ("pcie_mem_read", (0, 1 << 40), {}, "expected at most MAX_MEM_ACCESS_BYTES=0x40000000"),
    ("pcie_mem_read", (0, 1 << 62), {}, "expected at most MAX_MEM_ACCESS_BYTES=0x40000000"),
    ("pcie_mem_read", (0, MAX_MEM_ACCESS_BYTES + 1), {}, "size=0x40000001"),
    ("pcie_mem_read", ((1 << 64) - 2, 4), {}, "past the 64-bit PCIe address space"),
    ("pcie_mem_read", ([1], 4), {}, "address=[1], expected an int"),
    ("pcie_mem_read", (0x1000_0000, [4]), {}, "size=[4], expected an int"),
    ("pcie_mem_read", (0x1000_0000, 4.0), {}, "size=4.0, expected an int"),
    ("pcie_mem_write", ([1], b"abcd"), {}, "address=[1], expected an int"),
    # a poll interval below MIN_POLL_S would make the wait a poll count (10**9 polls of 1 ns), not a time bound
    ("wait_pcie_link", (1.0,), {"poll_s": 1e-9}, "poll_s=1e-09, expected a number of seconds in [0.001, 60.0]"),
    ("wait_pcie_link", (1.0,), {"poll_s": 0.0}, "poll_s=0.0"),
    ("wait_pcie_link", (1.0,), {"poll_s": float("nan")}, "poll_s=nan"),
    ("wait_pcie_link", (float("inf"),), {}, "timeout_s=inf"),
    # the asynchronous arm, XDATA read and bulk OUT (test_controller_async.py)
    ("xdata_read_async", (0xA800, 513), {}, "size=513, expected an int <= 512"),
    ("xdata_read_async", (0xA800, 0), {}, "size=0"),
    ("xdata_read_async", (0xFFFC, 8), {}, "past the end 0x10000"),
    ("xdata_read_async", (1.0, 8), {}, "XDATA read offset=1.0"),
    ("scsi_write_arm_async", (0x8000, 31), {}, "slot_start + slot_count <= 32"),
    ("scsi_write_arm_async", (0, 0), {}, "nbytes=0"),
    ("scsi_write_async", (bytes(1000),), {}, "wire of 0x3e8 bytes, expected a whole number of 512-byte sectors"),
    ("scsi_write_async", (b"",), {}, "wire of 0x0 bytes"),
    ("scsi_write_async", ("abc",), {}, "wire=str object, expected a bytes-like object"),
    ("scsi_write_async", (bytes(512),), {"timeout": 0}, "timeout (ms)=0"),
]


@pytest.mark.parametrize(("op", "args", "kwargs", "message"), BAD_CALLS, ids=[f"{b[0]}-{b[3][:30]}" for b in BAD_CALLS])
def test_bad_inputs_raise_invalid_argument_and_send_nothing(
    controller: Asm2464Controller,
    wire: WireRecorder,
    bridge: Asm2464,
    op: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    message: str,
) -> None:
    before = bridge.state_digest()
    with pytest.raises(InvalidArgument) as raised:
        getattr(controller, op)(*args, **kwargs)
    assert message in str(raised.value)
    assert wire.transfers == [] and bridge.state_digest() == before


@pytest.mark.parametrize(
    ("transport", "kwargs", "message"),
    [
        (object(), {}, "expected a BridgeIO"),
        (None, {"retry_delay_s": -1}, "retry_delay_s=-1"),
        (None, {"stream_chunk_bytes": 1000}, "stream_chunk_bytes=1000, expected an int >= 1024"),
        (None, {"stream_chunk_bytes": 1536}, "stream_chunk_bytes=0x600, expected a multiple of the 1024-byte packet"),
    ],
)
def test_bad_construction(recorded: Recorded, transport: Any, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")):
        Asm2464Controller(transport or recorded.transport, **kwargs)
    assert recorded.wire.transfers == []


def test_a_link_wait_is_bounded_in_polls_and_in_time(recorded: Recorded) -> None:
    """The shortest poll over the longest wait: MAX_WAIT_S / MIN_POLL_S + 1 polls, and the pauses sum to the wait."""
    controller = recorded.controller()
    pauses: list[float] = []
    pause = recorded.transport.pause
    recorded.transport.pause = lambda seconds: (pauses.append(seconds), pause(seconds))[1]  # type: ignore[method-assign]
    with pytest.raises(DeviceTimeout, match=r"after 101 polls over 0\.1s"):
        controller.wait_pcie_link(timeout_s=0.1, poll_s=MIN_POLL_S)
    assert len(recorded.wire.transfers) == 101 and len(pauses) == 100 and sum(pauses) == pytest.approx(0.1)
