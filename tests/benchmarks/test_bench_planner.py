"""The planner benchmark runs at small sizes and prints a time per size and the growth figure (times are reported,
never asserted)."""

from __future__ import annotations

import pytest
from support.scripts import load_benchmark


def test_the_benchmark_prints_each_size_and_the_growth(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_benchmark("bench_planner")
    assert bench.main(["--boards", "40", "--sizes", "200,600"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "planner: 40 boards, 60 lanes"
    assert [line.split()[0] for line in lines[1:3]] == ["200", "600"]
    assert lines[3].startswith("per n log n cost, 600 vs 200 pairs: ")
