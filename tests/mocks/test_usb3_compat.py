"""MockUSB3 accepts what the real USB3 class accepts (docs/usb3-compat.md): every call form of that table, in the
default mode and in strict mode; a client written the way that class's own pipelined copyin is written (a one-chunk
copy waits on ``None``); discovery and opening as that class does them."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest
import usb1

from tinyhil.errors import InvalidArgument, StateError
from tinyhil.mocks.usb3 import MockUSB3, MockUsbDevice
from tinyhil.spec.asm2464 import BRIDGE_VID_PIDS, Xdata

FENCE = int(Xdata.DRAIN_FENCE)
SECTOR = 512
SLOT_BYTES = 0x4000
WINDOW_SLOTS = 16
INQUIRY = b"\x12\x00\x00\x00\x24\x00"


def _wait_twice(usb: MockUSB3) -> None:
    tag = usb.control_write_async(0xE5, 0x5000, 0x12)
    usb.bulk_wait(tag)
    usb.bulk_wait(tag)


def _submit_65(usb: MockUSB3) -> None:
    for _ in range(65):
        usb.control_write_async(0xE5, 0x5000, 0x12)
    usb.wait_all()


def _submit_and_wait(submit: Callable[[MockUSB3], Any]) -> Callable[[MockUSB3], None]:
    def run(usb: MockUSB3) -> None:
        submitted = submit(usb)
        usb.bulk_wait(submitted[0] if isinstance(submitted, tuple) else submitted)

    return run


OK = None  # the call returns (what it returns is checked by the tests of each call)
STRICT = (InvalidArgument, "strict mode")
# (call form, the call, what the default mode does, what strict mode does): an exception class and a message part,
# or OK. A board's own answer (a stall, a timeout) is what the real class gets from the same board.
TABLE: list[tuple[str, Callable[[MockUSB3], Any], Any, Any]] = [
    ("bulk_wait(None)", lambda u: u.bulk_wait(None), OK, (InvalidArgument, "bulk_wait(tag=None): strict mode")),
    ("bulk_wait(reaped tag)", _wait_twice, OK, (InvalidArgument, "(already reaped)")),
    ("bulk_wait(never submitted)", lambda u: u.bulk_wait(12345), OK, (InvalidArgument, "(never submitted)")),
    ("control_write timeout=0", lambda u: u.control_write(0xE5, 0x5000, 0x12, timeout=0), OK, STRICT),
    ("control_read timeout=0", lambda u: u.control_read(0xE4, 4, 0x5000, timeout=0), OK, STRICT),
    ("control_read length 0", lambda u: u.control_read(0xE4, 0, 0x5000), (usb1.USBErrorPipe, ""), STRICT),
    (
        "control_read length 0x1000",
        lambda u: u.control_read(0xE4, 0x1000, 0x5000),
        (usb1.USBErrorPipe, ""),
        (usb1.USBErrorPipe, ""),
    ),
    (
        "control_read length 0x1001",
        lambda u: u.control_read(0xE4, 0x1001),
        (InvalidArgument, "at most 0x1000"),
        (InvalidArgument, "at most 0x1000"),
    ),
    (
        "control_write data 0x1001",
        lambda u: u.control_write(0xF0, 0, 0, bytes(0x1001)),
        (InvalidArgument, "at most 0x1000"),
        (InvalidArgument, "at most 0x1000"),
    ),
    ("control_write data b''", lambda u: u.control_write(0xE5, 0x5000, 0x12, b""), OK, OK),
    ("bulk_write b''", lambda u: u.bulk_write(b""), (usb1.USBErrorTimeout, ""), STRICT),
    ("bulk_write timeout=0 unarmed", lambda u: u.bulk_write(b"x", timeout=0), (usb1.USBErrorTimeout, ""), STRICT),
    ("bulk_read 0", lambda u: u.bulk_read(0), (usb1.USBErrorTimeout, ""), STRICT),
    ("bulk_write_async b''", _submit_and_wait(lambda u: u.bulk_write_async(b"")), (usb1.USBErrorTimeout, ""), STRICT),
    (
        "control_write_async timeout=0",
        _submit_and_wait(lambda u: u.control_write_async(0xE5, 0x5000, 1, timeout=0)),
        OK,
        STRICT,
    ),
    (
        "control_read_async length 0",
        _submit_and_wait(lambda u: u.control_read_async(0xE4, 0, 0x5000)),
        (usb1.USBErrorPipe, ""),
        STRICT,
    ),
    (
        "control_write_async data 0x1001",
        _submit_and_wait(lambda u: u.control_write_async(0xF0, 0, 0, bytes(0x1001))),
        (usb1.USBErrorPipe, ""),
        (usb1.USBErrorPipe, ""),
    ),
    (
        "send_batch([INQUIRY])",
        lambda u: u.send_batch([INQUIRY]),
        (usb1.USBErrorTimeout, ""),
        (usb1.USBErrorTimeout, ""),
    ),
    ("65 async transfers in flight", _submit_65, OK, (StateError, "64 transfers are in flight (max_in_flight=64)")),
    ("send_batch odata shorter", lambda u: u.send_batch([INQUIRY], []), OK, STRICT),
    ("send_batch cdb of 17 bytes", lambda u: u.send_batch([bytes(17)]), (usb1.USBErrorTimeout, ""), STRICT),
]


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
@pytest.mark.parametrize(("form", "call", "default", "strict_outcome"), TABLE, ids=[row[0] for row in TABLE])
def test_each_call_form_behaves_as_the_table_says(
    form: str, call: Callable[[MockUSB3], Any], default: Any, strict_outcome: Any, strict: bool
) -> None:
    expected = strict_outcome if strict else default
    with MockUSB3(strict=strict) as usb:
        if expected is OK:
            call(usb)
        else:
            error, message = expected
            with pytest.raises(error) as raised:
                call(usb)
            assert message in str(raised.value), form
        usb.clear_error()
        assert usb.control_read(0xE4, 1, 0x5000) is not None, "the board still answers after the call"


def _pipelined_copy(usb: MockUSB3, data: bytes, chunk: int, seq0: int = 0) -> None:
    """A copy written the way the real class's own copyin is: two SRAM windows, per chunk the wire image (payload,
    then a sentinel as the last dword, padded to sectors) staged, the window armed and the fence read as two
    asynchronous control transfers reaped together, then the bulk OUT; at the end, a wait on both windows' tags,
    one of which is ``None`` for a one-chunk copy."""
    stage = [bytearray(WINDOW_SLOTS * SLOT_BYTES) for _ in range(2)]
    inflight: list[int | None] = [None, None]
    for number, start in enumerate(range(0, len(data), chunk)):
        seq, size = seq0 + number, min(chunk, len(data) - start)
        window = seq & 1
        if inflight[window] is not None:
            usb.bulk_wait(inflight[window])
        buffer = stage[window]
        buffer[:size] = data[start : start + size]
        wire = -(-(size + 4) // SECTOR) * SECTOR
        struct.pack_into("<I", buffer, wire - 4, 0x51000000 | (seq & 0xFFFFFF))
        arm = usb.control_write_async(0xF2, wire // SECTOR, window * WINDOW_SLOTS | (-(-wire // SLOT_BYTES) << 8))
        fence_tag, fence = usb.control_read_async(0xE4, 8, value=FENCE)
        usb.bulk_wait(arm)
        usb.bulk_wait(fence_tag)
        assert len(fence) == 8
        inflight[window] = usb.bulk_write_async(memoryview(buffer)[:wire])
    for tag in inflight:
        usb.bulk_wait(tag)


@pytest.mark.parametrize("mode", ["sync", "timed"])
def test_a_one_chunk_pipelined_copy_waits_on_none_and_lands_its_wire_image(mode: str) -> None:
    data = bytes(range(256)) * 4
    with MockUSB3(mode=mode) as usb:
        _pipelined_copy(usb, data, chunk=WINDOW_SLOTS * SLOT_BYTES - 4)
        assert usb.in_flight == ()
        wire = usb.bridge.read_sram(0, 1024 + SECTOR)
    assert wire[: len(data)] == data
    assert struct.unpack_from("<I", wire, 1024 + SECTOR - 4)[0] == 0x51000000, "the sentinel of seq 0 ends the wire"


def test_a_three_chunk_pipelined_copy_lands_the_last_two_chunks_in_the_two_windows() -> None:
    data = bytes(range(251)) * 40  # 10040 bytes in chunks of 4092: seq 0 and 2 use window 0, seq 1 window 1
    chunk = 4092
    with MockUSB3(mode="timed") as usb:
        _pipelined_copy(usb, data, chunk)
        window0 = usb.bridge.read_sram(0, len(data) - 2 * chunk)
        window1 = usb.bridge.read_sram(WINDOW_SLOTS * SLOT_BYTES, chunk)
    assert window0 == data[2 * chunk :] and window1 == data[chunk : 2 * chunk]


def test_strict_mode_reports_the_one_chunk_copys_wait_on_none() -> None:
    with MockUSB3(strict=True) as usb, pytest.raises(InvalidArgument, match=r"bulk_wait\(tag=None\): strict mode"):
        _pipelined_copy(usb, b"x" * 100, chunk=WINDOW_SLOTS * SLOT_BYTES - 4)


def test_list_devices_and_opening_a_listed_device_as_the_real_class_does() -> None:
    (device, name), = MockUSB3.list_devices(*BRIDGE_VID_PIDS[0])  # fmt: skip
    assert MockUSB3.list_devices(*BRIDGE_VID_PIDS[1]) == [] and MockUSB3.list_devices(0x1234, 0x5678) == []
    with MockUSB3(device, "ignored", 0x81) as usb:  # the real class ignores what follows the device
        (listed,) = usb.context.getDeviceList()
        assert name == f"usb:{listed.getBusNumber()}-{listed.getDeviceAddress()}"
        assert (listed.getVendorID(), listed.getProductID()) == (device.vendor_id, device.product_id)
        assert usb.product == listed.getProduct() and usb.product.startswith("custom")
    with pytest.raises(InvalidArgument, match=r"MockUSB3\(device, 'ignored'\): strict mode refuses positional"):
        MockUSB3(device, "ignored", strict=True)
    with pytest.raises(InvalidArgument, match=r"MockUSB3\('usb:2-2'\): expected a device from MockUSB3.list_devices"):
        MockUSB3("usb:2-2")  # type: ignore[arg-type]
    assert isinstance(device, MockUsbDevice)
