"""Opening MOCKUSB+AMD with the gfx1100 boot versus opening it on the emulator's own BAR5 layout, side by side.

Both open the same device runtime (``UsbAmdDevice`` over a fresh ``MockUSB3``: bridge, PCIe bring-up, the copy
queue and the runtime queues) and close it; the gfx1100 one also runs the whole bring-up of
``spec/amdgpu-registers.md`` section 11 (discovery, PSP bootloader and ring, firmware, SMU, GFX/MEC, SDMA, clocks,
page tables). Prints the best-of-``repeat`` seconds of each, their ratio, and the boot's register accesses and SMU
messages (counts, which the machine cannot blur). Issue 19 requires the gfx1100 open to stay well under 1 s.

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
from tinyhil.usbgpu.amd_device import UsbAmdDevice

REQUIRED_OPEN_S = 1.0


class _Counts(Observer):
    def __init__(self) -> None:
        self.accesses = 0
        self.smu_messages = 0

    def gpu_register(self, address: int, value: int, write: bool) -> None:
        self.accesses += 1
        self.smu_messages += write and address == Reg.MP1_SMN_C2PMSG_66


def open_once(interface: str) -> float:
    """Seconds to open (and close) a fresh MOCKUSB+AMD device with ``interface``."""
    start = time.perf_counter()
    usb = MockUSB3(interface=interface)
    UsbAmdDevice("bench", usb, firmware=GeneratedFirmware(), on_close=usb.close).close()
    return time.perf_counter() - start


def boot_counts() -> _Counts:
    """Register accesses and SMU messages of one cold gfx1100 boot (device open and close included)."""
    usb = MockUSB3(interface="gfx1100")
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
    bar5 = gfx1100 = float("inf")
    for _ in range(args.repeat):  # interleaved, so both see the same machine
        bar5 = min(bar5, open_once("bar5"))
        gfx1100 = min(gfx1100, open_once("gfx1100"))
    counts = boot_counts()
    print(f"open MOCKUSB+AMD (bar5 layout, no boot): {bar5 * 1000:.1f} ms")
    print(f"open MOCKUSB+AMD (gfx1100, full boot):   {gfx1100 * 1000:.1f} ms  ratio {gfx1100 / bar5:.2f}x")
    print(f"gfx1100 boot: {counts.accesses} register accesses, {counts.smu_messages} SMU messages")
    verdict = "ok" if gfx1100 < REQUIRED_OPEN_S else "TOO SLOW"
    print(f"required: gfx1100 open < {REQUIRED_OPEN_S} s: {verdict}")
    return 0 if gfx1100 < REQUIRED_OPEN_S else 1


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
