"""The facts of a run that its ``runs`` row keeps and the reports do not compute: the suite's key, the command
line, the revision of the suite's checkout and the hardware map's hash (:func:`run_facts`)."""

from __future__ import annotations

import hashlib
import importlib.util
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import tinyhil
from tinyhil.device_farm.history.store import RunFacts
from tinyhil.device_farm.inventory.hwmap import HardwareMap

__all__ = ["map_hash", "revision", "run_facts", "suite_key"]

_GIT_TIMEOUT_S: Final = 10.0


def suite_key(suite: Sequence[str]) -> str:
    """How history names a suite: its entries (absolute paths, or packages) in order, one per line."""
    return "\n".join(suite)


def _location(entry: str) -> Path | None:
    """The folder of a suite entry: a path's (itself, when a folder), or an importable package's."""
    if Path(entry).exists():
        return Path(entry) if Path(entry).is_dir() else Path(entry).parent
    try:
        spec = importlib.util.find_spec(entry)
    except (ImportError, ValueError):
        return None
    return Path(spec.origin).parent if spec is not None and spec.origin else None


def revision(suite: Sequence[str]) -> str | None:
    """The git commit checked out where the suite's first entry lives (a path, or a package), or ``None`` (not in
    a git checkout)."""
    where = next((found for entry in suite if (found := _location(entry)) is not None), None)
    if where is None:
        return None
    try:
        done = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT_S, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


def map_hash(hwmap: HardwareMap) -> str | None:
    """The SHA-256 of the hardware map's file, or ``None`` for a map made without one (emulated boards)."""
    path = Path(hwmap.path)
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    except OSError:
        return None


def run_facts(run_id: str, suite: Sequence[str], hwmap: HardwareMap, report: Path, *, started: float,
              finished: float, exitstatus: int, complete: bool) -> RunFacts:  # fmt: skip
    """The ``runs`` row of a run: the arguments, and what this process and the suite's checkout say."""
    hosts = tuple(sorted({board.host for board in hwmap.boards}))
    return RunFacts(run_id, suite_key(suite), started, finished, shlex.join(sys.argv), tinyhil.__version__,
                    revision(suite), hosts, map_hash(hwmap), str(report), exitstatus, complete)  # fmt: skip
