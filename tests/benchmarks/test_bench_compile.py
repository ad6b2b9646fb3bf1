"""The compile benchmark runs end to end at a small size (times are printed, never asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tinyhil.qemu.toolchains import qemucc_unavailable_reason

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_compile.py"
RATIO = r"\d+\.\d\dx"


@pytest.mark.parametrize("runner", ["", "docker"], ids=["default-runner", "forced-docker"])
def test_the_compile_benchmark_runs_at_a_small_size(monkeypatch: pytest.MonkeyPatch, runner: str) -> None:
    """With the default runner the qemu part runs where qemu is; forcing docker shows the precise skip here."""
    monkeypatch.setenv("TINYHIL_QEMU_RUNNER", runner)
    monkeypatch.delenv("PARALLEL", raising=False)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--kernels", "3", "--later", "2", "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(rf"ratio serial / pool: cold {RATIO}, warm {RATIO} \(workers=2\)", out), out
    reason = qemucc_unavailable_reason("aarch64")
    if reason is not None:
        assert f"qemu: skipped, target NULL:QEMUCC:aarch64 is unavailable here: {reason}" in out
        return
    assert re.search(r"first compile [\d.]+ ms \(includes start-up\), median of 2 later compiles", out), out
    assert re.search(rf"ratio new-process / server: {RATIO} per compile", out), out
    assert re.search(rf"ratio shared / per-worker: cold {RATIO}, warm {RATIO} \(workers=2\)", out), out
