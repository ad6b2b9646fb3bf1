"""benchmarks/nv_hardware.py: its measurement over the CUDA driver double, and its answer where NV cannot run."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from support.scripts import load_benchmark

from tinyhil.nv import NvDevice
from tinyhil.nv.target import nv_unavailable_reason

script = load_benchmark("nv_hardware")


def test_measure_checks_a_round_trip_and_rates_both_copies_against_numpy(cuda: ModuleType, tmp_path: Path) -> None:
    double = cuda.CudaDouble()
    rates = script.measure(lambda: NvDevice("NV", double, compiler=cuda.DoubleCompiler(double, tmp_path)), 1 << 16, 2)
    assert set(rates) == {"numpy", "copyin", "copyout_into"} and all(rate > 0 for rate in rates.values())
    assert len(double.calls_to("cuMemcpyHtoDAsync")) == 3  # the checked round trip, then two timed rounds
    assert double.live()["allocations"] == 0  # the device was closed
    lines = script.report({"numpy": 2e9, "copyin": 1e9, "copyout_into": 5e8}, 64 << 20)
    assert lines == ["numpy copy 64 MB: 2.00 GB/s", "NV copyin 64 MB: 1.00 GB/s, 0.50x numpy copy",
                     "NV copyout_into 64 MB: 0.50 GB/s, 0.25x numpy copy"]  # fmt: skip


@pytest.mark.skipif(nv_unavailable_reason() is None, reason="NV can run here: the script would use the GPU")
def test_where_nv_cannot_run_the_script_says_why_and_exits_4(capsys: pytest.CaptureFixture[str]) -> None:
    assert script.main(["--skip-suite"]) == 4
    assert capsys.readouterr().err == f"NV cannot run here: {nv_unavailable_reason()}\n"
