"""``fill`` on MOCKUSB+AMD and MOCKKFD+AMD against ``ndarray.fill`` of the same bytes, side by side in one run.

    python benchmarks/bench_fill.py [--mb 64] [--repeats 5]

The emulated side is the whole device runtime: ``dev.fill`` of a VRAM buffer submits SDMA CONST_FILL packets, the
emulated GPU's engine runs them on the event kernel, and the fence wait returns. On ``MOCKUSB+AMD`` every fill
address is translated by the VMID 0 page table of the gfx1100 model; on ``MOCKKFD+AMD`` by the KFD process's
mappings. Either way the GPU's address space fills each translated run through a numpy view of its backing, in
place. The numpy side is ``ndarray.fill`` of an array of the same size. Every destination is written once before
timing, so no side pays first-touch page faults; a fill is timed up to its fence (``synchronize``). Each side
is the best of ``--repeats`` interleaved rounds.
The goal is >= 0.8 on both targets (docs/performance.md).
"""

from __future__ import annotations

import argparse
import functools

import numpy as np

from tinyhil.benchtime import best_seconds
from tinyhil.device import Buffer, Device
from tinyhil.registry import open_target

MB = 1 << 20
MIN_RATIO = 0.8
TARGETS = ("MOCKUSB+AMD", "MOCKKFD+AMD")
_VALUE = 0x5A


def _fill(device: Device, buf: Buffer) -> None:
    device.fill(buf, _VALUE)
    device.synchronize()  # the fill is queued work: it has run once the fence is back


def measure(nbytes: int, repeats: int = 5) -> dict[str, float]:
    """Ratios (emulated fill throughput / ``ndarray.fill`` throughput) of ``nbytes``, by target."""
    target = np.zeros(nbytes, np.uint8)  # zeros writes every page: touched before timing
    vram_bytes = max(256 * MB, 1 << (2 * nbytes - 1).bit_length())
    with (
        open_target(TARGETS[0], vram_bytes=vram_bytes) as usb,
        open_target(TARGETS[1], vram_bytes=vram_bytes) as kfd,
    ):
        runs = {"numpy": lambda: target.fill(_VALUE)}
        for name, device in zip(TARGETS, (usb, kfd), strict=True):
            buf = device.alloc(nbytes)
            _fill(device, buf)  # warm-up: commits the VRAM pages
            if device.copyout(buf)[:: max(nbytes // 64, 1)] != bytes([_VALUE]) * min(64, nbytes):
                raise AssertionError(f"{name}: fill left other bytes than {_VALUE:#x}")
            runs[name] = functools.partial(_fill, device, buf)
        seconds = best_seconds(runs, repeats)
    numpy_s = seconds.pop("numpy")
    return {name: numpy_s / elapsed for name, elapsed in seconds.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=64, help="bytes per fill, in MB (default 64)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per side; the best counts (default 5)")
    args = parser.parse_args(argv)
    for name, ratio in measure(args.mb * MB, args.repeats).items():
        verdict = "ok" if ratio >= MIN_RATIO else f"BELOW {MIN_RATIO}"
        print(f"{name} fill {args.mb} MB: {ratio:.2f}x ndarray.fill ({verdict})")
    return 0


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
