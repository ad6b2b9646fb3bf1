"""The RDNA3 benchmark runs end to end at a small size (its figures are reported, never asserted: wall time is
noise)."""

from __future__ import annotations

import pytest
from support.rdna3 import needs_clang
from support.scripts import load_benchmark


@needs_clang
def test_the_benchmark_runs_and_prints_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_benchmark("bench_rdna3")
    assert bench.main(["--elements", "4096", "--block", "256", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0].split()[1] for line in lines] == ["vadd", "lane-instructions/s", "dispatch"]
    result = bench.measure(2048, 64, repeats=1)
    assert result["wave_instructions"] > 0 and result["seconds"] > 0
