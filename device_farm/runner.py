"""Run the portable HIL suite (or any pytest suite) on targets, in a pytest subprocess, with reports.

The suite runs in its own process so a crashing test cannot take the caller down, and with its own ini file so
the caller's working directory (and any pytest configuration in it) does not leak in.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

from tinyhil.errors import InvalidArgument
from tinyhil.fixtures import SUITE_PACKAGE

__all__ = [
    "JUNIT_NAME",
    "MANAGED_PYTEST_OPTIONS",
    "SUMMARY_NAME",
    "RunOutcome",
    "check_run_arguments",
    "pytest_command",
    "run_suite",
]

JUNIT_NAME: Final = "junit.xml"
SUMMARY_NAME: Final = "summary.json"
_INI: Final = "[pytest]\njunit_family = xunit1\n"
# Options run_suite sets itself: given again through pytest_args they would run targets, or write reports, that the
# run's header, matrix and report directory do not name.
MANAGED_PYTEST_OPTIONS: Final = {
    "--hil-target": "--target",
    "--hil-summary": "--report",
    "--junitxml": "--report",
    "--junit-xml": "--report",
}


def _is_importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def check_run_arguments(report_dir: Path, suite: Sequence[str], pytest_args: Sequence[str]) -> None:
    """Check what a run needs before it starts: a report directory that can be created, suites that exist, and no
    pytest option that run_suite manages itself.

    Raises:
        InvalidArgument: the first problem, naming the bad value and what was expected.
    """
    for arg in pytest_args:
        option = arg.split("=", 1)[0]
        if option in MANAGED_PYTEST_OPTIONS:
            raise InvalidArgument(
                f"pytest argument {arg!r}: the run sets {option} itself; use {MANAGED_PYTEST_OPTIONS[option]} instead"
            )
    for entry in suite:
        if not Path(entry).exists() and not _is_importable(entry):
            raise InvalidArgument(f"suite {entry!r}: no such file or directory, and no importable package of that name")
    if report_dir.exists() and not report_dir.is_dir():
        raise InvalidArgument(f"report directory {str(report_dir)!r} is a file, expected a directory")
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidArgument(
            f"report directory {str(report_dir)!r} cannot be created ({exc.strerror or type(exc).__name__})"
        ) from None


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What a suite run produced: pytest's exit status, the report files and the parsed summary."""

    exitstatus: int
    junit_path: Path
    summary_path: Path
    summary: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.exitstatus == 0


def pytest_command(report_dir: Path) -> list[str]:
    """The start of every pytest command a run spawns: its own ini file and ``report_dir`` as rootdir (and as the
    working directory the caller gives it), so the caller's configuration does not leak in and node ids are the
    same in every process of a run (collection, shards)."""
    ini = report_dir / "pytest.ini"
    ini.write_text(_INI)
    return [sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(report_dir), "-p", "no:cacheprovider"]


def run_suite(
    targets: Sequence[str],
    report_dir: Path,
    *,
    suite: Sequence[str] = (SUITE_PACKAGE,),
    pyargs: bool = True,
    pytest_args: Sequence[str] = (),
    stream: TextIO | None = None,
    strict: bool = False,
) -> RunOutcome:
    """Run ``suite`` on ``targets``, writing ``junit.xml`` and ``summary.json`` into ``report_dir``.

    Progress (pytest's own) is streamed to ``stream`` (default: stdout). ``strict`` passes ``--hil-strict``: a
    target that cannot run here fails the run at start instead of skipping its tests.

    Raises:
        InvalidArgument: no target was given, or :func:`check_run_arguments` refuses an argument.
    """
    if not targets:
        raise InvalidArgument("targets=[], expected at least one target string (see `tinyhil targets`)")
    out = stream or sys.stdout
    report_dir = report_dir.resolve()  # pytest runs with the report directory as its working directory
    check_run_arguments(report_dir, suite, pytest_args)
    suite = [str(Path(entry).resolve()) if Path(entry).exists() else entry for entry in suite]  # cwd is report_dir
    junit, summary = report_dir / JUNIT_NAME, report_dir / SUMMARY_NAME
    summary.unlink(missing_ok=True)
    command = [
        *pytest_command(report_dir),
        *(["--pyargs"] if pyargs else []),
        *suite,
        "--junitxml",
        str(junit),
        "--hil-summary",
        str(summary),
        *(f"--hil-target={t}" for t in targets),
        *(["--hil-strict"] if strict else []),
        "-rfEs",
        *pytest_args,
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=report_dir)
    assert process.stdout is not None
    for line in process.stdout:
        out.write(line)
        out.flush()
    exitstatus = process.wait()
    document: dict[str, Any] = json.loads(summary.read_text()) if summary.exists() else {"results": [], "targets": []}
    return RunOutcome(exitstatus, junit, summary, document)
