"""The fill benchmark runs end to end at a small size (its ratios are printed, never asserted: wall time is noise)."""

from __future__ import annotations

import pytest
from support.scripts import load_benchmark


def test_the_benchmark_runs_and_prints_a_ratio_per_target(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_benchmark("bench_fill")
    assert bench.main(["--mb", "1", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" fill 1 MB: ")[0] for line in lines] == ["MOCKUSB+AMD", "MOCKKFD+AMD"]
    assert all("x ndarray.fill" in line for line in lines)
    ratios = bench.measure(1 << 20, repeats=1)
    assert set(ratios) == {"MOCKUSB+AMD", "MOCKKFD+AMD"} and all(ratio > 0 for ratio in ratios.values())
