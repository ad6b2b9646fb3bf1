"""``Asm2464Controller.scsi_write`` through MockUSB3 versus a plain numpy copy of the same bytes, side by side.

Sync mode: 256 KB wire images go into alternating SRAM windows (``slot_start`` 0 and 16) through the whole driver
path (the ASM2464 client, the USB3 transport, the emulated usb1 handle, the bridge emulator); the baseline copies
the same images into a 512 KB numpy array the same way. Prints the throughput ratio (mock / copy). Issue 3
requires >= 0.4 over 64 MB.

Usage: python benchmarks/bench_scsi_write.py [--total-mb 64] [--repeat 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path
from types import ModuleType

from tinyhil.asm2464 import Asm2464Controller
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.asm2464 import WINDOW_BYTES, WINDOW_SLOTS

REQUIRED_RATIO = 0.4


def _sibling(name: str) -> ModuleType:
    """Load a benchmark script beside this one (benchmarks/ is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The same wire images and the same numpy baseline as the handle-level benchmark, so the two ratios compare.
_windows = _sibling("bench_usb3_windows")
assert _windows.CHUNK == WINDOW_BYTES
_images = _windows._chunks
bench_copy = _windows.bench_copy


def bench_mock(images: list[bytes]) -> float:
    """Seconds to ``scsi_write`` every image into alternating windows through MockUSB3."""
    with MockUSB3(function=PlainEndpoint(vram_bytes=1 << 20)) as usb:
        controller = Asm2464Controller(usb)
        start = time.perf_counter()
        for seq, image in enumerate(images):
            controller.scsi_write(image, (seq & 1) * WINDOW_SLOTS)
        elapsed = time.perf_counter() - start
        last = len(images) - 1
        assert usb.bridge.read_sram((last & 1) * WINDOW_BYTES, WINDOW_BYTES) == images[last], "the mock lost bytes"
    return elapsed


def run(total_mb: int = 64, repeat: int = 5) -> float:
    """Best-of-``repeat`` timings of both, interleaved; returns and prints mock throughput / copy throughput."""
    images = _images(total_mb << 20)
    mock_s = copy_s = float("inf")
    for _ in range(repeat):
        mock_s = min(mock_s, bench_mock(images))
        copy_s = min(copy_s, bench_copy(images))
    total = len(images) * WINDOW_BYTES
    ratio = copy_s / mock_s
    print(
        f"scsi_write of {total >> 20} MB in {len(images)} windows: MockUSB3 {total / mock_s / 1e6:.0f} MB/s, "
        f"numpy copy {total / copy_s / 1e6:.0f} MB/s, ratio {ratio:.2f} (required >= {REQUIRED_RATIO})"
    )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mb", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    run(args.total_mb, args.repeat)


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
