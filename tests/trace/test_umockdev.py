"""The real USB transport through umockdev: a MOCKUSB+AMD recording replayed into usb1 -> libusb -> usbfs.

Each replay runs ``umockdev_child.py`` under ``umockdev-run`` (LD_PRELOAD must be set when a process starts, so the
process under test is a child, never this pytest session). The child opens the bridge the way USB+AMD does and
records what it issued; :func:`~tinyhil.trace.umockdev.first_divergence` holds that against the recording, because
umockdev itself checks neither that everything was consumed nor the order. The tests that need no umockdev (the
descriptors, the description, the comparison) run everywhere.
"""

from __future__ import annotations

import dataclasses
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import usb1  # type: ignore[import-untyped]  # libusb1 ships no type information
from support.scripted_usb import ScriptedHandle

import tinyhil
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm2464 import BRIDGE_CONFIGURATION, BRIDGE_INTERFACE, BRIDGE_VID_PIDS, BULK_IN_EP, BULK_OUT_EP
from tinyhil.spec.copyin import SECTOR_CHUNK_BYTES
from tinyhil.trace import HostCall, Op, Trace, TraceFormatError, TraceHeader, Transfer, load_trace
from tinyhil.trace.umockdev import (
    MAX_TRANSFER_BYTES,
    first_divergence,
    umockdev_description,
    umockdev_trace,
    usb_descriptors,
    write_umockdev,
)
from tinyhil.usb import open_usb3

CHILD = Path(__file__).with_name("umockdev_child.py")
PACKAGES = "the Debian packages umockdev and libusb-1.0-0"
# The sentinel-sector revision: its chunks fit a libpcap packet, the pipelined revision's 256 KiB windows do not.
REVISION = "sentinel-sector"
SIZE = SECTOR_CHUNK_BYTES + 4096  # two chunks, a full one and a short one; the copyout is one bulk IN that fits too
REPLAY_TIMEOUT_S = 120  # a bound on a hung run only: a replay takes about two seconds


def _umockdev_run() -> str:
    """``umockdev-run``'s path; skips naming the packages when umockdev or the system libusb is missing."""
    tool = shutil.which("umockdev-run")
    if tool is None:
        pytest.skip(f"umockdev-run not found on PATH: install {PACKAGES}")
    try:
        with usb1.USBContext():
            pass
    except OSError as exc:
        pytest.skip(f"the system libusb-1.0 cannot be loaded ({exc}): install {PACKAGES}")
    return tool


@dataclass(frozen=True, slots=True)
class Replay:
    """How a replay ended: the child's exit status, its last ``child:`` line, what it issued, the divergence."""

    returncode: int
    reason: str
    issued: Trace
    divergence: str | None


def _replay(trace: Trace, data_path: Path, folder: Path) -> Replay:
    tool = _umockdev_run()
    files = write_umockdev(trace, folder)
    issued_path = folder / "issued.hiltrace.jsonl"
    command = [tool, *files.argv(), "--", sys.executable, str(CHILD), str(data_path), str(issued_path),
               str(trace.header.options["revision"])]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=REPLAY_TIMEOUT_S, check=False)
    reasons = [line for line in result.stderr.splitlines() if line.startswith("child: ")]
    issued = load_trace(issued_path)  # the child writes it however the run ends
    return Replay(result.returncode, reasons[-1] if reasons else "", issued, first_divergence(trace, issued))


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trace, Path]:
    """A two-chunk copyin and a copyout recorded on MOCKUSB+AMD, and the file of the bytes copied."""
    _umockdev_run()  # skip before recording what cannot be replayed here
    folder = tmp_path_factory.mktemp("umockdev")
    data = np.random.default_rng(18).integers(0, 256, SIZE, dtype=np.uint8)
    data_path = folder / "data.bin"
    data.tofile(data_path)
    path = folder / "copy.hiltrace.jsonl"
    with tinyhil.open_target("MOCKUSB+AMD", record=str(path), revision=REVISION) as device:
        buf = device.alloc(data.nbytes)
        device.copyin(buf, data)
        assert bytes(device.copyout(buf)) == data.tobytes()
    return load_trace(path), data_path


def _bulk_lengths(trace: Trace, endpoint: int) -> list[int]:
    return [r.length for r in trace.records if r.op in (Op.BULK, Op.SUBMIT) and getattr(r, "ep", None) == endpoint]


