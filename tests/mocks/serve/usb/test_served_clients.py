"""Foreign libusb clients (lsusb, a C program built here) on the emulated bridge served through umockdev."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import usb1

from tinyhil.cli import main
from tinyhil.mocks.serve.usb import UsbTestbed, served_board, umockdev_unavailable_reason
from tinyhil.mocks.serve.usb.descriptors import describe_board
from tinyhil.spec.asm2464 import BULK_IN_EP, BULK_OUT_EP, SECTOR_BYTES, Request, Xdata
from tinyhil.trace.convert import load_trace
from tinyhil.trace.records import Complete, Op, Submit, TransferStatus

TARGET = "MOCKUSB+AMD"
CLIENT_SOURCE = Path(__file__).with_name("libusb_client.c")
_ARM_DEVICE_TO_HOST = 0x8000  # 0xF2 wValue bit 15 (docs/asm2464.md "Vendor requests")
_VENDOR_OUT = 0x40
_CLIENT_TIMEOUT_S = 60

_unavailable = umockdev_unavailable_reason()
pytestmark = pytest.mark.skipif(_unavailable is not None, reason=_unavailable or "")


def _lines(output: str) -> dict[str, dict[str, str]]:
    """``name key=value ...`` lines as ``{name: {key: value}}``."""
    results = {}
    for line in output.splitlines():
        name, *fields = line.split()
        results[name] = dict(field.split("=", 1) for field in fields)
    return results


@pytest.fixture(scope="module")
def libusb_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The C client, built with the system compiler against libusb-1.0."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None or shutil.which("pkg-config") is None:
        pytest.skip("no C compiler or pkg-config (Debian gcc, pkg-config)")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libusb-1.0"], capture_output=True, text=True)
    if flags.returncode != 0:
        pytest.skip("libusb-1.0's headers are missing (Debian libusb-1.0-0-dev)")
    binary = tmp_path_factory.mktemp("client") / "libusb_client"
    subprocess.run([compiler, "-O1", "-Wall", "-Werror", "-o", str(binary), str(CLIENT_SOURCE), *flags.stdout.split()],
                   check=True)  # fmt: skip
    return binary


def _run(testbed: UsbTestbed, command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(testbed.argv(command), env=testbed.env(), capture_output=True, text=True,
                          timeout=_CLIENT_TIMEOUT_S, check=False)  # fmt: skip


def test_lsusb_prints_the_bridge_descriptors() -> None:
    if shutil.which("lsusb") is None:
        pytest.skip("lsusb is missing (Debian usbutils)")
    board = served_board(TARGET, [])
    bridge = board.bridge
    with UsbTestbed(board) as testbed:
        done = _run(testbed, ["lsusb", "-v", "-d", f"{bridge.vendor_id:04x}:{bridge.product_id:04x}"])
    assert done.returncode == 0, done.stderr
    text = done.stdout
    described = describe_board(bridge, TARGET)
    assert f"Bus {described.bus:03d} Device {described.address:03d}: ID {bridge.vendor_id:04x}:" in text
    assert re.search(rf"idVendor\s+0x{bridge.vendor_id:04x}", text)
    assert re.search(rf"idProduct\s+0x{bridge.product_id:04x}", text)
    for string in (bridge.manufacturer, bridge.product, bridge.serial):
        assert string in text
    addresses = [int(a, 16) for a in re.findall(r"bEndpointAddress\s+(0x[0-9a-f]+)", text)]
    assert addresses == [BULK_OUT_EP, BULK_IN_EP]


@pytest.mark.parametrize("mode", ["sync", "timed"])
def test_a_c_client_does_a_control_read_a_bulk_write_and_an_async_bulk_read(libusb_client: Path, mode: str) -> None:
    board = served_board(TARGET, [f"mode={mode}"])
    bridge = board.bridge
    # The async bulk IN reads SRAM back; on a board the GPU's completion-queue write releases it: arm and release
    # it here, before the client runs (the bridge is only touched by the server thread while the client runs).
    bridge.vendor_request(_VENDOR_OUT, Request.SRAM_ARM, _ARM_DEVICE_TO_HOST | 1, 0, b"", 0)
    bridge.engine.released = True
    with UsbTestbed(board) as testbed:
        done = _run(testbed, [str(libusb_client), f"{bridge.vendor_id:04x}", f"{bridge.product_id:04x}", "basic"])
        served = testbed.server.requests_served
    assert done.returncode == 0, done.stderr
    results = _lines(done.stdout)
    sram = bridge.read_sram(0, SECTOR_BYTES)
    assert results["claim"]["rc"] == "0" and results["arm_out"]["rc"] == "0"
    assert results["bulk_write"] == {"rc": "0", "transferred": str(SECTOR_BYTES), "data": sram.hex()}
    assert results["control_read"] == {"rc": "4", "data": bridge.read_xdata(Xdata.SRAM_WINDOW, 4).hex()}
    assert results["async_read"] == {"rc": "0", "status": "0", "actual": str(SECTOR_BYTES), "data": sram.hex()}
    assert served > len(results)  # every transfer went through the server (a submit and a reap at least)
    assert bridge.kernel.now_ns > 0  # the transfers took the board's virtual time


def test_fault_plans_reach_the_c_client_as_the_errnos_libusb_maps(libusb_client: Path) -> None:
    xdata_read = {"operation": "control_in", "request": int(Request.XDATA_READ)}
    faults = [{**xdata_read, "occurrence": 1, "fault": "stall"},
              {"operation": "bulk_out", "occurrence": 1, "fault": "timeout"},
              {**xdata_read, "occurrence": 2, "fault": "no_device"}]  # fmt: skip
    board = served_board(TARGET, [f"faults={json.dumps(faults)}"])
    bridge = board.bridge
    with UsbTestbed(board) as testbed:
        done = _run(testbed, [str(libusb_client), f"{bridge.vendor_id:04x}", f"{bridge.product_id:04x}", "errors"])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # a stall is EPIPE, a transfer the device never completes is cancelled by libusb's own timeout, a device that
    # left the bus is ENODEV
    assert lines[1:] == ["control_read rc=LIBUSB_ERROR_PIPE", "arm_out rc=ok",
                         "bulk_write rc=LIBUSB_ERROR_TIMEOUT transferred=0",
                         "control_read rc=LIBUSB_ERROR_NO_DEVICE"]  # fmt: skip
    assert bridge.front.gone


def test_a_babbling_device_reaches_the_c_client_as_libusbs_overflow(libusb_client: Path) -> None:
    faults = [{"operation": "control_in", "request": int(Request.XDATA_READ), "occurrence": 1, "fault": "babble"},
              {"operation": "bulk_in", "occurrence": 1, "fault": "babble"}]  # fmt: skip
    board = served_board(TARGET, [f"faults={json.dumps(faults)}"])
    bridge = board.bridge
    bridge.write_sram(0, bytes(range(256)) * (SECTOR_BYTES // 256))
    bridge.vendor_request(_VENDOR_OUT, Request.SRAM_ARM, _ARM_DEVICE_TO_HOST | 1, 0, b"", 0)  # as in the tests above
    bridge.engine.released = True
    with UsbTestbed(board) as testbed:
        done = _run(testbed, [str(libusb_client), f"{bridge.vendor_id:04x}", f"{bridge.product_id:04x}", "babble"])
    assert done.returncode == 0, done.stderr
    results = _lines(done.stdout)
    # the URBs completed with -EOVERFLOW: libusb's synchronous call returns LIBUSB_ERROR_OVERFLOW, an asynchronous
    # transfer ends LIBUSB_TRANSFER_OVERFLOW with the requested bytes in its buffer; the next request is healthy
    assert results["control_read"] == {"rc": "LIBUSB_ERROR_OVERFLOW"}
    sram = bridge.read_sram(0, SECTOR_BYTES)
    overflow = str(usb1.TRANSFER_OVERFLOW)
    assert results["async_read"] == {"rc": "0", "status": overflow, "actual": str(SECTOR_BYTES), "data": sram.hex()}
    xdata = bridge.read_xdata(Xdata.SRAM_WINDOW, 4).hex()
    assert results["control_read_again"] == {"rc": "ok", "data": xdata}


def test_a_recorded_session_holds_every_request_on_the_boards_clock(libusb_client: Path, tmp_path: Path) -> None:
    path = tmp_path / "served.hiltrace.jsonl"
    board = served_board(TARGET, [f"record={path}"])
    bridge = board.bridge
    bridge.vendor_request(_VENDOR_OUT, Request.SRAM_ARM, _ARM_DEVICE_TO_HOST | 1, 0, b"", 0)  # as in the test above
    bridge.engine.released = True
    with UsbTestbed(board) as testbed:
        done = _run(testbed, [str(libusb_client), f"{bridge.vendor_id:04x}", f"{bridge.product_id:04x}", "basic"])
    assert done.returncode == 0, done.stderr
    trace = load_trace(path)
    assert trace.header.target == TARGET and trace.header.device["vendor_id"] == bridge.vendor_id
    ops = [record.op for record in trace.records]
    assert ops[0] is Op.CLAIM and ops[-1] is Op.RELEASE
    submits = [record for record in trace.records if isinstance(record, Submit)]
    completes = {record.tag: record for record in trace.records if isinstance(record, Complete)}
    assert [(s.ep, s.bRequest) for s in submits] == [(0, Request.SRAM_ARM), (BULK_OUT_EP, None),
                                                     (0, Request.XDATA_READ), (BULK_IN_EP, None)]  # fmt: skip
    sram = bridge.read_sram(0, SECTOR_BYTES)
    assert bytes(submits[1].data) == sram
    assert bytes(completes[submits[2].tag].data) == bridge.read_xdata(Xdata.SRAM_WINDOW, 4)
    assert bytes(completes[submits[3].tag].data) == sram
    assert {c.status for c in completes.values()} == {TransferStatus.COMPLETED}
    times = [record.t_ns for record in trace.records]
    assert times == sorted(times) and times[-1] <= bridge.kernel.now_ns


def test_the_command_line_returns_the_commands_exit_status() -> None:
    script = "import os, sys; sys.exit(3 if os.path.isdir(os.environ['UMOCKDEV_DIR']) else 1)"
    assert main(["serve", "usb", "--option", "seed=1", "--", sys.executable, "-c", script]) == 3
