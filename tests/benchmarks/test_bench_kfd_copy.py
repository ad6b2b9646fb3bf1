"""The MOCKKFD copy benchmark runs end to end at a small size (ratios are printed, never asserted)."""

from __future__ import annotations

import pytest
from support.scripts import load_benchmark


def test_the_benchmark_runs_and_prints_each_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_benchmark("bench_kfd_copy")
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
