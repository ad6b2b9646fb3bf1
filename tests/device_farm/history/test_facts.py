"""The ``runs`` row of a run: its reports' metadata (tested in tests/device_farm/reports/test_metadata.py) and the
suite's key."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tinyhil.device_farm.history.facts import run_facts, suite_key
from tinyhil.device_farm.reports.metadata import RunMetadata


@pytest.mark.parametrize("suite", [("/lab/a",), ("/lab/a", "/lab/b"), ("tinyhil.fixtures.suite",)])
def test_a_run_row_names_its_suite_by_its_entries_and_keeps_the_reports_metadata(
    suite: tuple[str, ...], tmp_path: Path
) -> None:
    metadata = RunMetadata("r1", 1.0, 2.0, ("tinyhil", "run", "--target", "a b"), "9.9", "abc123", "drv",
                           ("lab-0", "lab-1"), "f00d")  # fmt: skip
    facts = run_facts(metadata, suite, tmp_path / "report.html", exitstatus=1, complete=True)
    assert facts.suite == suite_key(suite) and facts.suite.splitlines() == list(suite)
    assert shlex.split(facts.command) == list(metadata.command)
    kept = (facts.run_id, facts.started, facts.finished, facts.version, facts.revision, facts.hosts, facts.map_hash)
    assert kept == (metadata.run_id, metadata.started, metadata.finished, metadata.tinyhil_version, metadata.revision,
                    metadata.hosts, metadata.hwmap_sha256)  # fmt: skip
    assert facts.report == str(tmp_path / "report.html") and facts.exitstatus == 1
