"""The trace benchmark runs end to end at a small size and prints both ratios (never asserted: wall time is noise)."""

from __future__ import annotations

import re

import pytest
from support.scripts import load_benchmark


def test_the_benchmark_prints_the_recording_and_replay_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_benchmark("bench_trace")
    assert bench.main(["--mb", "1", "--repeats", "1"]) == 0
    recording, replay = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"MOCKUSB\+AMD copyin 1 MB recorded: \d+\.\d\dx the unrecorded time \(aim <= 1\.5: .+\)", recording
    )
    assert re.fullmatch(r"REPLAY\+AMD session with a 1 MB copyin: \d+\.\d\dx the emulator's throughput .*", replay)
