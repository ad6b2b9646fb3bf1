"""Asm2464Controller at the wire level against a scripted bridge: exact request encodings of every operation,
chunking, padding without needless copies, TLP retries, named completion errors, streams, power and link."""

from __future__ import annotations

import struct
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyhil.asm2464 import Asm2464Controller, PcieError
from tinyhil.asm2464.controller import MIN_POLL_S, SINGLE_TLP_MAX_BYTES
from tinyhil.asm2464.stream import MAX_MEM_ACCESS_BYTES, plan_mem_access
from tinyhil.asm2464.tlp import encode_tlp, lane_offset
from tinyhil.errors import DeviceTimeout, InvalidArgument
from tinyhil.spec.asm2464 import CplStatus, FmtType, RetStatus
from tinyhil.usb import MAX_TIMEOUT_MS, Usb3Transport

OUT, IN = 0x40, 0xC0
MEM = 0x1000_0000  # a memory region of the fake bridge (64 KB)
HIGH = (1 << 32) - 0x8000  # a region straddling 4 GB


def _tlp(fmt_type: int, enables: int, mode: int, lo: int, hi: int, word: int) -> tuple[Any, ...]:
    return (OUT, 0xF0, fmt_type | enables << 8, mode, struct.pack("<III", lo, hi, word))


CPL_READ = (IN, 0xF0, 0, 0, 8)


def test_xdata_read_is_chunked_at_512_bytes(controller: Asm2464Controller, handle: Any, bridge: Any) -> None:
    bridge.xdata[0x8000:0x8514] = bytes(range(256)) * 5 + bytes(20)
    assert controller.xdata_read(0x8000, 0x514) == bytes(bridge.xdata[0x8000:0x8514])
    assert handle.requests() == [(IN, 0xE4, 0x8000, 0, 512), (IN, 0xE4, 0x8200, 0, 512), (IN, 0xE4, 0x8400, 0, 0x114)]


def test_usb2_reads_at_most_64_bytes_a_request(usb_fake: ModuleType, bridge: Any) -> None:
    handle = usb_fake.ScriptedHandle(bridge)
    controller = Asm2464Controller(Usb3Transport(handle, usb_fake.ScriptedContext(handle)), usb2=True)
    controller.xdata_read(0xA800, 130)
    assert [r[4] for r in handle.requests()] == [64, 64, 2] and controller.stream_packet_bytes == 512


def test_xdata_write_sends_one_request_per_byte(controller: Asm2464Controller, handle: Any, bridge: Any) -> None:
    controller.xdata_write(0xA800, b"\x01\x02\xff")
    assert handle.requests() == [
        (OUT, 0xE5, 0xA800, 1, b""),
        (OUT, 0xE5, 0xA801, 2, b""),
        (OUT, 0xE5, 0xA802, 0xFF, b""),
    ]
    assert bridge.xdata[0xA800:0xA803] == b"\x01\x02\xff"


def test_scsi_write_arms_then_sends_the_padded_image(controller: Asm2464Controller, handle: Any, bridge: Any) -> None:
    image = bytes(range(250)) * 4
    arm = controller.scsi_write(image, slot_start=3)
    arm_request, bulk = handle.calls
    assert handle.requests()[0] == (OUT, 0xF2, 2, 3 | 1 << 8, b"")
    assert (bulk.kind, bulk.endpoint, len(bulk.data)) == ("bulk_out", 0x02, 1024)
    assert bulk.data == image + bytes(24)
    assert bridge.sram[3 * 0x4000 : 3 * 0x4000 + 1000] == image
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
    controller: Asm2464Controller, handle: Any, bridge: Any, nbytes: int, slot_start: int, value: int, index: int
) -> None:
    payload = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    controller.scsi_write(payload, slot_start)
    assert handle.requests()[0] == (OUT, 0xF2, value, index, b"")
    base = slot_start * 0x4000
    assert bytes(bridge.sram[base : base + nbytes]) == payload.tobytes()


