"""The scsi_write benchmark runs end to end at a small size (it asserts no wall-clock numbers)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_scsi_write.py"


def test_benchmark_runs_through_the_controller_and_prints_the_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_scsi_write", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ratio = module.run(total_mb=2, repeat=1)
    assert math.isfinite(ratio) and ratio > 0
    out = capsys.readouterr().out
    assert "scsi_write of 2 MB in 8 windows" in out and f"ratio {ratio:.2f}" in out
