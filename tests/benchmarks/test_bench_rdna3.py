"""The RDNA3 benchmark runs end to end at a small size (its figures are reported, never asserted: wall time is
noise)."""

from __future__ import annotations

import pytest
from support.rdna3 import needs_clang
from support.scripts import load_benchmark


@needs_clang
def test_the_benchmark_runs_and_prints_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_benchmark("bench_rdna3")
    args = ["--elements", "4096", "--block", "256", "--matmul-n", "32", "--repeats", "1"]
    assert bench.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0].split()[1] for line in lines] == ["vadd", "matmul", "decode"]
    co = bench.build()
    assert bench.measure_vadd(co, 2048, 64, repeats=1)["seconds"] > 0
    cache = bench.measure_cache(co, repeats=1)
    assert cache["first_decoded"] > 0 and cache["second_decoded"] == 0
