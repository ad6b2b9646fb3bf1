"""Ordinary mistakes on the ``tinyhil`` command line: one line naming the bad value, a usage exit status, nothing
left behind, and no traceback; strict runs against targets that cannot run here (issue 13, items 3-5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tinyhil.cli import EXIT_UNAVAILABLE, EXIT_USAGE, main
from tinyhil.device_farm.inventory.hwmap import target_inventory
from tinyhil.pipes import OUTPUT_CLOSED_EXIT_STATUS
from tinyhil.registry import default_registry

TINYHIL = str(Path(sys.executable).parent / "tinyhil")


def _tinyhil(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    merged = {k: v for k, v in os.environ.items() if k != "DEV"} | (env or {})
    return subprocess.run([TINYHIL, *args], capture_output=True, text=True, env=merged, check=False)


def _one_line_error(done: subprocess.CompletedProcess[str], status: int, *fragments: str) -> str:
    assert done.returncode == status, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines, "no error message"
    for fragment in fragments:
        assert any(fragment in line for line in lines), (fragment, lines)
    return lines[0]


def test_a_closed_pipe_ends_targets_quietly() -> None:
    process = subprocess.Popen([TINYHIL, "targets", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()  # what `| head -1` does
    stderr = process.stderr.read().decode()
    assert process.wait() == 0
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr


PIPE_SUITE = """
import pytest


@pytest.mark.parametrize("n", range(3))
def test_one(hil_target, n):
    pass