def _copyout_at(trace: Trace) -> int:
    """The index of the copyout's bulk IN (the gfx1100 boot before it reads registers with short bulk INs)."""
    return next(i for i, r in enumerate(trace.records) if getattr(r, "ep", None) == BULK_IN_EP and r.length == SIZE)


# --- through umockdev ---------------------------------------------------------------------------------------------
def test_a_recorded_copyin_and_copyout_replay_through_the_real_usb_stack(
    recording: tuple[Trace, Path], tmp_path: Path
) -> None:
    trace, data_path = recording
    data = np.fromfile(data_path, dtype=np.uint8)
    outs = [r for r in trace.records if getattr(r, "ep", None) == BULK_OUT_EP and r.data]
    assert len([r for r in outs if r.data[:4096] == data[:4096].tobytes()]) == 1  # the full chunk
    assert _bulk_lengths(trace, BULK_IN_EP).count(SIZE) == 1  # the copyout, after the boot's register reads
    replay = _replay(trace, data_path, tmp_path)
    assert (replay.returncode, replay.reason, replay.divergence) == (0, "", None)
    # Discovery asked the device its configuration (1, from sysfs) and did not select it again, under umockdev as on
    # the emulated board that made the recording: the same open sequence on both.
    host_ops = [(r.op, r.ret) for r in replay.issued.records if isinstance(r, HostCall)]
    assert host_ops[:2] == [(Op.GET_CONFIGURATION, BRIDGE_CONFIGURATION), (Op.CLAIM, None)]
    assert Op.SET_CONFIGURATION not in {op for op, _ in host_ops}
    assert [(r.op, r.ret) for r in trace.records if isinstance(r, HostCall)][:2] == host_ops[:2]


def test_one_changed_reply_byte_fails_fast_and_names_the_first_divergence(
    recording: tuple[Trace, Path], tmp_path: Path
) -> None:
    trace, data_path = recording
    records = list(trace.records)
    # The first reply: XDATA 0xB450, the PCIe link state (0x78 when the link is up). Flipped, the driver asks again.
    at, first_in = next((i, r) for i, r in enumerate(records) if isinstance(r, Transfer) and r.is_in and r.data)
    records[at] = dataclasses.replace(first_in, data=bytes([first_in.data[0] ^ 0xFF]))
    replay = _replay(Trace(trace.header, tuple(records)), data_path, tmp_path)
    assert replay.returncode == 1 and replay.reason == "child: USBErrorTimeout: LIBUSB_ERROR_TIMEOUT [-7]"
    assert replay.divergence is not None
    head, recorded, issued = replay.divergence.splitlines()
    assert head.endswith(f"the client issued another request than record seq {first_in.seq + 1}")
    assert "XDATA_READ" in issued and "wValue=0xb450" in issued and issued.endswith("TIMED_OUT actual=0")
    assert "TLP" in recorded


def test_a_truncated_recording_fails_instead_of_hanging(recording: tuple[Trace, Path], tmp_path: Path) -> None:
    trace, data_path = recording
    cut = _copyout_at(trace)
    replay = _replay(Trace(trace.header, trace.records[:cut]), data_path, tmp_path)
    assert replay.returncode == 1 and replay.reason == "child: USBErrorTimeout: LIBUSB_ERROR_TIMEOUT [-7]"
    assert replay.divergence is not None
    assert "exchanges more than the" in replay.divergence
    assert replay.divergence.endswith(f"the first: bulk IN ep={BULK_IN_EP:#04x} length={SIZE} -> TIMED_OUT actual=0")


# --- without umockdev ---------------------------------------------------------------------------------------------
DEVICE = {"vendor_id": 0xADD1, "product_id": 0x0001, "serial": "S1", "bus": 2, "address": 7, "speed": 5,
          "product": "custom ASM2464", "manufacturer": "tinyhil"}  # fmt: skip
HEADER = TraceHeader(
    target="MOCKUSB+AMD",
    options={"revision": REVISION},
    device=DEVICE,
    descriptors={"configuration": 1, "interface": 0, "endpoints": [BULK_OUT_EP, BULK_IN_EP]},
)


