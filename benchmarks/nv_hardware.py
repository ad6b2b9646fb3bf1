"""The whole NV path on a machine with an NVIDIA GPU, in one command: the portable suite, then copy throughput.

    python benchmarks/nv_hardware.py [--gpu 0] [--mb 64] [--repeats 7] [--skip-suite]

1. Runs the portable HIL suite on the ``NV`` target, strict (``pytest --pyargs tinyhil.fixtures.suite --hil-target
   NV --hil-strict``, in a child process; ``--gpu`` sets its ``CUDA_VISIBLE_DEVICES``).
2. Measures 64 MB ``copyin`` and ``copyout_into`` on ``NV`` against ``numpy.copyto`` of the same bytes, side by
   side, best of ``--repeats`` rounds (``tinyhil.benchtime.best_seconds``), after one checked round trip.
   Host memory is pageable numpy memory, as a test's is, so the figures include CUDA's staging copy.

Exit status: the suite's (0 when it passed), or 4 when ``NV`` cannot run here (the reason is printed), as
``--hil-strict`` does. Needs ``pip install -e '.[nv]'``. Written against the runtime ``tests/nv/`` exercises over
the CUDA driver double; ``tests/nv/test_nv_hardware_script.py`` runs ``measure`` over that double.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Final

import numpy as np

from tinyhil.benchtime import best_seconds
from tinyhil.device import Device
from tinyhil.registry import default_registry

MB: Final = 1 << 20
TARGET: Final = "NV"
UNAVAILABLE_STATUS: Final = 4  # what pytest --hil-strict exits with when a named target cannot run
SUITE: Final = ("-m", "pytest", "--pyargs", "tinyhil.fixtures.suite", "--hil-target", TARGET, "--hil-strict", "-q",
                "-rs")  # fmt: skip


def measure(open_device: Callable[[], Device], nbytes: int, repeats: int = 7) -> dict[str, float]:
    """Throughput in bytes per second of ``copyin``, ``copyout_into`` and ``numpy`` (a host copy) for ``nbytes``.

    Raises:
        AssertionError: the checked round trip returned other bytes than it stored.
    """
    data = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
    target, out = np.zeros_like(data), np.zeros_like(data)  # every page touched before timing
    with open_device() as device:
        buf = device.alloc(nbytes)
        device.copyin(buf, data)
        device.copyout_into(buf, out)
        if not np.array_equal(out, data):
            raise AssertionError(f"{device.name}: copyout_into returned other bytes than copyin stored")
        seconds = best_seconds(
            {
                "numpy": lambda: np.copyto(target, data),
                "copyin": lambda: device.copyin(buf, data),
                "copyout_into": lambda: device.copyout_into(buf, out),
            },
            repeats,
        )
    return {name: nbytes / max(elapsed, 1e-9) for name, elapsed in seconds.items()}


def report(rates: dict[str, float], nbytes: int) -> list[str]:
    """One line per copy: its GB/s and its ratio to the numpy copy."""
    numpy_rate = rates["numpy"]
    lines = [f"numpy copy {nbytes // MB} MB: {numpy_rate / 1e9:.2f} GB/s"]
    for name in ("copyin", "copyout_into"):
        lines.append(f"{TARGET} {name} {nbytes // MB} MB: {rates[name] / 1e9:.2f} GB/s, "
                     f"{rates[name] / numpy_rate:.2f}x numpy copy")  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpu", type=int, default=None, help="the CUDA device to use (default: CUDA's device 0)")
    parser.add_argument("--mb", type=int, default=64, help="bytes per copy, in MB (default 64)")
    parser.add_argument("--repeats", type=int, default=7, help="rounds; the best counts (default 7)")
    parser.add_argument("--skip-suite", action="store_true", help="measure only, without the portable suite")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    if args.gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(args.gpu)  # the suite's NV (GPU 0) is that GPU
    reason = default_registry().resolve(TARGET).unavailable_reason()
    if reason is not None:
        print(f"{TARGET} cannot run here: {reason}", file=sys.stderr)
        return UNAVAILABLE_STATUS
    status = 0
    if not args.skip_suite:
        print(f"$ {sys.executable} {' '.join(SUITE)}", flush=True)
        status = subprocess.call([sys.executable, *SUITE], env=env)
    gpu = 0 if args.gpu is None else args.gpu
    rates = measure(lambda: default_registry().resolve(f"{TARGET}:{gpu}").open(), args.mb * MB, args.repeats)
    for line in report(rates, args.mb * MB):
        print(line)
    return status


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
