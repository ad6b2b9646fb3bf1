"""The SDMA benchmark runs end to end at a small size (its ratios are reported, never asserted: wall time is noise)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_sdma.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_sdma", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_runs_and_prints_both_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load()
    assert bench.main(["--mb", "1", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines] == ["COPY_LINEAR", "CONST_FILL"]
    ratios = bench.measure(1 << 20, repeats=1)
    assert set(ratios) == {"copy", "fill"} and all(ratio > 0 for ratio in ratios.values())
