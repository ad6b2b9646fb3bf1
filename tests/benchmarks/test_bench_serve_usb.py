"""The serve-usb benchmark runs end to end at a small size (it asserts no wall-clock numbers)."""

from __future__ import annotations

import math

import pytest
from support.scripts import load_benchmark

from tinyhil.mocks.serve.usb import umockdev_unavailable_reason

_unavailable = umockdev_unavailable_reason()


@pytest.mark.skipif(_unavailable is not None, reason=_unavailable or "")
def test_benchmark_prints_both_sides_and_their_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    module = load_benchmark("bench_serve_usb")
    ratios = module.run(rounds=20, total_mb=1, repeat=1)
    assert set(ratios) == {"control", "bulk"}
    assert all(math.isfinite(ratio) and ratio > 0 for ratio in ratios.values())
    out = capsys.readouterr().out
    assert "4-byte control reads (20): in-process" in out and "256 KB bulk writes (1 MB): in-process" in out
