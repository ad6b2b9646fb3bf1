"""The MOCKUSB+AMD copy benchmark runs end to end at a small size (ratios are printed, never asserted), and the copy
path stays within its call-count budgets (counts are asserted: they do not depend on the machine's speed)."""

from __future__ import annotations

import sys

import pytest
from support.scripts import load_benchmark

# Baselines: measured 212.0 and 294.0 with the copy path going through the controller's one arm and XDATA-read rules
# and tinyhil.align's one rounding rule (docs/performance.md "Counting Python calls" says why), plus about 1%.
COPYIN_CALLS_PER_CHUNK_MAX = 220
COPYOUT_CALLS_PER_PIECE_MAX = 306


def test_the_benchmark_runs_and_prints_each_ratio_and_the_memory_line(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_benchmark("bench_usb_copy")
    assert bench.main(["--mb", "1", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" 1 MB")[0] for line in lines[:2]] == ["MOCKUSB+AMD copyin", "MOCKUSB+AMD copyout_into"]
    assert all("x numpy copy throughput" in line and "Python calls" in line for line in lines[:2])
    assert "peak extra resident memory" in lines[2]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc/self/clear_refs and VmHWM")
def test_a_small_copyin_stays_within_the_memory_budget() -> None:
    bench = load_benchmark("bench_usb_copy")
    baseline = bench.peak_extra_rss_bytes(1 << 20)
    assert baseline < 16 << 20, "a 1 MB copyin needs no more than the issue's 16 MB"


def test_the_copy_path_stays_within_its_call_budgets() -> None:
    """Python calls ('call' events of a ``sys.setprofile`` hook; C calls are not budgeted) per steady-state chunk.

    Measured on MOCKUSB+AMD (gfx1100), sync mode, copies of 16 chunks less copies of 8 (copyout: 8 pieces less 4):
    218.0 calls per 262,140 B copyin chunk (plus 1,840 per copyin call) and 303.0 per 512 KB copyout_into piece (plus
    1,826 per call). Reproduce with ``python benchmarks/callcount.py``.
    """
    counts = load_benchmark("callcount").copy_call_counts(chunks=8)
    assert counts["copyin"].call <= COPYIN_CALLS_PER_CHUNK_MAX, counts["copyin"]
    assert counts["copyout_into"].call <= COPYOUT_CALLS_PER_PIECE_MAX, counts["copyout_into"]


def test_the_call_counts_do_not_depend_on_the_run() -> None:
    callcount = load_benchmark("callcount")
    assert callcount.copy_call_counts(chunks=2) == callcount.copy_call_counts(chunks=2)
