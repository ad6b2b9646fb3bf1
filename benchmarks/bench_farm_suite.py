"""The portable suite as a farm run against plain pytest-xdist on the same targets: makespan over makespan.

    python benchmarks/bench_farm_suite.py [--workers 2] [--rounds 3] [--target T ...]

Each round runs, in turn, ``tinyhil run --workers W`` (a farm run: one emulated board per target, its lanes fed
test after test) and plain ``pytest -n W --pyargs tinyhil.fixtures.suite`` on the same targets (default: every
available emulated target), each timed as a whole process: the makespan a user waits for, collection and start-up
included. It prints both medians and the median of the rounds' ratios, farm over pytest (the goal is <= 1.1). The
two alternate, so a machine whose speed drifts slows both alike.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tinyhil.fixtures import SUITE_PACKAGE
from tinyhil.registry import SELECT_EMULATED, default_registry

REQUIRED_RATIO = 1.1


def _timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command[:4]} failed (status {done.returncode}): {(done.stdout + done.stderr)[-800:]}")
    return seconds


def measure(workers: int, rounds: int, targets: list[str]) -> dict[str, float]:
    farm_s: list[float] = []
    plain_s: list[float] = []
    selected = [f"--target={t}" for t in targets]
    with tempfile.TemporaryDirectory(prefix="tinyhil-bench-suite-") as tmp:
        root = Path(tmp)
        for n in range(rounds):
            report = root / f"farm-{n}"
            farm = [sys.executable, "-m", "tinyhil.cli", "run", "--workers", str(workers), "--report", str(report),
                    *selected]  # fmt: skip
            plain = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(workers), "--rootdir",
                     str(root), "--pyargs", SUITE_PACKAGE, *(f"--hil-target={t}" for t in targets)]  # fmt: skip
            farm_s.append(_timed(farm, root))
            plain_s.append(_timed(plain, root))
    ratios = [f / p for f, p in zip(farm_s, plain_s, strict=True)]
    return {"farm_s": statistics.median(farm_s), "plain_s": statistics.median(plain_s),
            "ratio": statistics.median(ratios), "rounds": float(rounds)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target", action="append", help="a target to run on (default: every emulated target)")
    args = parser.parse_args(argv)
    targets = args.target or [t.name for t in default_registry().select([SELECT_EMULATED])]
    m = measure(args.workers, args.rounds, targets)
    verdict = "ok" if m["ratio"] <= REQUIRED_RATIO else f"ABOVE {REQUIRED_RATIO}"
    print(f"portable suite on {', '.join(targets)}, {args.workers} workers, median of {args.rounds} rounds: "
          f"farm run {m['farm_s']:.2f} s, pytest -n {args.workers} {m['plain_s']:.2f} s, ratio "
          f"{m['ratio']:.3f} (required <= {REQUIRED_RATIO}: {verdict})")  # fmt: skip
    return 0


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
