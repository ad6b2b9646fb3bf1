"""A farm run's metadata (device_farm/reports/metadata.py) in every report: summary.json's fields, junit.xml's
suite properties and attributes, report.html's header; the revision is the suite checkout's commit, the map's hash
its file's sha256, and an emulated KFD board's versions what its probe read."""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tinyhil.cli import main
from tinyhil.device_farm.reports.metadata import git_revision, iso_time
from tinyhil.device_farm.reports.summary import junit_unescape
from tinyhil.fixtures.summary import summary_problems

HWMAP = """
[[board]]
id = "kfd-one"
kind = "emulated"
emulated = { target = "MOCKKFD+AMD" }
"""
SUITE = "def test_runs(hil_target):\n    pass\n"
GIT = ("git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false")


@dataclass
class Run:
    root: Path
    reports: Path
    args: list[str]
    commit: str


@pytest.fixture(scope="module")
def farm_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("metadata")
    checkout = root / "checkout"
    (checkout / "tests").mkdir(parents=True)
    (checkout / "tests" / "test_meta.py").write_text(SUITE)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "suite"]):
        subprocess.run([*GIT, "-C", str(checkout), *command], check=True, env=env)
    commit = subprocess.run([*GIT, "-C", str(checkout), "rev-parse", "HEAD"], check=True, env=env,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    (root / "hwmap.toml").write_text(HWMAP)
    args = ["farm", "run", "--hwmap", str(root / "hwmap.toml"), "--suite", str(checkout / "tests"), "--report",
            str(root / "run"), "--state", str(root / "state")]  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdout", io.StringIO())
        assert main(args) == 0
    return Run(root, root / "run", args, commit)


def _summary(run: Run) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((run.reports / "summary.json").read_text())
    return document


def test_the_summary_names_the_run_its_revision_map_hosts_and_board_versions(farm_run: Run) -> None:
    summary = _summary(farm_run)
    assert summary_problems(summary) == []
    assert summary["revision"] == farm_run.commit
    assert summary["hwmap_sha256"] == hashlib.sha256((farm_run.root / "hwmap.toml").read_bytes()).hexdigest()
    assert summary["command"] == ["tinyhil", *farm_run.args]
    assert summary["started"] <= summary["finished"]
    assert summary["duration_s"] == pytest.approx(summary["finished"] - summary["started"])
    assert summary["host"] == socket.gethostname() and summary["hosts"] == [socket.gethostname()]
    (board,) = summary["boards"]
    assert board["driver"].startswith("amdkfd ioctl 1.")  # what the emulated amdkfd answers to AMDKFD_IOC_GET_VERSION
    assert "fw_version" in board["firmware"]  # the emulated GPU's topology node's microcode versions


def test_junit_carries_the_same_metadata(farm_run: Run) -> None:
    summary = _summary(farm_run)
    suite = ET.parse(farm_run.reports / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    properties = {p.get("name"): junit_unescape(str(p.get("value"))) for p in suite.findall("properties/property")}
    assert properties["run_id"] == summary["run_id"] and properties["revision"] == summary["revision"]
    assert properties["started"] == iso_time(summary["started"]) == suite.get("timestamp")
    assert properties["hwmap_sha256"] == summary["hwmap_sha256"] and properties["hosts"] == " ".join(summary["hosts"])
    assert properties["tinyhil_version"] == summary["tinyhil_version"]
    assert properties["command"].split() == summary["command"]
    assert properties["board.kfd-one.driver"] == summary["boards"][0]["driver"]
    assert suite.get("hostname") == summary["host"] and float(str(suite.get("time"))) == pytest.approx(
        summary["duration_s"], abs=1e-3
    )


class _Header(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, str] = {}
        self._row: str | None = None
        self._in_td = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr" and "data-name" in found:
            self._row = str(found["data-name"])
            self.rows[self._row] = ""
        self._in_td = tag == "td" and self._row is not None

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None
        self._in_td = False

    def handle_data(self, data: str) -> None:
        if self._in_td and self._row is not None:
            self.rows[self._row] += data


def test_the_page_shows_the_same_metadata_as_junit(farm_run: Run) -> None:
    header = _Header()
    page = (farm_run.reports / "report.html").read_text()
    header.feed(page)
    suite = ET.parse(farm_run.reports / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    properties = {str(p.get("name")): str(p.get("value")) for p in suite.findall("properties/property")}
    run = {name: value for name, value in properties.items() if not name.startswith(("count.", "board."))}
    assert header.rows == run
    versions = f"<td>{properties['board.kfd-one.firmware']}</td><td>{properties['board.kfd-one.driver']}</td></tr>"
    assert versions in page  # the boards table's last two columns


def test_a_directory_outside_any_checkout_has_no_revision(tmp_path: Path) -> None:
    assert git_revision(tmp_path) is None  # pytest's tmp_path lies outside every git checkout
    assert git_revision(None) is None
    assert git_revision(tmp_path / "missing") is None
