"""The MOCKUSB+AMD copy benchmark runs end to end at a small size (ratios are printed, never asserted)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_usb_copy.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_usb_copy", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_runs_and_prints_each_ratio_and_the_memory_line(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load()
    assert bench.main(["--mb", "1", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" 1 MB")[0] for line in lines[:2]] == ["MOCKUSB+AMD copyin", "MOCKUSB+AMD copyout_into"]
    assert all("x numpy copy throughput" in line for line in lines[:2])
    assert "peak extra resident memory" in lines[2]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc/self/clear_refs and VmHWM")
def test_a_small_copyin_stays_within_the_memory_budget() -> None:
    bench = _load()
    baseline = bench.peak_extra_rss_bytes(1 << 20)
    assert baseline < 16 << 20, "a 1 MB copyin needs no more than the issue's 16 MB"
