"""The doorbell watcher of ``tinyhil serve kfd``: how soon it notices a store, and what watching costs while idle.

    python benchmarks/bench_serve_kfd_doorbell.py [--trials 200] [--idle-s 2]

A store lands in a doorbell frame shared as ``tinyhil serve kfd`` shares it (a memfd); the latency is the time from
just before the store to the watcher's call into MOCKKFD's doorbell handler (replaced here by a recorder), measured
after a long idle spell (the watcher has backed off to its longest sleep) and right after another doorbell (it
polls at its shortest). The idle cost is the process CPU time over ``--idle-s`` seconds while only the watcher runs,
against the same spell without it, as a share of one core. Wall-clock figures depend on the host and its load:
docs/serve.md gives those of one machine.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from tinyhil.mocks.kfd import MockKFD
from tinyhil.mocks.kfd.state import GpuDevice
from tinyhil.mocks.serve.kfd import DoorbellWatcher, SharedMemory
from tinyhil.spec.kfd_queues import KFD_DOORBELL_BYTES

_IDLE_GAP_S = 0.02  # longer than the backoff takes to reach its longest sleep
_BUSY_GAP_S = 0.0  # the next store at once: the watcher is polling at its shortest sleep


def _latencies(watcher: DoorbellWatcher, gpu: GpuDevice, noticed: list[int], trials: int, gap_s: float) -> list[int]:
    latencies = []
    for trial in range(trials):
        time.sleep(gap_s)
        before = len(noticed)
        start_ns = time.monotonic_ns()
        gpu.doorbell_page[:KFD_DOORBELL_BYTES] = (trial + 1 + len(noticed)).to_bytes(KFD_DOORBELL_BYTES, "little")
        with watcher.lock:
            watcher.activity.wait_for(lambda: len(noticed) > before)  # noqa: B023 (read at once, in this iteration)
        latencies.append(noticed[-1] - start_ns)
    return latencies


def _cpu_share(seconds: float) -> float:
    start_cpu, start = time.process_time(), time.monotonic()
    time.sleep(seconds)
    return (time.process_time() - start_cpu) / (time.monotonic() - start)


def measure(trials: int, idle_s: float) -> dict[str, float]:
    """Median and 90th-percentile latencies (µs) idle and busy, and the idle CPU share with and without watching."""
    kfd = MockKFD(gpus=1, host_memory=SharedMemory().allocate)
    kfd.ensure_process()
    noticed: list[int] = []
    kfd.queues.doorbell_written = lambda gpu, offset, nbytes: noticed.append(time.monotonic_ns())  # type: ignore[method-assign]
    watcher = DoorbellWatcher(kfd, threading.Lock())
    baseline = _cpu_share(idle_s)
    watcher.start()
    try:
        idle = _latencies(watcher, kfd.gpus[0], noticed, trials, _IDLE_GAP_S)
        busy = _latencies(watcher, kfd.gpus[0], noticed, trials, _BUSY_GAP_S)
        time.sleep(_IDLE_GAP_S)
        watching = _cpu_share(idle_s)
    finally:
        watcher.stop()
    results = {"idle cpu share without watcher": baseline, "idle cpu share with watcher": watching}
    for name, values in (("idle", idle), ("busy", busy)):
        results[f"{name} median us"] = statistics.median(values) / 1e3
        results[f"{name} p90 us"] = statistics.quantiles(values, n=10)[-1] / 1e3
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=200, help="stores per spell (default 200)")
    parser.add_argument("--idle-s", type=float, default=2.0, help="seconds of idle CPU measured (default 2)")
    args = parser.parse_args(argv)
    results = measure(args.trials, args.idle_s)
    print(f"doorbell latency after idle: median {results['idle median us']:.0f} us, "
          f"p90 {results['idle p90 us']:.0f} us")  # fmt: skip
    print(f"doorbell latency when busy:  median {results['busy median us']:.0f} us, "
          f"p90 {results['busy p90 us']:.0f} us")  # fmt: skip
    print(f"idle CPU: {100 * results['idle cpu share with watcher']:.1f}% of a core watching, "
          f"{100 * results['idle cpu share without watcher']:.1f}% without")  # fmt: skip
    return 0


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
