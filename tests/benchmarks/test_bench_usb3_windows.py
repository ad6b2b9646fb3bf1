"""The window-write benchmark runs end to end at a small size (it asserts no wall-clock numbers)."""

from __future__ import annotations

import math

import pytest
from support.scripts import load_benchmark


def test_benchmark_runs_and_prints_the_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    module = load_benchmark("bench_usb3_windows")
    ratio = module.run(total_mb=2, repeat=1)
    assert math.isfinite(ratio) and ratio > 0
    assert "2 MB in 8 windows" in capsys.readouterr().out