def test_sector_aligned_images_are_sent_without_a_copy(usb_fake: ModuleType, bridge: Any) -> None:
    seen: list[Any] = []

    class Spy(usb_fake.ScriptedHandle):  # type: ignore[name-defined,misc]
        def bulkWrite(self, endpoint: int, data: Any, timeout: int = 0) -> int:
            seen.append(data)
            return int(super().bulkWrite(endpoint, data, timeout))

    handle = Spy(bridge)
    controller = Asm2464Controller(Usb3Transport(handle, usb_fake.ScriptedContext(handle)))
    image = bytearray(4096)
    controller.scsi_write(image)
    controller.scsi_write(bytearray(100))
    assert seen[0].obj is image, "an aligned image reaches the handle as a view of the caller's buffer"
    assert seen[1].obj is not None and len(seen[1]) == 512


def test_scsi_read_arms_device_to_host_then_reads(controller: Asm2464Controller, handle: Any, bridge: Any) -> None:
    bridge.sram[2 * 0x4000 : 2 * 0x4000 + 1024] = bytes(range(256)) * 4
    data = controller.scsi_read(1000, slot_start=2)
    assert data == bytes(range(256)) * 3 + bytes(range(232)) and isinstance(data, bytearray)
    assert handle.requests() == [(OUT, 0xF2, 0x8002, 2 | 1 << 8, b"")]
    assert (handle.calls[1].kind, handle.calls[1].endpoint, handle.calls[1].length) == ("bulk_in", 0x81, 1024)
    controller.scsi_read_arm(512)
    assert controller.scsi_read(512, arm=False) == bytes(bridge.sram[:512])
    assert [c.kind for c in handle.calls[2:]] == ["control_out", "bulk_in"]


