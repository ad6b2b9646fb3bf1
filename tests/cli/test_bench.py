"""``tinyhil bench copyin``: the timing model's predicted copyin throughput per protocol revision vs hardware."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from tinyhil import InvalidArgument, open_target
from tinyhil.cli import bench as bench_module
from tinyhil.cli import main
from tinyhil.cli.bench import (
    DEFAULT_TOLERANCE,
    bench_copyin,
    check_tolerance,
    format_size,
    largest_alloc_bytes,
    parse_size,
)
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


# --- sizes past what the target can hold, and tolerances that mean nothing: refused up front, naming the limit -------
def _exit_status(argv: list[str]) -> int | str | None:
    """``main``'s status, whether it returns it or argparse exits with it (a bad option value)."""
    try:
        return main(argv)
    except SystemExit as exited:
        return exited.code


def _largest_copyin_bytes() -> int:
    """What MOCKUSB+AMD's own allocator lets a freshly opened device hold (the bench's first step)."""
    with open_target("MOCKUSB+AMD") as device:
        return largest_alloc_bytes(device, 1 << 40)


def test_a_copyin_larger_than_the_target_holds_names_the_largest_that_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_data(seed: int) -> None:
        raise AssertionError("the bench made its data before checking the size")

    monkeypatch.setattr(bench_module, "np", SimpleNamespace(random=SimpleNamespace(default_rng=no_data)))
    largest = _largest_copyin_bytes()
    expected = (
        f"size 1073741824 bytes (1G) exceeds the largest copyin MOCKUSB+AMD can hold, {largest:#x} bytes "
        f"({format_size(largest)}); pass --size {largest >> 20}M or less"
    )
    with pytest.raises(InvalidArgument) as info:
        bench_copyin("asm2464-usb3", 1 << 30)
    assert str(info.value) == expected
    assert 0 < parse_size(f"{largest >> 20}M") <= largest, "the suggested size parses and fits"


def test_the_largest_copyin_named_is_the_real_limit() -> None:
    largest = _largest_copyin_bytes()
    [result] = bench_copyin("asm2464-usb3", largest, revisions=("pipelined",))
    assert result.nbytes == largest
    with pytest.raises(InvalidArgument, match=rf"size {largest + 1} bytes .* can hold, {largest:#x} bytes"):
        bench_copyin("asm2464-usb3", largest + 1, revisions=("pipelined",))


def test_the_cli_reports_a_too_large_size_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_status(["bench", "copyin", "--size", "1G"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert re.search(r"size 1073741824 bytes \(1G\) exceeds the largest copyin MOCKUSB\+AMD can hold, 0x[0-9a-f]+ "
                     r"bytes \([\d.]+M\); pass --size \d+M or less$", err), err  # fmt: skip


@pytest.mark.parametrize(("nbytes", "text"), [(1 << 30, "1G"), (64 << 20, "64M"), (264171520, "251.9M"),
                                              (6144, "6K"), (4097, "4097")])  # fmt: skip
def test_format_size(nbytes: int, text: str) -> None:
    assert format_size(nbytes) == text


TOLERANCE_RULE = "expected a fraction of the hardware figure with 0 <= tolerance < 1"
BAD_TOLERANCES = [
    (-1, f"tolerance=-1, {TOLERANCE_RULE}"),
    (-0.01, f"tolerance=-0.01, {TOLERANCE_RULE}"),
    (1.0, f"tolerance=1.0, {TOLERANCE_RULE} \\(0.15 allows 15%; 1 or more would pass any slower prediction\\)$"),
    (15, f"tolerance=15, {TOLERANCE_RULE}.*; did you mean 0.15 \\(15%\\)\\?"),
    (float("nan"), f"tolerance=nan, {TOLERANCE_RULE}"),
    (float("inf"), f"tolerance=inf, {TOLERANCE_RULE}"),
    (True, "tolerance=True, expected a number"),
    ("0.1", "tolerance='0.1', expected a number"),
]


@pytest.mark.parametrize(("value", "message"), BAD_TOLERANCES)
def test_bad_tolerances_name_the_value_and_the_bound(value: object, message: str) -> None:
    with pytest.raises(InvalidArgument, match=f"^{message}"):
        check_tolerance(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, 0.0, DEFAULT_TOLERANCE, 0.999])
def test_good_tolerances_pass_as_floats(value: float) -> None:
    assert check_tolerance(value) == value and type(check_tolerance(value)) is float


def test_the_cli_refuses_a_negative_tolerance_before_benchmarking(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_status(["bench", "copyin", "--tolerance", "-1"]) == 2
    captured = capsys.readouterr()
    assert "tolerance=-1.0, expected a fraction of the hardware figure with 0 <= tolerance < 1" in captured.err
    assert "revision" not in captured.out, "nothing was benchmarked"
