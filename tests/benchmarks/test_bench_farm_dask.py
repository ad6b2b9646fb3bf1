"""The Dask engine benchmark runs end to end on a small suite and prints both figures."""

from __future__ import annotations

import pytest
from support.cluster import needs_dask
from support.scripts import load_benchmark


@needs_dask
def test_the_dask_benchmark_prints_the_makespan_ratio_and_the_overhead_against_the_local_engine(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = load_benchmark("bench_farm_dask")
    assert bench.main(["--tests", "10", "--mean-ms", "5"]) == 0
    makespan, overhead = capsys.readouterr().out.splitlines()
    assert makespan.startswith("dask makespan: ") and "for 10 tests on 2 loopback workers" in makespan
    assert "x the ideal (required <= 1.15: " in makespan and "the local engine: " in makespan
    assert overhead.startswith("dask overhead: ") and "ms per test (required <= 20: " in overhead
