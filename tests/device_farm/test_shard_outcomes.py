"""A farm shard sends its tests' serialized reports and the engine classifies them with the plugin's one rule:
a farm run reports every outcome (xfailed and xpassed included) as ``pytest --hil-summary`` does, in a summary
that follows the one schema."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from support.outcome_suite import EXPECTED, SUITE

from tinyhil.cli import main
from tinyhil.fixtures.summary import summary_problems


def test_a_farm_run_reports_every_outcome_by_the_plugins_rule(tmp_path: Path) -> None:
    suite = tmp_path / "test_every_outcome.py"
    suite.write_text(SUITE)
    report = tmp_path / "report"
    status = main(["run", "--target", "NULL", "--suite", str(suite), "--report", str(report), "--workers", "2"])
    document = json.loads((report / "summary.json").read_text())
    assert summary_problems(document) == []
    assert {r["test"].rsplit("::", 1)[1]: (r["outcome"], r["reason"]) for r in document["results"]} == EXPECTED
    assert status == document["exitstatus"] == 1 and document["complete"]
    cases = {c.get("name"): c for c in ET.parse(report / "junit.xml").iter("testcase")}
    xfailed = cases["test_xfails[NULL]"].find("skipped")  # JUnit has no xfail: a skip, as pytest writes it
    assert xfailed is not None and xfailed.get("message") == "known bug"
    assert len(cases["test_xpasses[NULL]"]) == 1  # its properties only: an xpass is no failure
