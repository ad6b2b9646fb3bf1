"""A farm run's metadata, built in one place (:func:`run_metadata`) and shown by every report: ``summary.json``'s
top-level fields and ``boards[]`` versions, ``junit.xml``'s suite properties, and ``report.html``'s header
(docs/farm.md, "Run metadata").

The revision under test is the git commit of the suite's checkout (``git -C ROOT rev-parse HEAD``, with a timeout),
``None`` where the suite's root is not in a git checkout or git cannot say. A board's firmware and driver versions
are what its health probe read in this run (:class:`~tinyhil.device_farm.health.states.ProbeResult` ``versions``);
``None`` where the probe cannot read them or the board was not probed in this run.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import shlex
import socket
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import tinyhil
from tinyhil.cache import file_sha256
from tinyhil.device_farm.collection import suite_root

__all__ = [
    "GIT_TIMEOUT_S",
    "VERSION_NAMES",
    "RunMetadata",
    "git_revision",
    "iso_time",
    "run_metadata",
]

GIT_TIMEOUT_S: Final = 5.0  # a git that hangs (a network file system, a lock) costs the run this much, no more
_COMMIT_HEX_DIGITS: Final = frozenset({40, 64})  # sha1 and sha256 repositories
VERSION_NAMES: Final = ("firmware", "driver")  # what a probe may read of a board


def iso_time(unix_s: float) -> str:
    """``unix_s`` as ISO 8601 in UTC to the second (``2026-12-06T12:52:40+00:00``)."""
    return dt.datetime.fromtimestamp(unix_s, dt.UTC).isoformat(timespec="seconds")


def git_revision(directory: Path | None, *, timeout_s: float = GIT_TIMEOUT_S) -> str | None:
    """The commit checked out where ``directory`` is (``git -C DIR rev-parse HEAD``), or ``None``: not a checkout,
    no git, or no answer within ``timeout_s``."""
    if directory is None:
        return None
    try:
        done = subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = done.stdout.strip()
    ok = done.returncode == 0 and len(commit) in _COMMIT_HEX_DIGITS and all(c in "0123456789abcdef" for c in commit)
    return commit if ok else None


def _root(suite: Sequence[str], pyargs: bool) -> Path | None:
    if not pyargs:
        return suite_root(suite)
    try:
        spec = importlib.util.find_spec(suite[0]) if suite else None
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None else None
    return Path(origin).parent if origin else None


@dataclass(frozen=True, slots=True)
class RunMetadata:
    """What a run's reports say about the run itself; ``versions`` maps a board's id to what its probe read
    (``firmware``, ``driver``)."""

    run_id: str
    started: float  # Unix time
    finished: float
    command: tuple[str, ...]
    tinyhil_version: str
    revision: str | None
    host: str  # where the run was driven
    hosts: tuple[str, ...]  # every host of the run's boards
    hwmap_sha256: str | None
    versions: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        return max(self.finished - self.started, 0.0)

    def summary_fields(self) -> dict[str, Any]:
        """The run's fields of ``summary.json`` (beside ``run_id`` and ``tinyhil_version``, which every document
        carries)."""
        return {"run_id": self.run_id, "tinyhil_version": self.tinyhil_version, "started": self.started,
                "finished": self.finished, "duration_s": self.duration_s, "command": list(self.command),
                "revision": self.revision, "host": self.host, "hosts": list(self.hosts),
                "hwmap_sha256": self.hwmap_sha256}  # fmt: skip

    def board_versions(self, board: str) -> dict[str, str | None]:
        """``firmware`` and ``driver`` of ``board`` (``None`` where its probe did not read them)."""
        read = self.versions.get(board, {})
        return {name: read.get(name) for name in VERSION_NAMES}

    def items(self, *, boards: bool = True) -> list[tuple[str, str]]:
        """The metadata as (name, text) pairs, in one order: JUnit's suite properties and the page's header (which
        shows the boards' versions in its boards table instead: ``boards=False``). A board's versions are
        ``board.<id>.firmware`` and ``board.<id>.driver``; a missing value is ``-``."""
        shown = [("run_id", self.run_id), ("started", iso_time(self.started)), ("finished", iso_time(self.finished)),
                 ("duration_s", f"{self.duration_s:.3f}"), ("command", shlex.join(self.command)),
                 ("tinyhil_version", self.tinyhil_version), ("revision", self.revision or "-"), ("host", self.host),
                 ("hosts", " ".join(self.hosts) or "-"), ("hwmap_sha256", self.hwmap_sha256 or "-")]  # fmt: skip
        for board in sorted(self.versions) if boards else ():
            shown += [(f"board.{board}.{name}", value or "-") for name, value in self.board_versions(board).items()]
        return shown


def run_metadata(
    *,
    run_id: str,
    started: float,
    finished: float,
    command: Sequence[str],
    suite: Sequence[str],
    pyargs: bool,
    hosts: Iterable[str],
    hwmap_path: str | None,
    versions: Mapping[str, Mapping[str, str]] | None = None,
) -> RunMetadata:
    """The metadata of a run of ``suite`` (the revision of its root's checkout; with ``pyargs``, of its first
    package's directory) on boards at ``hosts``, with the map read from ``hwmap_path`` (``None``, or a name that is
    no file: an inventory made without a map, no hash)."""
    hashed = file_sha256(hwmap_path) if hwmap_path is not None and Path(hwmap_path).is_file() else None
    revision = git_revision(_root(suite, pyargs))
    read = {board: dict(found) for board, found in (versions or {}).items()}
    return RunMetadata(run_id, started, finished, tuple(command), tinyhil.__version__, revision, socket.gethostname(),
                       tuple(sorted(set(hosts))), hashed, read)  # fmt: skip
