"""The scsi_write benchmark runs end to end at a small size (it asserts no wall-clock numbers)."""

from __future__ import annotations

import math

import pytest
from support.scripts import load_benchmark


def test_benchmark_runs_through_the_controller_and_prints_the_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    module = load_benchmark("bench_scsi_write")
    ratio = module.run(total_mb=2, repeat=1)
    assert math.isfinite(ratio) and ratio > 0
    out = capsys.readouterr().out
    assert "scsi_write of 2 MB in 8 windows" in out and f"ratio {ratio:.2f}" in out
