"""The ``tinyhil`` command: ``targets`` and ``run``."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tinyhil.cli import main
from tinyhil.cli.usage import EXIT_NO_TESTS, EXIT_STATUSES

FOUNDATION_TARGETS = {"NULL", "MOCKUSB+AMD", "MOCKKFD+AMD", "USB+AMD", "KFD+AMD"}


def test_targets_lists_every_target_with_availability(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["targets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    by_name = {line.split()[0]: line.split(None, 2)[1:] for line in lines}
    assert set(by_name) >= FOUNDATION_TARGETS
    assert by_name["NULL"][0] == "available"
    assert "exec" in by_name["NULL"][1]
    for name, (state, detail) in by_name.items():
        assert state in ("available", "unavailable"), name
        if state == "unavailable":
            assert detail.strip(), f"{name} is unavailable without a reason"


def test_targets_json_is_for_machines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["targets", "--json"]) == 0
    rows = {row["target"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) >= FOUNDATION_TARGETS
    assert rows["NULL"]["available"] is True and rows["NULL"]["reason"] is None
    assert "copyin" in rows["NULL"]["capabilities"]
    assert rows["USB+AMD"]["emulated"] is False
    for row in rows.values():
        assert row["available"] or row["reason"]


def test_the_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "tinyhil"
    done = subprocess.run([str(script), "targets"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "NULL" in done.stdout


def test_run_on_null_writes_junit_and_summary_and_exits_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report"
    assert main(["run", "--target", "NULL", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "running the portable suite on NULL" in out
    assert "test_alloc_gives_distinct_non_overlapping_buffers" in out and "pass" in out
    suites = ET.parse(report / "junit.xml").getroot()
    cases = list(suites.iter("testcase"))
    assert cases and all(c.find("properties/property[@name='target']") is not None for c in cases)
    summary = json.loads((report / "summary.json").read_text())
    assert summary["exitstatus"] == 0
    assert {r["target"] for r in summary["results"]} == {"NULL"}
    assert summary["counts"]["passed"] >= 10 and summary["counts"]["failed"] == summary["counts"]["error"] == 0
    for result in summary["results"]:
        assert result["outcome"] in ("passed", "skipped") and result["duration_s"] >= 0


def test_run_accepts_a_relative_report_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--target", "NULL", "--report", "rel/report", "--", "-k", "alloc"]) == 0
    assert json.loads((tmp_path / "rel" / "report" / "summary.json").read_text())["counts"]["passed"] >= 1


def test_run_exits_non_zero_when_a_test_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "test_broken.py"
    suite.write_text("def test_good(hil_device):\n    pass\n\ndef test_bad(hil_device):\n    assert 1 == 2\n")
    report = tmp_path / "report"
    status = main(["run", "--target", "NULL", "--suite", str(suite), "--report", str(report)])
    assert status != 0
    out = capsys.readouterr().out
    assert "test_bad" in out and "FAIL" in out
    summary = json.loads((report / "summary.json").read_text())
    outcomes = {r["nodeid"].split("::")[-1]: r["outcome"] for r in summary["results"]}
    assert outcomes == {"test_good[NULL]": "passed", "test_bad[NULL]": "failed"}


def test_run_with_no_available_target_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--target", "NOPE+X", "--report", str(tmp_path)]) == 2
    assert "unknown target 'NOPE+X'" in capsys.readouterr().err


def test_run_defaults_to_every_available_emulated_target(tmp_path: Path) -> None:
    env = {**os.environ, "DEV": ""}
    script = Path(sys.executable).parent / "tinyhil"
    done = subprocess.run(
        [str(script), "run", "--report", str(tmp_path), "--", "-k", "alloc"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    ran = {t["name"] for t in summary["targets"]}
    assert "NULL" in ran and not ({"USB+AMD", "KFD+AMD"} & ran)


def _ids(report: Path) -> tuple[list[str], ...]:
    """Every test id the reports carry: summary keys, node ids and tests, JUnit names, the page's data-test values."""
    results = json.loads((report / "summary.json").read_text())["results"]
    cases = ET.parse(report / "junit.xml").getroot().iter("testcase")
    page = sorted(set(re.findall(r'data-test="([^"]*)"', (report / "report.html").read_text())))
    return (sorted(r["key"] for r in results), sorted(r["nodeid"] for r in results), sorted(r["test"] for r in results),
            sorted(f"{c.get('classname')}::{c.get('name')}" for c in cases), page)  # fmt: skip