"""


def test_a_run_whose_reader_closes_after_one_line_stops_cleanly_with_an_honest_report(tmp_path: Path) -> None:
    """``tinyhil run --report R | head -1``: no traceback, exit 141, and a report that is whole or marked
    incomplete, each result on the board that ran it (one slot: the second target's lane waits, then stops)."""
    suite, report = tmp_path / "test_pipe.py", tmp_path / "R"
    suite.write_text(PIPE_SUITE)
    command = [TINYHIL, "run", "--target", "NULL", "--target", "MOCKKFD+AMD", "--suite", str(suite), "--report",
               str(report), "--workers", "1"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "DEV"}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as process:
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline().startswith(b"tinyhil ")
        process.stdout.close()  # what `| head -1` does
        stderr = process.stderr.read().decode()
        status = process.wait(timeout=300)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert status == OUTPUT_CLOSED_EXIT_STATUS == 141
    summary = json.loads((report / "summary.json").read_text())
    keys = [r["key"] for r in summary["results"]]
    assert len(keys) == len(set(keys))  # no pair reported twice
    board_of = {b.targets[0]: b.id for b in target_inventory(default_registry().select(["NULL", "MOCKKFD+AMD"])).boards}
    assert all(r["board"] == board_of[r["target"]] for r in summary["results"]), summary["results"]
    assert summary["exitstatus"] == 141
    if summary["complete"]:
        assert len(keys) == 6
    else:
        assert "output closed" in summary["incomplete"] and sorted(summary["missing"] + keys) == sorted(
            f"{suite.name}::test_one[{t}-{n}]@{t}" for t in ("NULL", "MOCKKFD+AMD") for n in range(3)
        )
        assert 'id="incomplete"' in (report / "report.html").read_text()
        incomplete = ET.parse(report / "junit.xml").getroot().find("testsuite/properties/property[@name='incomplete']")
        assert incomplete is not None and incomplete.get("value") == summary["incomplete"]


@pytest.mark.parametrize("where", ["under-a-file", "in-proc"])
def test_a_report_directory_that_cannot_be_made_is_a_one_line_usage_error(tmp_path: Path, where: str) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    report = str(afile / "sub") if where == "under-a-file" else "/proc/nope"
    done = _tinyhil("run", "--target", "NULL", "--report", report)
    _one_line_error(done, EXIT_USAGE, repr(report), "cannot be created")
    assert "running the portable suite" not in done.stdout, "the error must come before anything runs"


def test_a_report_path_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep")
    assert main(["run", "--target", "NULL", "--report", str(afile)]) == EXIT_USAGE
    assert "is a file, expected a directory" in capsys.readouterr().err
    assert afile.read_text() == "keep"


def test_a_missing_suite_is_refused_before_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--target", "NULL", "--suite", "/nope", "--report", str(tmp_path / "r")]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert "suite '/nope': no such file or directory" in captured.err
    assert "reports:" not in captured.out and "test " not in captured.out
    assert not (tmp_path / "r").exists()


def _run_command(command: str, tmp_path: Path) -> list[str]:
    """``tinyhil run`` or ``tinyhil farm run`` on NULL, its state in ``tmp_path``: made by the one run constructor."""
    if command == "run":
        return ["run", "--target", "NULL"]
    return ["farm", "run", "--target", "NULL", "--state", str(tmp_path / "state")]


RUN_COMMANDS = ["run", "farm run"]


@pytest.mark.parametrize("command", RUN_COMMANDS)
@pytest.mark.parametrize("arg", ["--hil-target=MOCKUSB+AMD", "--hil-target", "--junitxml=x.xml", "--hil-summary=s"])
def test_pytest_arguments_cannot_override_what_the_run_manages(
    command: str, arg: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report"
    assert main([*_run_command(command, tmp_path), "--report", str(report), "--", arg, "MOCKUSB+AMD"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"tinyhil {command.split()[0]}: pytest argument ") and "the run sets" in err
    assert not (report / "summary.json").exists() and not (report / "pairs.json").exists()


@pytest.mark.parametrize("command", RUN_COMMANDS)
def test_both_runs_refuse_a_missing_suite_and_no_workers_alike(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = str(tmp_path / "r")
    assert main([*_run_command(command, tmp_path), "--suite", "/nope", "--report", report]) == EXIT_USAGE
    assert "suite '/nope': no such file or directory" in capsys.readouterr().err
    assert main([*_run_command(command, tmp_path), "--workers", "0", "--report", report]) == EXIT_USAGE
    assert "--workers 0, expected an integer >= 1" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_run_honours_dev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DEV", "NULL:CC")
    assert main(["run", "--report", str(tmp_path), "--", "-k", "alloc"]) == 0
    assert "running the portable suite on NULL:CC ($DEV)" in capsys.readouterr().out
    assert {t["name"] for t in json.loads((tmp_path / "summary.json").read_text())["targets"]} == {"NULL:CC"}


def test_an_empty_entry_in_a_target_list_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--target", "MOCKUSB+AMD,,NULL", "--report", str(tmp_path)]) == EXIT_USAGE
    assert "has an empty entry (position 2)" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["MOCKUSB:1+AMD", "MOCKKFD:999+AMD", "NULL:NOPE"])
def test_silently_ignored_parts_of_a_target_string_are_refused(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--target", text, "--report", str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("tinyhil run: ") and len(err.splitlines()) == 1 and text in err


def test_a_named_unavailable_target_fails_the_run_with_its_reason(tmp_path: Path) -> None:
    done = _tinyhil("run", "--target", "USB+AMD", "--report", str(tmp_path))
    first = _one_line_error(done, EXIT_UNAVAILABLE, "--allow-unavailable")
    assert first.startswith("tinyhil run: target USB+AMD (--target) cannot run here: ")
    assert not (tmp_path / "summary.json").exists()
    from_env = _tinyhil("run", "--report", str(tmp_path), env={"DEV": "KFD+AMD"})
    assert from_env.returncode == EXIT_UNAVAILABLE and "target KFD+AMD ($DEV) cannot run here" in from_env.stderr


def test_allow_unavailable_runs_and_counts_the_skips_per_target(tmp_path: Path) -> None:
    done = _tinyhil(
        "run", "--target", "USB+AMD,NULL", "--allow-unavailable", "--report", str(tmp_path), "--", "-k", "alloc"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    skipped = [r for r in summary["results"] if r["target"] == "USB+AMD"]
    assert skipped and all(r["outcome"] == "skipped" for r in skipped)
    tests = "test" if len(skipped) == 1 else "tests"
    assert f"unavailable: USB+AMD: {len(skipped)} {tests} skipped (" in done.stdout
    assert all(r["reason"].startswith("target USB+AMD is unavailable: ") for r in skipped)


def test_the_matrix_counts_a_target_the_same_whatever_runs_beside_it(tmp_path: Path) -> None:
    def cells(targets: str) -> dict[str, str]:
        report = str(tmp_path / targets)
        assert main(["run", "--target", targets, "--report", report, "--", "-q", "-k", "fill or gpus"]) in (0, 1)
        results = json.loads((tmp_path / targets / "summary.json").read_text())["results"]
        return {r["nodeid"]: r["outcome"] for r in results if r["target"] == "NULL"}

    alone = cells("NULL")
    assert "skipped" in alone.values() and "passed" in alone.values(), "the filter must keep both kinds of cell"
    assert alone == cells("NULL,MOCKKFD+AMD")


@pytest.mark.parametrize("value", ["-1", "nan", "abc"])
def test_a_bad_bench_tolerance_is_a_usage_error(value: str) -> None:
    done = _tinyhil("bench", "copyin", "--size", "4K", "--tolerance", value)
    assert done.returncode == EXIT_USAGE and "--tolerance" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--quarantine", "missing.toml"], "missing.toml: file: cannot read it"),
        (["--quarantine", "bad.toml"], "bad.toml:1: "),
        (["--hwmap", "missing.toml"], "missing.toml: file: cannot read it"),
        (["--suite", "missing_suite"], "suite 'missing_suite': no such file or directory"),
    ],
)
def test_farm_run_checks_its_input_files_before_it_prints_or_makes_the_run_directory(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.toml").write_text("[[quarantine]\n")
    before = set(tmp_path.iterdir())
    assert main([*_run_command("farm run", tmp_path), *args]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err and len(captured.err.splitlines()) == 1
    assert set(tmp_path.iterdir()) - before <= {tmp_path / "state"}  # no run directory (tinyhil-farm-...)
