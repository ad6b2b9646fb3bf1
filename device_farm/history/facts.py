"""The ``runs`` row of a run (:func:`run_facts`): its reports' metadata (:mod:`~tinyhil.device_farm.reports.metadata`,
the one place that works out the command line, the revision under test and the map's hash) and the suite's key."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from tinyhil.device_farm.history.store import RunFacts
from tinyhil.device_farm.reports.metadata import RunMetadata

__all__ = ["run_facts", "suite_key"]


def suite_key(suite: Sequence[str]) -> str:
    """How history names a suite: its entries (absolute paths, or packages) in order, one per line."""
    return "\n".join(suite)


def run_facts(metadata: RunMetadata, suite: Sequence[str], report: Path, *, exitstatus: int,
              complete: bool) -> RunFacts:  # fmt: skip
    """The ``runs`` row of the run ``metadata`` describes, of ``suite``, its page at ``report``."""
    return RunFacts(metadata.run_id, suite_key(suite), metadata.started, metadata.finished,
                    shlex.join(metadata.command), metadata.tinyhil_version, metadata.revision, metadata.hosts,
                    metadata.hwmap_sha256, str(report), exitstatus, complete)  # fmt: skip
