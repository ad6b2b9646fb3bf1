"""The serve kfd doorbell benchmark runs end to end with few trials (its figures are printed, never asserted: wall
time is noise)."""

from __future__ import annotations

import pytest
from support.scripts import load_benchmark


def test_the_benchmark_runs_and_prints_latency_and_idle_cost(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_benchmark("bench_serve_kfd_doorbell")
    assert bench.main(["--trials", "3", "--idle-s", "0.05"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "doorbell latency after idle", "doorbell latency when busy", "idle CPU"
    ]  # fmt: skip
    figures = bench.measure(trials=3, idle_s=0.05)
    assert {"idle median us", "busy median us", "idle cpu share with watcher"} <= set(figures)