def test_two_checkouts_of_one_suite_give_identical_test_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    found = []
    for checkout, relative in (("one/checkout", False), ("another/place/checkout", True)):
        tests = tmp_path / checkout / "tests"
        (tests / "sub").mkdir(parents=True)
        (tests / "test_top.py").write_text("def test_same(hil_device):\n    pass\n")
        (tests / "sub" / "test_deep.py").write_text("def test_same(hil_device):\n    assert False, 'deep'\n")
        report = tmp_path / checkout / "report"
        if relative:  # the second given relative to where the command runs, as a CI job does
            monkeypatch.chdir(tmp_path / checkout)
        suite = "tests" if relative else str(tests)
        assert main(["run", "--target", "NULL", "--suite", suite, "--report", str(report)]) == 1
        found.append(_ids(report))
    assert found[0] == found[1]
    keys, _, _, cases, _ = found[0]
    assert len(keys) == len(cases) == 2  # one name in two files: two tests
    assert not any(str(tmp_path) in text or "checkout" in text for ids in found[0] for text in ids)
    out = capsys.readouterr().out
    assert "sub/test_deep.py::test_same" in out and "test_top.py::test_same" in out  # two matrix rows


def test_run_honours_the_traceback_style_passed_to_pytest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "test_tb.py"
    suite.write_text("def helper():\n    assert 1 == 2\n\ndef test_bad(hil_device):\n    helper()\n")
    texts = {}
    for style in ("long", "short"):
        report = tmp_path / style
        args = ["run", "--target", "NULL", "--suite", str(suite), "--report", str(report), "--", f"--tb={style}"]
        assert main(args) == 1
        (result,) = json.loads((report / "summary.json").read_text())["results"]
        texts[style] = result["longrepr"]
    assert "def helper():" in texts["long"] and "test_tb.py:2" in texts["long"]
    assert result["nodeid"] == "test_tb.py::test_bad[NULL]"  # a one-file suite's root is the file's directory
    assert "def helper():" not in texts["short"] and "test_tb.py:2: in helper" in texts["short"]


@pytest.mark.parametrize("command", [["run"], ["farm", "run"]])
def test_a_run_of_an_empty_suite_exits_with_its_documented_status(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    args = [*command, "--target", "NULL", "--suite", str(tmp_path / "empty"), "--report", str(tmp_path / "report")]
    if command[0] == "farm":
        args += ["--state", str(tmp_path / "state")]
    assert main(args) == EXIT_NO_TESTS
    assert "no test was collected; no report written" in capsys.readouterr().err
    assert not (tmp_path / "report" / "summary.json").exists()
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    assert f"  {EXIT_NO_TESTS:>3}  {EXIT_STATUSES[EXIT_NO_TESTS][:40]}" in capsys.readouterr().out


def test_reports_are_readable_by_everyone_under_umask_022(tmp_path: Path) -> None:
    suite = tmp_path / "test_one.py"
    suite.write_text("def test_one(hil_target):\n    pass\n")
    script = Path(sys.executable).parent / "tinyhil"
    report = tmp_path / "report"
    run = shlex.join([str(script), "run", "--target", "NULL", "--suite", str(suite), "--report", str(report)])
    command = f"umask 022 && exec {run}"
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("summary.json", "junit.xml", "report.html"):
        assert stat.S_IMODE((report / name).stat().st_mode) == 0o644, name  # 0o666 less the umask, as open() gives
