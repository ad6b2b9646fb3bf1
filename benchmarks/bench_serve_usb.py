"""`tinyhil serve usb` versus MockUSB3 in-process: the same usb1 calls on the same emulated board, side by side.

    python benchmarks/bench_serve_usb.py [--rounds 2000] [--total-mb 64] [--repeat 3]

Both sides run one workload through a ``usb1`` handle: ``--rounds`` 4-byte control reads (0xE4, XDATA), then
``--total-mb`` of 256 KB bulk writes, each after its 0xF2 arm (the copyin's window writes). In-process, the handle is
the emulated usb1 stack (:mod:`tinyhil.mocks.usb`, what MockUSB3 runs on); served, it is the real ``usb1`` on libusb
in a child process under umockdev's preload, each request crossing umockdev's socket to the server in this process
(docs/serve.md). Prints control round trips per second and bulk MB/s of each and their ratio (served / in-process);
each side is the best of ``--repeat`` interleaved rounds. Absolute numbers are machine noise; the ratio is the cost
of the operating-system path.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tinyhil.mocks.serve.usb import UsbTestbed, served_board
from tinyhil.mocks.usb import open_emulated_board
from tinyhil.spec.asm2464 import BULK_OUT_EP, SECTOR_BYTES, Request, Xdata

CHUNK = 0x40000  # one 256 KB window: 16 slots of 16 KB
SLOTS_PER_WINDOW = 16
VENDOR_OUT, VENDOR_IN = 0x40, 0xC0
CONTROL_BYTES = 4
TIMEOUT_MS = 1000
TARGET = "MOCKUSB+AMD"


def workload(handle: Any, rounds: int, chunks: list[bytes]) -> dict[str, float]:
    """Seconds for ``rounds`` 4-byte control reads and for arming and bulk-writing every chunk, on ``handle``."""
    start = time.perf_counter()
    for _ in range(rounds):
        handle.controlRead(VENDOR_IN, Request.XDATA_READ, Xdata.SRAM_WINDOW, 0, CONTROL_BYTES, TIMEOUT_MS)
    control_s = time.perf_counter() - start
    start = time.perf_counter()
    for seq, chunk in enumerate(chunks):
        window = (seq & 1) * SLOTS_PER_WINDOW
        handle.controlWrite(VENDOR_OUT, Request.SRAM_ARM, CHUNK // SECTOR_BYTES, window | SLOTS_PER_WINDOW << 8, b"",
                            TIMEOUT_MS)  # fmt: skip
        handle.bulkWrite(BULK_OUT_EP, chunk, TIMEOUT_MS)
    return {"control_s": control_s, "bulk_s": time.perf_counter() - start}


def _chunks(total_mb: int) -> list[bytes]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, 256, CHUNK, dtype=np.uint8).tobytes() for _ in range((total_mb << 20) // CHUNK)]


def in_process(rounds: int, total_mb: int) -> dict[str, float]:
    """The workload on the emulated usb1 stack in this process."""
    with open_emulated_board() as board:
        return workload(board.handle, rounds, _chunks(total_mb))


def served(rounds: int, total_mb: int) -> dict[str, float]:
    """The workload in a child process on the real usb1, through `tinyhil serve usb`'s path."""
    board = served_board(TARGET, [])
    with UsbTestbed(board) as testbed:
        command = [sys.executable, str(Path(__file__).resolve()), "--child", "--rounds", str(rounds),
                   "--total-mb", str(total_mb)]  # fmt: skip
        done = subprocess.run(testbed.argv(command), env=testbed.env(), capture_output=True, text=True, check=True)
    timings: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return timings


def child(rounds: int, total_mb: int) -> None:
    """The served side's workload: open the board with the system's libusb and print the timings as JSON."""
    import usb1  # type: ignore[import-untyped]

    board = served_board(TARGET, []).bridge  # only for its identity (VID:PID); the served board is the parent's
    chunks = _chunks(total_mb)
    with usb1.USBContext() as context:
        handle = context.openByVendorIDAndProductID(board.vendor_id, board.product_id)
        with handle.claimInterface(0):
            print(json.dumps(workload(handle, rounds, chunks)))
        handle.close()


def run(rounds: int = 2000, total_mb: int = 64, repeat: int = 3) -> dict[str, float]:
    """Best-of-``repeat`` timings of both sides, printed side by side; returns the two ratios (served / in-process)."""
    best: dict[str, dict[str, float]] = {}
    for _ in range(repeat):
        for name, side in (("in-process", in_process), ("served", served)):
            timings = side(rounds, total_mb)
            kept = best.setdefault(name, timings)
            for key, seconds in timings.items():
                kept[key] = min(kept[key], seconds)
    nbytes = len(_chunks(total_mb)) * CHUNK
    rates = {name: (rounds / t["control_s"], nbytes / t["bulk_s"] / 1e6) for name, t in best.items()}
    (local_rt, local_mb), (served_rt, served_mb) = rates["in-process"], rates["served"]
    ratios = {"control": served_rt / local_rt, "bulk": served_mb / local_mb}
    print(f"4-byte control reads ({rounds}): in-process {local_rt:,.0f}/s, served {served_rt:,.0f}/s, "
          f"ratio {ratios['control']:.3f}")  # fmt: skip
    print(f"256 KB bulk writes ({nbytes >> 20} MB): in-process {local_mb:,.0f} MB/s, served {served_mb:,.0f} MB/s, "
          f"ratio {ratios['bulk']:.3f}")  # fmt: skip
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--total-mb", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.rounds, args.total_mb)
    else:
        run(args.rounds, args.total_mb, args.repeat)
    return 0


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
