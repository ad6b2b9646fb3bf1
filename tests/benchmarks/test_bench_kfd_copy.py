"""The MOCKKFD copy benchmark runs end to end at a small size (ratios are printed, never asserted)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_kfd_copy.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_kfd_copy", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_runs_and_prints_each_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load()
    assert bench.main(["--mb", "1", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" 1 MB")[0].split(" ", 1)[1] for line in lines] == [
        "copyin",
        "copyout_into",
        "copyout",
        "fresh bytearray",
    ]
    assert all("x numpy copy" in line for line in lines)
    assert [line.endswith("(reference)") for line in lines] == [False, False, True, True]
