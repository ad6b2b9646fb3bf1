"""``tinyhil bench copyin``: the timing model's predicted copyin throughput per protocol revision vs hardware."""

from __future__ import annotations

import re

import pytest

from tinyhil import InvalidArgument
from tinyhil.device_farm.bench import bench_copyin, parse_size
from tinyhil.device_farm.cli import main
from tinyhil.spec.copyin import HARDWARE_COPYIN_MBPS


def test_the_default_model_predicts_every_revision_within_15_percent_of_hardware(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "copyin", "--model", "asm2464-usb3"]) == 0
    out = capsys.readouterr().out
    rows = {
        m[1]: (float(m[2]), float(m[3])) for m in re.finditer(r"^(\S+)\s+([\d.]+)\s+(\d+)\s+[+-][\d.]+%$", out, re.M)
    }
    assert set(rows) == {"naive", "sentinel-sector", "pipelined"}, out
    for revision, (model, hardware) in rows.items():
        assert hardware == HARDWARE_COPYIN_MBPS[revision]
        assert abs(model / hardware - 1) <= 0.15, f"{revision}: {model} MB/s vs {hardware} MB/s on hardware"
    assert "every revision within 15%" in out


def test_the_model_orders_the_revisions_as_the_hardware_did() -> None:
    results = {r.revision: r.mbps for r in bench_copyin("asm2464-usb3", 4 << 20)}
    assert results["naive"] < results["sentinel-sector"] < results["pipelined"]


def test_a_tolerance_the_fit_misses_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "copyin", "--size", "1M", "--tolerance", "0.0001"]) == 1
    assert "NOT within" in capsys.readouterr().out


@pytest.mark.parametrize(("text", "nbytes"), [("64M", 64 << 20), ("512K", 512 << 10), ("1G", 1 << 30), ("4096", 4096),
                                              ("2MiB", 2 << 20), ("3mb", 3 << 20)])  # fmt: skip
def test_sizes(text: str, nbytes: int) -> None:
    assert parse_size(text) == nbytes


@pytest.mark.parametrize("text", ["", "0", "-1M", "1x", "M", "1.5M"])
def test_bad_sizes_name_the_input(text: str) -> None:
    with pytest.raises(InvalidArgument, match="size"):
        parse_size(text)


def test_bad_model_and_revision(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "copyin", "--model", "nope"]) == 2
    err = capsys.readouterr()
    assert "timing preset 'nope'" in err.err and "revision" not in err.out
    with pytest.raises(InvalidArgument, match="revisions"):
        bench_copyin("asm2464-usb3", 4096, revisions=("fast",))
