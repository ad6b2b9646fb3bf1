"""Issue 14 item 3 end to end over MockUSB3: each bad call fails with its typed error (a usb1 class on the USB seam,
InvalidArgument above it) before any request goes out, leaves the emulator exactly as it was, and a valid follow-up
then lands the right bytes (a transfer left in flight would take the next arm and land stale bytes instead)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import usb1

from tinyhil.asm2464 import Asm2464Controller
from tinyhil.emulators.asm2464 import WAIT_CAP_NS, Asm2464
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.errors import InvalidArgument
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.asm2464 import SECTOR_BYTES, Request
from tinyhil.usb import MAX_TIMEOUT_MS

BEYOND_CAP_MS = 3 * 3600 * 1000  # 3 h: inside libusb's 32 bits, beyond the 2-hour virtual wait cap
STALE = b"\x11" * SECTOR_BYTES


def _handle(usb: MockUSB3) -> Any:
    return usb._handle


def _async_bulk(usb: MockUSB3, endpoint: int, buffer_or_len: Any, timeout: int) -> None:
    transfer = _handle(usb).getTransfer()
    transfer.setBulk(endpoint, buffer_or_len, timeout=timeout)
    transfer.submit()


# (what, call, typed error): the usb1-level calls go straight to the emulated handle (the transport would refuse a
# timeout beyond MAX_TIMEOUT_MS itself, with InvalidArgument); the rest go through the transport and the client.
BAD_CALLS: list[tuple[str, Callable[[MockUSB3], Any], type[BaseException]]] = [
    (
        "usb1 bulkWrite, timeout 3 h",
        lambda usb: _handle(usb).bulkWrite(0x02, STALE, BEYOND_CAP_MS),
        usb1.USBErrorInvalidParam,
    ),
    (
        "usb1 bulkRead, timeout 2**32-1 ms",
        lambda usb: _handle(usb).bulkRead(0x81, 512, 0xFFFF_FFFF),
        usb1.USBErrorInvalidParam,
    ),
    (
        "usb1 controlWrite, timeout 3 h",
        lambda usb: _handle(usb).controlWrite(0x40, Request.SRAM_ARM, 1, 0, b"", BEYOND_CAP_MS),
        usb1.USBErrorInvalidParam,
    ),
    ("usb1 setBulk, timeout 3 h", lambda usb: _async_bulk(usb, 0x02, STALE, BEYOND_CAP_MS), usb1.USBErrorInvalidParam),
    (
        "usb1 controlWrite, data None",
        lambda usb: _handle(usb).controlWrite(0x40, Request.SRAM_ARM, 1, 0, None),
        TypeError,
    ),
    ("transport bulk_write, timeout 3 h", lambda usb: usb.bulk_write(STALE, BEYOND_CAP_MS), InvalidArgument),
    ("transport bulk_write_async, 3 h", lambda usb: usb.bulk_write_async(STALE, BEYOND_CAP_MS), InvalidArgument),
    ("scsi_write, timeout 1.5", lambda usb: Asm2464Controller(usb).scsi_write(STALE, timeout=1.5), InvalidArgument),
    (
        "scsi_write, timeout 3 h",
        lambda usb: Asm2464Controller(usb).scsi_write(STALE, timeout=BEYOND_CAP_MS),
        InvalidArgument,
    ),
    ("scsi_read, timeout 1.5", lambda usb: Asm2464Controller(usb).scsi_read(512, timeout=1.5), InvalidArgument),
    (
        "scsi_read_into, timeout 0",
        lambda usb: Asm2464Controller(usb).scsi_read_into(bytearray(512), timeout=0),
        InvalidArgument,
    ),
    ("pcie_mem_read of 1 << 40 bytes", lambda usb: Asm2464Controller(usb).pcie_mem_read(0, 1 << 40), InvalidArgument),
    ("pcie_mem_read of 1 << 62 bytes", lambda usb: Asm2464Controller(usb).pcie_mem_read(0, 1 << 62), InvalidArgument),
    (
        "wait_pcie_link, poll 1 ns",
        lambda usb: Asm2464Controller(usb).wait_pcie_link(timeout_s=1.0, poll_s=1e-9),
        InvalidArgument,
    ),
]


@pytest.mark.parametrize("mode", ["sync", "timed"])
@pytest.mark.parametrize(("what", "call", "error"), BAD_CALLS, ids=[row[0] for row in BAD_CALLS])
def test_a_bad_call_is_refused_up_front_changes_nothing_and_the_next_scsi_write_lands(
    mode: str, what: str, call: Callable[[MockUSB3], Any], error: type[BaseException]
) -> None:
    with MockUSB3.over(Asm2464(function=PlainEndpoint(vram_bytes=1 << 20)), mode=mode) as usb:
        usb.control_write(Request.PCIE_POWER, 1)
        before, start_ns = usb.bridge.state_digest(), usb.kernel.now_ns
        with pytest.raises(error):
            call(usb)
        assert usb.bridge.state_digest() == before, f"{what}: the rejected call changed the emulator"
        assert usb.kernel.now_ns == start_ns, f"{what}: refused up front, no virtual time passes"
        assert usb.in_flight == () and not _handle(usb)._inflight
        fresh = np.random.default_rng(1).integers(0, 256, 3 * SECTOR_BYTES, dtype=np.uint8).tobytes()
        Asm2464Controller(usb).scsi_write(fresh)
        assert usb.bridge.read_sram(0, len(fresh)) == fresh, f"{what}: the follow-up landed other bytes"


def test_the_longest_timeout_the_transport_takes_is_the_wait_cap_and_ends_as_usb1_timeout() -> None:
    """An unpaired bulk OUT with the longest timeout times out (usb1.USBErrorTimeout) after 2 virtual hours, and
    takes no later arm with it."""
    with MockUSB3.over(Asm2464(function=PlainEndpoint(vram_bytes=1 << 20))) as usb:
        start_ns = usb.kernel.now_ns
        with pytest.raises(usb1.USBErrorTimeout):
            usb.bulk_write(STALE, MAX_TIMEOUT_MS)
        assert usb.kernel.now_ns - start_ns >= WAIT_CAP_NS
        fresh = b"\x22" * SECTOR_BYTES
        Asm2464Controller(usb).scsi_write(fresh)
        assert usb.bridge.read_sram(0, SECTOR_BYTES) == fresh
