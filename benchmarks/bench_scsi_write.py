"""``Asm2464Controller.scsi_write`` through MockUSB3 versus a plain numpy copy of the same bytes, side by side.

Sync mode: 256 KB wire images go into alternating SRAM windows (``slot_start`` 0 and 16) through the whole driver
path (the ASM2464 client, the USB3 transport, the emulated usb1 handle, the bridge emulator); the baseline copies
the same images into a 512 KB numpy array the same way. Prints the throughput ratio (mock / copy). The goal
is >= 0.4 over 64 MB (docs/performance.md).

Usage: python benchmarks/bench_scsi_write.py [--total-mb 64] [--repeat 5]
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from types import ModuleType

from tinyhil.asm2464 import Asm2464Controller
from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.asm2464 import WINDOW_BYTES, WINDOW_SLOTS


def _sibling(name: str) -> ModuleType:
    """Load a benchmark script beside this one (benchmarks/ is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The same wire images, numpy baseline, comparison and options as the handle-level benchmark, so the ratios compare.
_windows = _sibling("bench_usb3_windows")
assert _windows.CHUNK == WINDOW_BYTES
bench_copy = _windows.bench_copy
REQUIRED_RATIO = _windows.REQUIRED_RATIO


def bench_mock(images: list[bytes]) -> float:
    """Seconds to ``scsi_write`` every image into alternating windows through MockUSB3."""
    with MockUSB3.over(Asm2464(function=PlainEndpoint(vram_bytes=1 << 20))) as usb:
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
    return _windows.compare(bench_mock, total_mb, repeat, label="scsi_write of ", mock_name="MockUSB3")


def main() -> None:
    args = _windows.parse_args(__doc__, repeat=5)
    run(args.total_mb, args.repeat)


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
