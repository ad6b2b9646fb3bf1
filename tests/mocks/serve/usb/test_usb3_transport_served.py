"""tinyhil's own real USB backend (``usb1`` on libusb) on the served board does what MockUSB3 does in-process: the
gfx1100 bring-up, a pipelined copyin and a copyout give the same bytes and end at the same virtual time."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinyhil.builtin_targets import usb_firmware_reason
from tinyhil.mocks.serve.usb import UsbTestbed, served_board, umockdev_unavailable_reason
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.usbgpu.over_usb import UsbAmdDevice

CLIENT = Path(__file__).with_name("usb_amd_client.py")
NBYTES = 1 << 20
SEED = 1
_CHILD_TIMEOUT_S = 300

_unavailable = umockdev_unavailable_reason() or usb_firmware_reason()
pytestmark = pytest.mark.skipif(_unavailable is not None, reason=_unavailable or "")


def _in_process(mode: str) -> tuple[str, int]:
    """What usb_amd_client.py does, on MockUSB3 in this process: the bytes read back (SHA-256) and the end time."""
    data = np.random.default_rng(SEED).integers(0, 256, NBYTES, dtype=np.uint8)
    usb = MockUSB3(mode=mode)
    with UsbAmdDevice("USB+AMD", usb, revision="pipelined", on_close=usb.close) as device:
        buf = device.alloc(NBYTES)
        device.copyin(buf, data)
        out = np.zeros_like(data)
        device.copyout_into(buf, out)
        device.synchronize()
    return hashlib.sha256(out).hexdigest(), usb.kernel.now_ns


@pytest.mark.parametrize("mode", ["sync", "timed"])
def test_the_real_usb_backend_on_the_served_board_matches_mockusb3_in_process(mode: str) -> None:
    board = served_board("MOCKUSB+AMD", [f"mode={mode}"])
    with UsbTestbed(board) as testbed:
        done = subprocess.run(testbed.argv([sys.executable, str(CLIENT), str(NBYTES), str(SEED)]), env=testbed.env(),
                              capture_output=True, text=True, timeout=_CHILD_TIMEOUT_S, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    served = json.loads(done.stdout.splitlines()[-1])
    back, end_ns = _in_process(mode)
    assert served["back"] == served["sent"] == back
    assert board.bridge.kernel.now_ns == end_ns