def _walk(blob: bytes) -> list[bytes]:
    """The descriptors of ``blob``, each cut at its own bLength (which must fit)."""
    out = []
    while blob:
        length = blob[0]
        assert 2 <= length <= len(blob), blob.hex()
        out.append(blob[:length])
        blob = blob[length:]
    return out


def test_the_descriptors_describe_the_bridge_the_real_transport_looks_for() -> None:
    device, config, interface, *endpoints = _walk(usb_descriptors(HEADER))
    assert (device[0], device[1]) == (18, 1)
    bcd_usb, vendor, product = struct.unpack_from("<H", device, 2)[0], *struct.unpack_from("<HH", device, 8)
    assert bcd_usb == 0x0320 and (vendor, product) in BRIDGE_VID_PIDS and device[17] == 1  # one configuration
    total, interfaces, value = struct.unpack_from("<HBB", config, 2)
    assert config[1] == 2 and total == len(usb_descriptors(HEADER)) - 18
    assert (interfaces, value) == (1, BRIDGE_CONFIGURATION)
    assert (interface[1], interface[2], interface[4], interface[5]) == (4, BRIDGE_INTERFACE, 2, 0xFF)
    # Each bulk endpoint (1024-byte packets at SuperSpeed) is followed by its SuperSpeed companion.
    assert [(d[1], d[2], d[3], struct.unpack_from("<H", d, 4)[0]) for d in endpoints[::2]] == [
        (5, BULK_OUT_EP, 2, 1024), (5, BULK_IN_EP, 2, 1024)]  # fmt: skip
    assert [(d[0], d[1]) for d in endpoints[1::2]] == [(6, 0x30), (6, 0x30)]
    high_speed = dataclasses.replace(HEADER, device={**HEADER.device, "speed": 3})
    assert [d[1] for d in _walk(usb_descriptors(high_speed))][3:] == [5, 5]  # no companions below SuperSpeed


def test_the_description_gives_sysfs_and_the_node_in_uppercase_hex() -> None:
    text, sysfs = umockdev_description(HEADER)
    lines = text.splitlines()
    assert sysfs == "/sys/devices/pci0000:00/0000:00:14.0/usb2/2-7" and lines[0] == f"P: {sysfs[4:]}"
    assert lines[1] == f"N: bus/usb/002/007={usb_descriptors(HEADER).hex().upper()}"
    for attribute in ("bConfigurationValue=1", "busnum=2", "devnum=7", "idVendor=add1", "idProduct=0001",
                      "product=custom ASM2464", "serial=S1", "speed=10000"):  # fmt: skip
        assert f"A: {attribute}" in lines
    with pytest.raises(TraceFormatError, match=r"device.vendor_id=None, expected the recorded device's id"):
        umockdev_description(TraceHeader())


INJECTED = "evil\nN: bus/usb/009/009=00\nL: x\x1b[2J"


def test_header_strings_cannot_add_lines_to_the_device_file(tmp_path: Path) -> None:
    """A product string with newlines (issue 26) is one hex attribute; umockdev reads back exactly its bytes."""
    header = dataclasses.replace(HEADER, device={**HEADER.device, "product": INJECTED})
    text, sysfs = umockdev_description(header)
    lines = text.splitlines()
    assert [line[:2] for line in lines].count("N:") == 1 and not any(line.startswith("L:") for line in lines)
    assert f"H: product={INJECTED.encode().hex().upper()}" in lines and "A: serial=S1" in lines
    description = tmp_path / "dev.umockdev"
    description.write_text(text)
    done = subprocess.run([_umockdev_run(), "-d", str(description), "--", "cat", f"{sysfs}/product"],
                          capture_output=True, timeout=60, check=True)  # fmt: skip
    assert done.stdout == INJECTED.encode()


def test_a_string_no_descriptor_can_hold_is_refused_with_a_typed_error() -> None:
    with pytest.raises(TraceFormatError, match=r"field 'device.product': a string of 200 characters, expected at most"):
        dataclasses.replace(HEADER, device={**HEADER.device, "product": "p" * 200})


def _control_in(seq: int, value: int, reply: bytes) -> Transfer:
    return Transfer(seq, 0, 0, Op.CONTROL, 0, len(reply), reply, 1000, 0xC0, 0xE4, value, 0, ret=len(reply))


