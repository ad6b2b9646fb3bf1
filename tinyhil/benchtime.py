"""Wall-clock timing for side-by-side benchmarks on a shared, noisy machine.

:func:`best_seconds` interleaves the rounds: each round times every side once, so every side sees the same load,
and the best round of each is kept (``benchmarks/`` and ``docs/performance.md`` report ratios of these).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

__all__ = ["best_seconds"]


def best_seconds(runs: Mapping[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Best wall time of each run over ``repeats`` rounds, in seconds; a round times every run once, so all see the
    same load."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best
