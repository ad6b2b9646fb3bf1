"""The SDMA benchmark runs end to end at a small size (its ratios are reported, never asserted: wall time is noise)."""

from __future__ import annotations

import pytest
from support.scripts import load_benchmark


def test_the_benchmark_runs_and_prints_both_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_benchmark("bench_sdma")
    assert bench.main(["--mb", "1", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines] == ["COPY_LINEAR", "CONST_FILL"]
    ratios = bench.measure(1 << 20, repeats=1)
    assert set(ratios) == {"copy", "fill"} and all(ratio > 0 for ratio in ratios.values())
