"""copyin / copyout on MOCKUSB+AMD (sync mode) against a numpy copy of the same bytes, side by side in one run,
and the copyin's peak extra resident memory.

    python benchmarks/bench_usb_copy.py [--mb 64] [--repeats 5] [--revision pipelined]

The emulated side is the whole USB device runtime over MockUSB3: copyin stages each chunk's wire image (payload,
pad, sentinel), arms the 0xF2 engine and reads the fence in one batch, sends the bulk OUT, and the emulated GPU's
SDMA polls the sentinel and copies the window into VRAM; copyout_into arms a device-to-host transfer, the SDMA copies
VRAM into SRAM and releases the bulk IN, and the bulk IN (an asynchronous transfer on the caller's preallocated array,
as libusb does it) lands the bytes there. Three copies per byte for copyin (staging, landing, SDMA) put its ceiling near
0.33; copyout needs two (SDMA, bulk IN). The numpy side is
``numpy.copyto`` into a preallocated, touched array; each side is the best of ``--repeats`` interleaved rounds.
The goal is >= 0.2 each way (docs/performance.md).

Memory: in a fresh process, with the source allocated and the destination VRAM already touched, the peak resident
set is reset (``/proc/self/clear_refs``) and read back after the copyin (``VmHWM``); the extra is what the copyin
itself needed beyond the source and the touched VRAM (the budget: at most 16 MB).

Calls: the Python function calls per steady-state copyin chunk and copyout piece, counted with a profiler hook by
``benchmarks/callcount.py`` (deterministic, so ``tests/benchmarks`` asserts them: docs/performance.md,
"Counting Python calls").
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

from tinyhil.benchtime import best_seconds
from tinyhil.registry import open_target

MB = 1 << 20
MIN_RATIO = 0.2
MAX_EXTRA_RSS_MB = 16
TARGET = "MOCKUSB+AMD"


def measure(nbytes: int, repeats: int = 5, revision: str = "pipelined") -> dict[str, float]:
    """Ratios (emulated throughput / numpy throughput) for copyin and copyout_into of ``nbytes``."""
    data = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
    target = np.zeros_like(data)  # zeros_like writes every page: touched before timing
    out = np.zeros_like(data)
    with open_target(TARGET, revision=revision) as device:
        buf = device.alloc(nbytes)
        device.copyin(buf, data)  # warm-up: the protocol's one-time setup, VRAM pages committed
        device.copyout_into(buf, out)
        if not np.array_equal(out, data):
            raise AssertionError("copyout returned other bytes than copyin stored")
        seconds = best_seconds(
            {
                "numpy": lambda: np.copyto(target, data),
                "copyin": lambda: device.copyin(buf, data),
                "copyout_into": lambda: device.copyout_into(buf, out),
            },
            repeats,
        )
    numpy_s = seconds.pop("numpy")
    return {name: numpy_s / elapsed for name, elapsed in seconds.items()}


def _callcount() -> ModuleType:
    """``benchmarks/callcount.py``, loaded by path: this folder is a folder of scripts, not a package."""
    spec = importlib.util.spec_from_file_location("callcount", Path(__file__).with_name("callcount.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(f"{field} not in /proc/self/status")


def peak_extra_rss_bytes(nbytes: int, revision: str = "pipelined") -> int:
    """Peak resident memory a copyin of ``nbytes`` adds beyond its source and the touched VRAM (this process)."""
    data = np.random.default_rng(1).integers(0, 256, nbytes, dtype=np.uint8)
    with open_target(TARGET, revision=revision) as device:
        buf = device.alloc(nbytes)
        device.fill(buf, 0xA5)  # the SDMA touches every destination page
        device.copyin(buf, data[:4096])  # the protocol's one-time setup
        device.synchronize()
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current resident set
        before = _status_kb("VmRSS")
        device.copyin(buf, data)
        return max(0, _status_kb("VmHWM") - before) * 1024


def _rss_in_fresh_process(nbytes: int, revision: str) -> int:
    code = (
        f"import importlib.util, sys; spec = importlib.util.spec_from_file_location('b', {str(Path(__file__))!r}); "
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
        f"print(m.peak_extra_rss_bytes({nbytes}, {revision!r}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(result.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=64, help="bytes per copy, in MB (default 64)")
    parser.add_argument("--repeats", type=int, default=5, help="rounds; the best run of each side counts (default 5)")
    parser.add_argument("--revision", default="pipelined", help="copyin protocol revision (default pipelined)")
    args = parser.parse_args(argv)
    nbytes = args.mb * MB
    ratios = measure(nbytes, args.repeats, args.revision)
    callcount = _callcount()
    calls = callcount.copy_call_counts(revision=args.revision)
    for name, ratio in ratios.items():
        verdict = "ok" if ratio >= MIN_RATIO else f"BELOW {MIN_RATIO}"
        print(f"{TARGET} {name} {args.mb} MB: {ratio:.2f} x numpy copy throughput (required >= {MIN_RATIO}: "
              f"{verdict}); {callcount.describe(name, calls[name])}")  # fmt: skip
    if sys.platform.startswith("linux"):
        extra = _rss_in_fresh_process(nbytes, args.revision)
        verdict = "ok" if extra <= MAX_EXTRA_RSS_MB * MB else f"ABOVE {MAX_EXTRA_RSS_MB} MB"
        print(f"{TARGET} copyin {args.mb} MB: peak extra resident memory {extra / MB:.1f} MB "
              f"(allowed <= {MAX_EXTRA_RSS_MB} MB: {verdict})")  # fmt: skip
    else:
        print("peak extra resident memory: not measured (needs Linux /proc/self/clear_refs)")
    return 0


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
