"""The farm scheduler benchmark runs end to end at a small size and prints both figures (never asserted: wall
time is noise on a shared machine)."""

from __future__ import annotations

import pytest
from support.scripts import load_benchmark


def test_the_benchmark_prints_the_makespan_ratio_and_the_overhead(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_benchmark("bench_farm")
    assert bench.main(["--tests", "12", "--mean-ms", "5", "--workers", "2"]) == 0
    makespan, overhead = capsys.readouterr().out.splitlines()
    assert makespan.startswith("farm makespan: ") and "x the ideal (required <= 1.1: " in makespan
    assert "for 12 tests on 2 workers" in makespan
    assert overhead.startswith("farm overhead: ") and overhead.endswith(" ms per test")