def _bulk_out(seq: int, payload: bytes) -> Transfer:
    return Transfer(seq, 0, 0, Op.BULK, BULK_OUT_EP, len(payload), payload, 1000, ret=len(payload))


def test_the_capture_answers_discovery_string_reads_before_the_recording() -> None:
    trace = Trace(HEADER, (_control_in(0, 0xB450, b"\x78"),))
    served = umockdev_trace(trace)
    assert served.records[-1] == dataclasses.replace(trace.records[0], seq=len(served.records) - 1)
    reads = served.records[:-1]
    assert {(r.bmRequestType, r.bRequest) for r in reads} == {(0x80, 0x06)}  # GET_DESCRIPTOR
    product = next(r for r in reads if isinstance(r, Transfer) and r.wValue == 0x0302)
    assert bytes(product.data) == bytes([2 + 2 * 14, 3]) + "custom ASM2464".encode("utf-16-le")


def test_a_transfer_longer_than_a_libpcap_packet_is_refused_naming_the_record(tmp_path: Path) -> None:
    trace = Trace(HEADER, (_bulk_out(0, bytes(16)), _bulk_out(1, bytes(MAX_TRANSFER_BYTES + 1))))
    with pytest.raises(InvalidArgument, match=r"record seq 1: a transfer of 0x3ffc1 bytes, expected at most 0x3ffc0"):
        write_umockdev(trace, tmp_path)
    write_umockdev(Trace(HEADER, (_bulk_out(0, bytes(MAX_TRANSFER_BYTES)),)), tmp_path)  # the largest that fits


RECORDED = (_bulk_out(0, b"\x01\x02\x03\x04"), _control_in(1, 0xB450, b"\x78"), _bulk_out(2, b"\x05\x06"))
DIVERGENCES: list[tuple[str, tuple[Any, ...], str | None]] = [
    ("the same", RECORDED, None),
    ("one OUT byte changed", (_bulk_out(0, b"\x01\x02\xff\x04"), *RECORDED[1:]),
     "exchange 1: the client issued another request than record seq 0; data differs first at byte 0x2: expected "
     "0x03, actual 0xff"),
    ("writes reordered", (RECORDED[2], RECORDED[1], RECORDED[0]),
     "exchange 1: the client issued another request than record seq 0; data differs first at byte 0x0: expected "
     "0x01, actual 0x05"),
    ("another reply", (RECORDED[0], _control_in(1, 0xB450, b"\x00"), RECORDED[2]),
     "exchange 2 (control IN bmRequestType=0xc0 bRequest=0xe4 (XDATA_READ) wValue=0xb450 wIndex=0x0000 length=1): "
     "the client got another answer than record seq 1; data differs first at byte 0x0: expected 0x78, actual 0x00"),
    ("stopped early", RECORDED[:2],
     "the client issued 2 of 3 recorded exchanges; the first never issued is record seq 2: bulk OUT ep=0x02 "
     "length=2 data=0506"),
    ("went on", (*RECORDED, _bulk_out(3, b"\x07")),
     "the client issued 1 exchanges more than the 3 recorded; the first: bulk OUT ep=0x02 length=1 data=07 -> "
     "COMPLETED actual=1"),
]  # fmt: skip


@pytest.mark.parametrize(("issued", "expected"), [case[1:] for case in DIVERGENCES], ids=[c[0] for c in DIVERGENCES])
def test_the_first_divergence_is_named(issued: tuple[Any, ...], expected: str | None) -> None:
    divergence = first_divergence(Trace(HEADER, RECORDED), Trace(HEADER, issued))
    assert divergence is None if expected is None else divergence.splitlines()[0] == expected


def test_configuration_calls_are_not_compared_nor_claims_against_a_capture() -> None:
    """Selecting configuration 1 (emulated discovery) and asking for it (the real one) are the same start; a usbmon
    capture cannot hold a claim, so against one the client's claim is not compared either."""
    emulated = Trace(HEADER, (HostCall(0, 0, 0, Op.SET_CONFIGURATION, 1), *_after(1, RECORDED)))
    real = Trace(HEADER, (HostCall(0, 0, 0, Op.GET_CONFIGURATION, ret=1), *_after(1, RECORDED)))
    assert first_divergence(emulated, real) is None
    claimed = Trace(HEADER, (*real.records[:1], HostCall(1, 0, 0, Op.CLAIM, 0), *_after(2, RECORDED)))
    divergence = first_divergence(emulated, claimed)
    assert divergence is not None
    recorded, issued = divergence.splitlines()[1:]
    assert (recorded, issued) == ("  recorded: bulk OUT ep=0x02 length=4 data=01020304",
                                  "  issued:   claim(0) -> COMPLETED actual=0")  # fmt: skip
    capture = Trace(dataclasses.replace(HEADER, host_ops=False), emulated.records)
    assert first_divergence(capture, claimed) is None


