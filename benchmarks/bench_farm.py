"""The farm's scheduler on a synthetic suite: makespan against the ideal, and the farm's overhead per test.

    python benchmarks/bench_farm.py [--tests 200] [--workers 2] [--mean-ms 20] [--seed 1]

The suite has ``--tests`` tests whose durations (sleeps) are drawn from a heavy-tailed distribution with the
given mean, so they are uneven; the farm knows them from an earlier run (they are seeded into its durations
record, as a nightly farm would have them). It runs on one emulated NULL board with ``--workers`` slots and
prints:

- the makespan (first test start to last test end, from the journal) divided by the ideal, the larger of
  total / workers and the longest test (the target is <= 1.1);
- the farm's wall time against plain ``pytest`` on the same number of workers (pytest-xdist, one process with
  one worker), and the difference per test (collection, probes, shard start-up, leases, journal).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tinyhil.device_farm.inventory.hwmap import emulated_inventory
from tinyhil.device_farm.journal import read_journal
from tinyhil.device_farm.planning import DURATIONS_NAME, Pair
from tinyhil.device_farm.run import FarmRun, run_farm

REQUIRED_RATIO = 1.1


def suite(durations: list[float]) -> str:
    table = ", ".join(f"{d:.4f}" for d in durations)
    return (
        "import time\n\nimport pytest\n\n"
        f"DURATIONS = [{table}]\n\n\n"
        "@pytest.mark.parametrize('n', range(len(DURATIONS)))\n"
        "def test_synthetic(hil_target, n):\n"
        "    time.sleep(DURATIONS[n])\n"
    )


def measure(tests: int, workers: int, mean_s: float, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    durations = [min(rng.paretovariate(2.5) * mean_s * 0.6, mean_s * 20) for _ in range(tests)]
    with tempfile.TemporaryDirectory(prefix="tinyhil-bench-farm-") as tmp:
        root = Path(tmp)
        path = root / "test_synthetic.py"
        path.write_text(suite(durations))
        state = root / "state"
        state.mkdir()
        known = {Pair(f"{path}::test_synthetic[NULL-{n}]", "NULL").key: d for n, d in enumerate(durations)}
        (state / DURATIONS_NAME).write_text(json.dumps(known))
        inventory = emulated_inventory(slots=workers)
        hwmap = type(inventory)(inventory.path, tuple(b for b in inventory.boards if b.targets == ("NULL",)))
        run = FarmRun(hwmap, (str(path),), root / "run", state, workers, pyargs=False, targets=("NULL",))
        start = time.perf_counter()
        with open(root / "farm.log", "w") as log:
            status = run_farm(run, log)
        farm_s = time.perf_counter() - start
        if status != 0:
            raise SystemExit(f"the farm run failed (status {status}); see {root / 'farm.log'}")
        results = [r for r in read_journal(root / "run" / "journal.jsonl").final.values() if r["outcome"] == "passed"]
        makespan = max(r["finished"] for r in results) - min(r["started"] for r in results)
        start = time.perf_counter()
        spread = ["-n", str(workers)] if workers > 1 else ["-p", "no:xdist"]
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *spread, str(path), "--hil-target",
                   "NULL", "--rootdir", str(root)]  # fmt: skip
        plain = subprocess.run(command, capture_output=True, text=True, check=False)
        plain_s = time.perf_counter() - start
        if plain.returncode != 0:
            raise SystemExit(f"the plain pytest run failed: {plain.stdout[-500:]}")
    ideal = max(sum(durations) / workers, max(durations))
    overhead_ms = (farm_s - plain_s) / tests * 1000
    return {"tests": float(len(results)), "ideal_s": ideal, "makespan_s": makespan, "ratio": makespan / ideal,
            "farm_s": farm_s, "plain_s": plain_s, "overhead_ms_per_test": overhead_ms}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mean-ms", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    m = measure(args.tests, args.workers, args.mean_ms / 1000, args.seed)
    verdict = "ok" if m["ratio"] <= REQUIRED_RATIO else f"ABOVE {REQUIRED_RATIO}"
    print(f"farm makespan: {m['makespan_s']:.2f} s for {m['tests']:.0f} tests on {args.workers} workers, ideal "
          f"{m['ideal_s']:.2f} s: {m['ratio']:.3f}x the ideal (required <= {REQUIRED_RATIO}: {verdict})")  # fmt: skip
    print(f"farm overhead: {m['farm_s']:.2f} s for the farm run against {m['plain_s']:.2f} s for plain pytest on "
          f"{args.workers} workers (pytest-xdist): {m['overhead_ms_per_test']:+.1f} ms per test")  # fmt: skip
    return 0


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
