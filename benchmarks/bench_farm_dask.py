"""The Dask engine against the local engine on the farm's synthetic suite, side by side in one run.

    python benchmarks/bench_farm_dask.py [--tests 200] [--mean-ms 100] [--seed 1]

The suite is ``bench_farm.py``'s (``--tests`` sleeps of uneven, heavy-tailed durations, known to the farm from an
earlier run). Two emulated NULL boards, one per "host", run it:

- on the Dask engine: a loopback cluster (:mod:`tinyhil.device_farm.cluster.loopback`) of ``tinyhil farm scheduler`` and
  two ``tinyhil farm worker`` processes, each worker offering its host's board;
- on the local engine: the same two boards in one map, on this host.

It prints the Dask run's makespan (first test start to last test end, from the journal) over the ideal (the larger
of total / 2 and the longest test; target <= 1.15) and the Dask engine's wall time against the local engine's, as
the difference per test (target <= 20 ms). The cluster's start-up is outside both timings; collection, planning,
shard start-up, events and the journal are inside.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the farm benchmark beside it, however this one is loaded
from bench_farm import suite

from tinyhil.device_farm.cluster.loopback import emulated_board, loopback_cluster
from tinyhil.device_farm.inventory.hwmap import parse_hwmap
from tinyhil.device_farm.journal import read_journal
from tinyhil.device_farm.planning import DURATIONS_NAME, Pair
from tinyhil.device_farm.run import DaskOptions, FarmRun, run_farm

REQUIRED_RATIO = 1.15
REQUIRED_OVERHEAD_MS = 20.0
HOSTS = ("host-a", "host-b")


def _timed_run(run: FarmRun, log_path: Path) -> tuple[float, float, int]:
    """Wall seconds of ``run``, its makespan from the journal, and the tests that passed."""
    start = time.perf_counter()
    with log_path.open("w") as log:
        status = run_farm(run, log)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"the farm run failed (status {status}); see {log_path}")
    results = [r for r in read_journal(run.run_dir / "journal.jsonl").final.values() if r["outcome"] == "passed"]
    return wall, max(r["finished"] for r in results) - min(r["started"] for r in results), len(results)


def measure(tests: int, mean_s: float, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    durations = [min(rng.paretovariate(2.5) * mean_s * 0.6, mean_s * 20) for _ in range(tests)]
    boards = {host: emulated_board(f"null-{host[-1]}", "NULL", host) for host in HOSTS}
    with tempfile.TemporaryDirectory(prefix="tinyhil-bench-dask-") as tmp:
        root = Path(tmp)
        path = root / "test_synthetic.py"
        path.write_text(suite(durations))
        known = {Pair(f"{path}::test_synthetic[NULL-{n}]", "NULL").key: d for n, d in enumerate(durations)}
        for name in ("local", "dask"):
            (root / name / "state").mkdir(parents=True)
            (root / name / "state" / DURATIONS_NAME).write_text(json.dumps(known))
        # The local engine runs every board of its map on this host, whatever host the map names.
        local_map = parse_hwmap("".join(boards.values()), "two-hosts.toml")
        local = FarmRun(local_map, (str(path),), root / "local" / "run", root / "local" / "state", 2, pyargs=False,
                        targets=("NULL",))  # fmt: skip
        local_s, local_makespan, _ = _timed_run(local, root / "local.log")
        with loopback_cluster(root / "cluster") as cluster:
            for host, board in boards.items():
                cluster.start_worker(host, board)
            dask = FarmRun(None, (str(path),), root / "dask" / "run", root / "dask" / "state", 2, pyargs=False,
                           targets=("NULL",), dask=DaskOptions(cluster.address))  # fmt: skip
            dask_s, makespan, passed = _timed_run(dask, root / "dask.log")
    ideal = max(sum(durations) / 2, max(durations))
    return {"tests": float(passed), "ideal_s": ideal, "makespan_s": makespan, "ratio": makespan / ideal,
            "local_ratio": local_makespan / ideal, "dask_s": dask_s, "local_s": local_s,
            "overhead_ms_per_test": (dask_s - local_s) / tests * 1000}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=200)
    parser.add_argument("--mean-ms", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    m = measure(args.tests, args.mean_ms / 1000, args.seed)
    verdict = "ok" if m["ratio"] <= REQUIRED_RATIO else f"ABOVE {REQUIRED_RATIO}"
    print(f"dask makespan: {m['makespan_s']:.2f} s for {m['tests']:.0f} tests on 2 loopback workers, ideal "
          f"{m['ideal_s']:.2f} s: {m['ratio']:.3f}x the ideal (required <= {REQUIRED_RATIO}: {verdict}; "
          f"the local engine: {m['local_ratio']:.3f}x)")  # fmt: skip
    over = "ok" if m["overhead_ms_per_test"] <= REQUIRED_OVERHEAD_MS else f"ABOVE {REQUIRED_OVERHEAD_MS:g}"
    print(f"dask overhead: {m['dask_s']:.2f} s on the Dask engine against {m['local_s']:.2f} s on the local engine: "
          f"{m['overhead_ms_per_test']:+.1f} ms per test (required <= {REQUIRED_OVERHEAD_MS:g}: {over})")  # fmt: skip
    return 0


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
