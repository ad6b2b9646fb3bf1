"""Collecting a run's suite once, and the one shape of the pytest commands a run spawns.

A run's pytest processes (collection, shards) use their own ini file and the run directory as rootdir, so the
caller's working directory (and any pytest configuration in it) does not leak in. Collection runs
``pytest --collect-only --hil-collect`` over the run's targets and reads back the test x target pairs it wrote
(``pairs.json``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from tinyhil.errors import InvalidArgument
from tinyhil.loading import LIMITS, Fields, parse_json, read_capped

__all__ = [
    "NO_TESTS_COLLECTED",
    "PAIRS_NAME",
    "CollectionFailed",
    "collect",
    "pytest_command",
    "read_pairs",
    "report_id",
    "suite_root",
]

PAIRS_NAME: Final = "pairs.json"
NO_TESTS_COLLECTED: Final = 5  # pytest's ExitCode.NO_TESTS_COLLECTED: an empty suite, or options that select nothing
_INI: Final = "[pytest]\njunit_family = xunit1\n"
_TEXT_MAX_CHARS: Final = LIMITS["pairs"].max_bytes  # a node id or a skip reason is kept whole: the file's cap bounds it


def pytest_command(report_dir: Path) -> list[str]:
    """The start of every pytest command a run spawns: its own ini file and ``report_dir`` as rootdir (and as the
    working directory the caller gives it), so the caller's configuration does not leak in and node ids are the
    same in every process of a run (collection, shards)."""
    ini = report_dir / "pytest.ini"
    ini.write_text(_INI)
    return [sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(report_dir), "-p", "no:cacheprovider"]


def suite_root(suite: Sequence[str]) -> Path | None:
    """The suite's root: the directory its paths share (a file's own directory); ``None`` for a suite of packages
    (``--pyargs``) only."""
    dirs = [str(Path(e) if Path(e).is_dir() else Path(e).parent) for e in suite if Path(e).exists()]
    return Path(os.path.commonpath(dirs)) if dirs else None


def report_id(pair: Mapping[str, Any], suite: Sequence[str]) -> str:
    """How the run's reports name ``pair``'s test: its file's path relative to the suite's root (the directory the
    suite's paths share; a file's own directory), then its name in the file, as pytest's node ids write it. The same
    suite in two checkouts gives the same ids. A suite of packages (``--pyargs``) keeps pytest's node id."""
    path, sep, name = str(pair["arg"]).partition("::")
    root = suite_root(suite)
    if root is None or not sep:
        return str(pair["nodeid"])
    try:
        relative = Path(path).relative_to(root)
    except ValueError:  # outside the suite's root (a conftest's own collector): pytest's id
        return str(pair["nodeid"])
    return f"{relative.as_posix()}::{name}"


class CollectionFailed(InvalidArgument):
    """Collecting the suite failed: ``exitstatus`` is pytest's (4 it refused its arguments,
    :data:`NO_TESTS_COLLECTED` nothing collected)."""

    def __init__(self, exitstatus: int, output: str) -> None:
        tail = " | ".join(output.strip().splitlines()[-5:])
        empty = exitstatus == NO_TESTS_COLLECTED
        what = "no test was collected" if empty else f"collecting the suite failed (pytest exit {exitstatus})"
        super().__init__(f"{what}: {tail}" if tail and not empty else what)
        self.exitstatus = exitstatus


def collect(run_dir: Path, suite: Sequence[str], targets: Sequence[str], *, pyargs: bool,
            pytest_args: Sequence[str]) -> list[dict[str, Any]]:  # fmt: skip
    """Collect ``suite`` on ``targets`` in ``run_dir``: the pairs, as :func:`read_pairs` reads them.

    Raises:
        CollectionFailed: pytest refused the arguments, or collected nothing.
    """
    pairs_path = run_dir / PAIRS_NAME
    command = [*pytest_command(run_dir), "--collect-only", "-q", "-p", "no:xdist", "--hil-collect", str(pairs_path),
               *(["--pyargs"] if pyargs else []), *suite, *(f"--hil-target={t}" for t in targets),
               *pytest_args]  # fmt: skip
    done = subprocess.run(command, cwd=run_dir, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not pairs_path.exists():
        raise CollectionFailed(done.returncode, done.stdout + done.stderr)
    return read_pairs(pairs_path)


def read_pairs(path: Path) -> list[dict[str, Any]]:
    """The pairs ``--hil-collect`` wrote to ``path``, each field the run reads typed: ``arg``, ``nodeid``, ``target``
    (a string or null), ``requires`` (strings), ``skip`` (a reason or null).

    Raises:
        FileFormatError: over ``LIMITS["pairs"]``, not JSON, or a pair's field missing or of the wrong type.
    """
    pairs = Fields(parse_json(read_capped(path, "pairs"), path), path).of_type("pairs", list)
    assert pairs is not None
    for number, pair in enumerate(pairs):
        fields = Fields(pair, path, prefix=f"pairs[{number}].")
        fields.string("arg", max_len=_TEXT_MAX_CHARS)
        fields.string("nodeid", max_len=_TEXT_MAX_CHARS)
        requires = fields.of_type("requires", list)
        if not all(isinstance(item, str) for item in requires or ()):
            raise fields.error("requires", f"{requires!r:.60}, expected a list of strings")
        for name in ("target", "skip"):  # read as pair[name]: present, a string or null
            if name not in fields.table:
                raise fields.error(name, "missing, expected a string or null")
            fields.string(name, required=False, max_len=_TEXT_MAX_CHARS, empty=name == "skip")
    return pairs
