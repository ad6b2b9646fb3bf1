"""What every run checks before it starts, and the one shape of the pytest commands a run spawns.

A run's pytest processes (collection, shards) use their own ini file and the run directory as rootdir, so the
caller's working directory (and any pytest configuration in it) does not leak in.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from tinyhil.errors import InvalidArgument

__all__ = [
    "JUNIT_NAME",
    "MANAGED_PYTEST_OPTIONS",
    "SUMMARY_NAME",
    "check_run_arguments",
    "pytest_command",
]

JUNIT_NAME: Final = "junit.xml"
SUMMARY_NAME: Final = "summary.json"
_INI: Final = "[pytest]\njunit_family = xunit1\n"
# Options a run sets itself: given again through pytest_args they would run targets, or write reports, that the
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
    pytest option that the run manages itself.

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


def pytest_command(report_dir: Path) -> list[str]:
    """The start of every pytest command a run spawns: its own ini file and ``report_dir`` as rootdir (and as the
    working directory the caller gives it), so the caller's configuration does not leak in and node ids are the
    same in every process of a run (collection, shards)."""
    ini = report_dir / "pytest.ini"
    ini.write_text(_INI)
    return [sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(report_dir), "-p", "no:cacheprovider"]
