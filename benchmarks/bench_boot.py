"""Opening MOCKUSB+AMD: the whole gfx1100 boot, and what it costs in register accesses and SMU messages.

It opens the device runtime (``UsbAmdDevice`` over a fresh ``MockUSB3``: bridge, PCIe bring-up, the whole bring-up
of ``docs/gfx1100.md`` section 11 (discovery, PSP bootloader and ring, firmware, SMU, GFX/MEC, SDMA,
clocks, page tables), the copy queue and the runtime queues) and closes it. Prints the best-of-``repeat`` seconds,
and the boot's register accesses and SMU messages (counts, which the machine cannot blur). The open must stay
well under 1 s (docs/performance.md).

Usage: python benchmarks/bench_boot.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import time

from tinyhil.amdgpu.firmware import GeneratedFirmware
from tinyhil.emulators.amdgpu.gfx1100 import Gfx1100Function
from tinyhil.emulators.observe import Observer
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.gfx1100_regs import Reg
from tinyhil.usbgpu.over_usb import UsbAmdDevice

REQUIRED_OPEN_S = 1.0


class _Counts(Observer):
    def __init__(self) -> None:
        self.accesses = 0
        self.smu_messages = 0

    def gpu_register(self, address: int, value: int, write: bool) -> None:
        self.accesses += 1
        self.smu_messages += write and address == Reg.MP1_SMN_C2PMSG_66


def open_once() -> float:
    """Seconds to open (and close) a fresh MOCKUSB+AMD device."""
    start = time.perf_counter()
    usb = MockUSB3()
    UsbAmdDevice("bench", usb, firmware=GeneratedFirmware(), on_close=usb.close).close()
    return time.perf_counter() - start


def boot_counts() -> _Counts:
    """Register accesses and SMU messages of one cold gfx1100 boot (device open and close included)."""
    usb = MockUSB3()
    function = usb.bridge.function
    assert isinstance(function, Gfx1100Function)
    counts = _Counts()
    with function.front.observe(counts):
        UsbAmdDevice("bench", usb, firmware=GeneratedFirmware(), on_close=usb.close).close()
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    gfx1100 = min(open_once() for _ in range(args.repeat))
    counts = boot_counts()
    print(f"open MOCKUSB+AMD (gfx1100, full boot): {gfx1100 * 1000:.1f} ms (best of {args.repeat})")
    print(f"gfx1100 boot: {counts.accesses} register accesses, {counts.smu_messages} SMU messages")
    verdict = "ok" if gfx1100 < REQUIRED_OPEN_S else "TOO SLOW"
    print(f"required: gfx1100 open < {REQUIRED_OPEN_S} s: {verdict}")
    return 0 if gfx1100 < REQUIRED_OPEN_S else 1


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
