"""Run the portable HIL suite (or any pytest suite) on targets, in a pytest subprocess, with reports.

The suite runs in its own process so a crashing test cannot take the caller down, and with its own ini file so
the caller's working directory (and any pytest configuration in it) does not leak in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

from tinyhil.errors import InvalidArgument
from tinyhil.fixtures import SUITE_PACKAGE

__all__ = ["JUNIT_NAME", "SUMMARY_NAME", "RunOutcome", "run_suite"]

JUNIT_NAME: Final = "junit.xml"
SUMMARY_NAME: Final = "summary.json"
_INI: Final = "[pytest]\njunit_family = xunit1\n"


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


def run_suite(
    targets: Sequence[str],
    report_dir: Path,
    *,
    suite: Sequence[str] = (SUITE_PACKAGE,),
    pyargs: bool = True,
    pytest_args: Sequence[str] = (),
    stream: TextIO | None = None,
) -> RunOutcome:
    """Run ``suite`` on ``targets``, writing ``junit.xml`` and ``summary.json`` into ``report_dir``.

    Progress (pytest's own) is streamed to ``stream`` (default: stdout).

    Raises:
        InvalidArgument: no target was given.
    """
    if not targets:
        raise InvalidArgument("targets=[], expected at least one target string (see `tinyhil targets`)")
    out = stream or sys.stdout
    report_dir = report_dir.resolve()  # pytest runs with the report directory as its working directory
    report_dir.mkdir(parents=True, exist_ok=True)
    junit, summary = report_dir / JUNIT_NAME, report_dir / SUMMARY_NAME
    summary.unlink(missing_ok=True)
    ini = report_dir / "pytest.ini"
    ini.write_text(_INI)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(ini),
        "--rootdir",
        str(report_dir),
        "-p",
        "no:cacheprovider",
        *(["--pyargs"] if pyargs else []),
        *suite,
        "--junitxml",
        str(junit),
        "--hil-summary",
        str(summary),
        *(f"--hil-target={t}" for t in targets),
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