@pytest.mark.parametrize("size", [512, 3 * 512, 1000], ids=["one-sector", "sectors", "padded"])
def test_scsi_read_into_fills_the_buffer_with_what_scsi_read_returns(
    controller: Asm2464Controller, handle: Any, bridge: Any, size: int
) -> None:
    bridge.sram[0x4000 : 0x4000 + 2048] = bytes(range(256)) * 8
    out = np.full(size + 2, 0xEE, dtype=np.uint8)
    controller.scsi_read_into(out[1 : size + 1], slot_start=1)
    assert out[1 : size + 1].tobytes() == controller.scsi_read(size, slot_start=1)
    assert out[0] == out[-1] == 0xEE
    first_read = next(c for c in handle.calls if c.kind == "bulk_in")
    in_place = size % 512 == 0  # whole sectors: an asynchronous read into the buffer itself
    assert (first_read.length, first_read.is_async) == (-(-size // 512) * 512, in_place)


def test_scsi_read_into_refuses_a_read_only_buffer(controller: Asm2464Controller, handle: Any) -> None:
    with pytest.raises(InvalidArgument, match="out is read-only"):
        controller.scsi_read_into(bytes(512))
    assert handle.calls == []


def test_single_tlp_read_and_posted_write(controller: Asm2464Controller, handle: Any, bridge: Any) -> None:
    bridge.regions[MEM][0:4] = b"\x11\x22\x33\x44"
    assert controller.pcie_request(FmtType.MRD32, MEM + 2, size=2) == 0x4433
    controller.pcie_request(FmtType.MWR32, MEM + 1, 0xAA, size=1)
    assert bridge.regions[MEM][0:4] == b"\x11\xaa\x33\x44"
    assert handle.requests() == [_tlp(0x00, 0b1100, 0, MEM, 0, 0), CPL_READ, _tlp(0x40, 0b0010, 0, MEM, 0, 0xAA00)]


def test_messages_read_no_completion(controller: Asm2464Controller, handle: Any) -> None:
    assert controller.pcie_request(0x34, 0, None) is None
    assert controller.pcie_request(0x74, 0, 0x1234) is None
    assert [r[1] for r in handle.requests()] == [0xF0, 0xF0] and all(r[0] == OUT for r in handle.requests())


def test_config_requests_pick_type_0_on_bus_0_and_type_1_above(
    controller: Asm2464Controller, handle: Any, bridge: Any
) -> None:
    assert controller.pcie_cfg_read(0, 0, 0, 0x00) == 0x2464_1B21
    controller.pcie_cfg_write(0, 0, 0, 0x19, 1, size=1)
    controller.pcie_cfg_write(0, 0, 0, 0x1A, 1, size=1)
    assert controller.pcie_cfg_read(1, 0, 0, 0x02, size=2) == 0x2464
    assert handle.requests() == [
        _tlp(0x04, 0b1111, 0, 0x0000_0000, 0, 0),
        CPL_READ,
        _tlp(0x44, 0b0010, 0, 0x0000_0018, 0, 0x0000_0100),
        CPL_READ,
        _tlp(0x44, 0b0100, 0, 0x0000_0018, 0, 0x0001_0000),
        CPL_READ,
        _tlp(0x05, 0b1100, 0, 0x0100_0000, 0, 0),
        CPL_READ,
    ]


def test_config_address_layout(controller: Asm2464Controller, bridge: Any) -> None:
    bridge.cpl_status_override = 0
    controller.pcie_cfg_read(0, 0x1F, 7, 0xFFC)
    assert bridge.tlps[-1][2] == 0 << 24 | 0x1F << 19 | 7 << 16 | 0xFFC


@pytest.mark.parametrize("failures", [1, 3, 10])
def test_ret_status_errors_are_retried(usb_fake: ModuleType, bridge: Any, failures: int) -> None:
    handle = usb_fake.ScriptedHandle(bridge)
    context = usb_fake.ScriptedContext(handle)
    controller = Asm2464Controller(Usb3Transport(handle, context), retry_delay_s=0.002)
    bridge.ret_status_script = [RetStatus.ERROR, RetStatus.TIMEOUT] * 5
    del bridge.ret_status_script[failures:]
    assert controller.pcie_cfg_read(0, 0, 0, 0) == 0x2464_1B21
    tlps = [r for r in handle.requests() if r[0] == OUT]
    assert len(tlps) == failures + 1 and len(set(tlps)) == 1, "the same TLP is re-issued"
    assert context.pumps == [0.002] * failures


def test_ret_status_failing_11_times_raises_naming_it(controller: Asm2464Controller, handle: Any, bridge: Any) -> None:
    bridge.ret_status_script = [RetStatus.TIMEOUT] * 11
    with pytest.raises(PcieError) as raised:
        controller.pcie_cfg_read(2, 0, 0, 0x10)
    assert str(raised.value).startswith(
        "CFGRD1 at 0x2000010+0x4 failed: firmware ret_status TIMEOUT (0xff) on 11 attempt(s) (1 + up to 10 retries)"
    )
    assert raised.value.__notes__ == ["config read of 2:00.0 register 0x010 (4 bytes)"]
    assert (raised.value.ret_status, raised.value.cpl_status, raised.value.attempts) == (RetStatus.TIMEOUT, None, 11)
    assert sum(r == CPL_READ for r in handle.requests()) == 11


def test_an_unknown_ret_status_is_not_retried(controller: Asm2464Controller, handle: Any, bridge: Any) -> None:
    bridge.ret_status_script = [0x02]
    with pytest.raises(PcieError, match=r"ret_status unknown 0x02 \(0x02\) on 1 attempt"):
        controller.pcie_cfg_read(0, 0, 0, 0)
    assert len(handle.calls) == 2


@pytest.mark.parametrize(
    ("status", "name"),
    [
        (CplStatus.UR, "UR (unsupported request)"),
        (CplStatus.CRS, "CRS (configuration request retry status)"),
        (CplStatus.CA, "CA (completer abort)"),
        (0b011, "reserved 0b011 (undefined completion status)"),
    ],
)
def test_completion_errors_raise_naming_the_status(
    controller: Asm2464Controller, handle: Any, bridge: Any, status: int, name: str
) -> None:
    bridge.cpl_status_override = status
    with pytest.raises(PcieError) as raised:
        controller.pcie_request(FmtType.MRD64, 0x1_2345_6788, size=4)
    assert str(raised.value) == f"MRD64 at 0x123456788+0x4 completed with {name}"
    assert raised.value.cpl_status == status and raised.value.address == 0x1_2345_6788 and raised.value.attempts == 1
    assert len(handle.calls) == 2, "completion errors are not retried"


def test_a_tlp_to_an_unmapped_address_raises_ur(controller: Asm2464Controller) -> None:
    with pytest.raises(PcieError, match=r"MRD32 at 0x20000000\+0x2 completed with UR") as raised:
        controller.pcie_mem_read(0x2000_0000, 2)
    assert raised.value.cpl_status is CplStatus.UR


def test_config_to_a_bus_no_bridge_forwards_is_ur(controller: Asm2464Controller) -> None:
    with pytest.raises(PcieError, match="CFGRD1 at 0x4000000") as raised:
        controller.pcie_cfg_read(4, 0, 0, 0)
    assert raised.value.cpl_status is CplStatus.UR


def test_memory_streams_encode_mode_dword_count_and_bulk(
    controller: Asm2464Controller, handle: Any, bridge: Any
) -> None:
    data = bytes(range(256)) * 9  # 2304 bytes: two 1024-byte streams and a 256-byte one with a small chunk size
    controller.stream_chunk_bytes = 1024
    controller.pcie_mem_write(MEM + 0x100, data)
    assert bytes(bridge.regions[MEM][0x100 : 0x100 + len(data)]) == data
    assert handle.requests() == [
        _tlp(0x40, 0xF, 1, MEM + 0x100, 0, 256),
        _tlp(0x40, 0xF, 1, MEM + 0x500, 0, 256),
        _tlp(0x40, 0xF, 1, MEM + 0x900, 0, 64),
    ]
    assert [len(c.data) for c in handle.calls if c.kind == "bulk_out"] == [1024, 1024, 256]
    handle.calls.clear()
    assert controller.pcie_mem_read(MEM + 0x100, len(data)) == data
    assert handle.requests()[0] == _tlp(0x00, 0xF, 2, MEM + 0x100, 0, 256)
    assert [c.length for c in handle.calls if c.kind == "bulk_in"] == [1024, 1024, 256]


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=st.sampled_from([MEM, HIGH]), offset=st.integers(0, 0xF000), size=st.integers(1, 3000), data=st.data())
def test_memory_round_trips_at_any_alignment(
    usb_fake: ModuleType, bridge_fake: ModuleType, base: int, offset: int, size: int, data: st.DataObject
) -> None:
    bridge = bridge_fake.FakeBridge()
    handle = usb_fake.ScriptedHandle(bridge)
    controller = Asm2464Controller(Usb3Transport(handle, usb_fake.ScriptedContext(handle)), stream_chunk_bytes=2048)
    payload = data.draw(st.binary(min_size=size, max_size=size))
    before = bytes(bridge.regions[base])
    controller.pcie_mem_write(base + offset, payload)
    after = bridge.regions[base]
    assert after[offset : offset + size] == payload
    assert after[:offset] == before[:offset] and after[offset + size :] == before[offset + size :]
    assert controller.pcie_mem_read(base + offset, size) == payload
    for _, _, value, mode, raw in handle.requests(("control_out",)):
        lo, hi, word = struct.unpack("<III", raw)
        start = hi << 32 | lo
        if mode:  # a stream of `word` dwords
            end = start + 4 * word
        else:
            lane, nbytes = lane_offset(value >> 8)
            start += lane
            end = start + nbytes
        assert bool(value & 0x20) == (end > 1 << 32), "64-bit TLPs exactly for pieces reaching above 4 GB"


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=st.sampled_from([MEM, HIGH]), offset=st.integers(0, 0xF000), size=st.integers(1, 2100), data=st.data())
def test_memory_writes_send_what_the_reference_encoder_builds(
    usb_fake: ModuleType, bridge_fake: ModuleType, base: int, offset: int, size: int, data: st.DataObject
) -> None:
    """pcie_mem_write encodes its requests itself (cached per lane and size, on every ring write and doorbell): they
    must be exactly what plan_mem_access + encode_tlp (pcie_request's encoder) build for the same write."""
    bridge = bridge_fake.FakeBridge()
    handle = usb_fake.ScriptedHandle(bridge)
    controller = Asm2464Controller(Usb3Transport(handle, usb_fake.ScriptedContext(handle)), stream_chunk_bytes=1024)
    payload = data.draw(st.binary(min_size=size, max_size=size))
    controller.pcie_mem_write(base + offset, payload)
    expected = []
    for piece in plan_mem_access(base + offset, size, stream_chunk_bytes=1024, single_max_bytes=SINGLE_TLP_MAX_BYTES):
        fmt_type = piece.fmt_type(write=True)
        if piece.stream:
            expected.append(_tlp(fmt_type, 0xF, 1, piece.address & 0xFFFF_FFFF, piece.address >> 32, piece.size // 4))
        else:
            value = int.from_bytes(payload[piece.offset : piece.offset + piece.size], "little")
            wvalue, raw = encode_tlp(fmt_type, piece.address, piece.size, value)
            expected.append((OUT, 0xF0, wvalue, 0, raw))
    assert handle.requests(("control_out",)) == expected


def test_power_and_link(usb_fake: ModuleType, bridge: Any) -> None:
    handle = usb_fake.ScriptedHandle(bridge)
    context = usb_fake.ScriptedContext(handle)
    controller = Asm2464Controller(Usb3Transport(handle, context))
    assert not controller.pcie_link_up()
    bridge.link_polls_until_up = 3
    controller.set_pcie_power(True)
    controller.wait_pcie_link(timeout_s=0.1, poll_s=0.01)
    assert controller.pcie_link_state() == 0x78
    assert handle.requests()[1] == (OUT, 0xF3, 1, 0, b"")
    assert handle.requests()[2:5] == [(IN, 0xE4, 0xB450, 0, 1)] * 3 and context.pumps == [0.01, 0.01]
    controller.set_pcie_power(False)
    assert handle.requests()[-1] == (OUT, 0xF3, 0, 0, b"") and not controller.pcie_link_up()


def test_a_link_that_never_comes_up_times_out_naming_the_ltssm(controller: Asm2464Controller, handle: Any) -> None:
    with pytest.raises(DeviceTimeout) as raised:
        controller.wait_pcie_link(timeout_s=0.05, poll_s=0.01)
    assert str(raised.value) == (
        "PCIe link not up after 6 polls over 0.05s: LTSSM at XDATA 0xb450 reads 0x00, expected 0x78 (L0); is PCIe "
        "powered (set_pcie_power(True))?"
    )
    assert len(handle.calls) == 6


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
    ("pcie_mem_read", (MEM, 0), {}, "size=0"),
    ("pcie_mem_write", (MEM, b""), {}, "data of 0 bytes"),
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
    ("pcie_mem_read", (MEM, [4]), {}, "size=[4], expected an int"),
    ("pcie_mem_read", (MEM, 4.0), {}, "size=4.0, expected an int"),
    ("pcie_mem_write", ([1], b"abcd"), {}, "address=[1], expected an int"),
    # a poll interval below MIN_POLL_S would make the wait a poll count (10**9 polls of 1 ns), not a time bound
    ("wait_pcie_link", (1.0,), {"poll_s": 1e-9}, "poll_s=1e-09, expected a number of seconds in [0.001, 60.0]"),
    ("wait_pcie_link", (1.0,), {"poll_s": 0.0}, "poll_s=0.0"),
    ("wait_pcie_link", (1.0,), {"poll_s": float("nan")}, "poll_s=nan"),
    ("wait_pcie_link", (float("inf"),), {}, "timeout_s=inf"),
]


@pytest.mark.parametrize(("op", "args", "kwargs", "message"), BAD_CALLS, ids=[f"{b[0]}-{b[3][:30]}" for b in BAD_CALLS])
def test_bad_inputs_raise_invalid_argument_and_send_nothing(
    controller: Asm2464Controller, handle: Any, op: str, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument) as raised:
        getattr(controller, op)(*args, **kwargs)
    assert message in str(raised.value)
    assert handle.calls == []


@pytest.mark.parametrize(
    ("transport", "kwargs", "message"),
    [
        (object(), {}, "expected a BridgeIO"),
        (None, {"retry_delay_s": -1}, "retry_delay_s=-1"),
        (None, {"stream_chunk_bytes": 1000}, "stream_chunk_bytes=1000, expected an int >= 1024"),
        (None, {"stream_chunk_bytes": 1536}, "stream_chunk_bytes=0x600, expected a multiple of the 1024-byte packet"),
    ],
)
def test_bad_construction(usb_fake: ModuleType, transport: Any, kwargs: dict[str, Any], message: str) -> None:
    handle = usb_fake.ScriptedHandle()
    real = Usb3Transport(handle, usb_fake.ScriptedContext(handle))
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")):
        Asm2464Controller(transport or real, **kwargs)


def test_a_link_wait_is_bounded_in_polls_and_in_time(controller: Asm2464Controller, handle: Any) -> None:
    """The shortest poll over the longest wait: MAX_WAIT_S / MIN_POLL_S + 1 polls, and the pauses sum to the wait."""
    pumps: list[float] = []
    controller.transport.pause = pumps.append  # type: ignore[method-assign]
    with pytest.raises(DeviceTimeout, match=r"after 101 polls over 0\.1s"):
        controller.wait_pcie_link(timeout_s=0.1, poll_s=MIN_POLL_S)
    assert len(handle.calls) == 101 and len(pumps) == 100 and sum(pumps) == pytest.approx(0.1)
