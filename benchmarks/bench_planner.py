"""The farm's planner at scale: routing and sharding test x target pairs over an inventory of boards.

    python benchmarks/bench_planner.py [--boards 1000] [--sizes 10000,30000,100000]

The inventory has ``boards`` boards over four targets, with capability sets that vary by board; the pairs
require random subsets of capabilities and have random recorded durations. It prints the planning time per size,
the time per ``n log2 n``, and the ratio of that per-element cost at the largest size to the smallest (near 1
when the planner grows no worse than ``n log n``; above 2 it does not).
"""

from __future__ import annotations

import argparse
import math
import random
import time

from tinyhil.device_farm.inventory.hwmap import Board, BoardKind, EmulatedLocator
from tinyhil.device_farm.planning import Pair, plan

TARGETS = ("MOCKUSB+AMD", "MOCKKFD+AMD", "NULL", "USB+AMD")
CAPABILITIES = ("copyin", "copyout", "fill", "exec", "usb3", "timestamps", "signals", "sram-windows")


def inventory(count: int, rng: random.Random) -> list[Board]:
    boards = []
    for n in range(count):
        target = TARGETS[n % len(TARGETS)]
        capabilities = frozenset(c for i, c in enumerate(CAPABILITIES) if (n >> (i % 3)) & 1 or i < 3)
        locator = EmulatedLocator(target, 1 + n % 2)
        boards.append(Board(f"b{n}", BoardKind.EMULATED, locator, (target,), capabilities, "bench"))
    return boards


def pairs(count: int, rng: random.Random) -> tuple[list[Pair], dict[str, float]]:
    made, durations = [], {}
    for n in range(count):
        requires = frozenset(rng.sample(CAPABILITIES[:4], rng.randint(0, 2)))
        pair = Pair(f"tests/test_{n % 997}.py::test_{n}", TARGETS[n % len(TARGETS)], requires)
        made.append(pair)
        if n % 10:
            durations[pair.key] = rng.expovariate(1 / 0.5)
    return made, durations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", type=int, default=1000)
    parser.add_argument("--sizes", default="10000,30000,100000", help="comma-separated pair counts")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = random.Random(1)
    boards = inventory(args.boards, rng)
    print(f"planner: {args.boards} boards, {sum(b.slots for b in boards)} lanes")
    per_element = []
    for size in sizes:
        made, durations = pairs(size, rng)
        start = time.perf_counter()
        result = plan(made, boards, durations=durations)
        seconds = time.perf_counter() - start
        cost = seconds / (size * math.log2(size))
        per_element.append(cost)
        placed = sum(len(s) for s in result.shards.values())
        print(f"  {size:>7} pairs: {seconds:7.3f} s  ({cost * 1e9:6.1f} ns per n log2 n; {placed} placed, "
              f"{len(result.unroutable)} unroutable, makespan {result.makespan_s:.1f} s)")  # fmt: skip
    growth = per_element[-1] / per_element[0]
    print(f"per n log n cost, {sizes[-1]} vs {sizes[0]} pairs: {growth:.2f}x (n log n growth or better: <= 2)")
    return 0


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
