"""The portable-suite benchmark runs a farm run and plain pytest-xdist on the same target and prints both makespans
and their ratio (never asserted: wall time is noise on a shared machine)."""

from __future__ import annotations

import pytest
from support.scripts import load_benchmark


def test_the_benchmark_prints_both_makespans_and_the_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_benchmark("bench_farm_suite")
    assert bench.main(["--target", "NULL", "--rounds", "1", "--workers", "1"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("portable suite on NULL, 1 workers, median of 1 rounds: farm run ")
    assert ", pytest -n 1 " in line and " s, ratio " in line and "(required <= 1.1: " in line