def _after(first: int, records: tuple[Any, ...]) -> list[Any]:
    return [dataclasses.replace(record, seq=record.seq + first) for record in records]


# --- what the real path's discovery had to learn for this (tinyhil/usb/backend.py) -------------------------------
class _BoardHandle(ScriptedHandle):  # type: ignore[misc]  # the scripted stand-in is untyped
    """A bridge's handle that reports ``configuration`` and, unless ``driver`` is None, answers
    ``kernelDriverActive`` with it (an exception: the host cannot tell)."""

    def __init__(self, configuration: int, driver: bool | BaseException | None) -> None:
        super().__init__()
        self.configuration, self.driver = configuration, driver

    def getProduct(self) -> str:
        return "custom ASM2464"

    def getConfiguration(self) -> int:
        self.events.append(("get_configuration", self.configuration))
        return self.configuration

    def setConfiguration(self, value: int) -> None:
        self.events.append(("set_configuration", value))

    def setAutoDetachKernelDriver(self, enable: bool) -> None:
        self.events.append(("auto_detach", enable))

    def __getattr__(self, name: str) -> Any:
        if name != "kernelDriverActive" or self.driver is None:
            raise AttributeError(name)
        return self._driver_active

    def _driver_active(self, interface: int) -> bool:
        assert interface == BRIDGE_INTERFACE
        if isinstance(self.driver, BaseException):
            raise self.driver
        return bool(self.driver)


class _Board:
    """A bridge as ``usb1.USBDevice`` shows it, opening :attr:`handle`."""

    def __init__(self, handle: _BoardHandle) -> None:
        self.handle = handle

    def getVendorID(self) -> int:
        return int(BRIDGE_VID_PIDS[0][0])

    def getProductID(self) -> int:
        return int(BRIDGE_VID_PIDS[0][1])

    def getBusNumber(self) -> int:
        return 2

    def getDeviceAddress(self) -> int:
        return 7

    def open(self) -> _BoardHandle:
        return self.handle

    def close(self) -> None:
        pass


class _Bus:
    """An unopened ``usb1.USBContext``-like bus holding one board."""

    def __init__(self, board: _Board) -> None:
        self.board = board

    def open(self) -> _Bus:
        return self

    def close(self) -> None:
        pass

    def getDeviceIterator(self, skip_on_error: bool = False) -> Any:
        return iter([self.board])

    def handleEventsTimeout(self, tv: float = 0) -> None:
        pass


DISCOVERIES = [
    # configuration, driver bound?, what discovery does before the claim
    (1, False, [("get_configuration", 1)]),  # enumerated and configured by the host: nothing to select again
    (0, False, [("get_configuration", 0), ("set_configuration", 1)]),  # unconfigured: select configuration 1
    (1, True, [("auto_detach", True), ("get_configuration", 1)]),  # a kernel driver on interface 0: detach at claim
    (1, usb1.USBErrorOther(usb1.ERROR_OTHER), [("get_configuration", 1)]),  # umockdev cannot tell: claim tells
    (1, usb1.USBErrorNotSupported(usb1.ERROR_NOT_SUPPORTED), [("get_configuration", 1)]),  # macOS, Windows
    (1, None, [("auto_detach", True), ("get_configuration", 1)]),  # no kernelDriverActive: detach where it can
]


@pytest.mark.parametrize(("configuration", "driver", "expected"), DISCOVERIES)
def test_the_real_discovery_keeps_the_hosts_configuration_and_detaches_only_a_bound_driver(
    configuration: int, driver: bool | BaseException | None, expected: list[tuple[str, Any]]
) -> None:
    board = _Board(_BoardHandle(configuration, driver))
    transport = open_usb3(context=_Bus(board))
    assert board.handle.events == [*expected, ("claim", BRIDGE_INTERFACE)]
    transport.close()
