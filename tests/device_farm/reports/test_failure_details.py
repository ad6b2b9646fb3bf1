"""A failing test's traceback, captured output and log records reach every report of a farm run (junit.xml,
summary.json, report.html) and the terminal's closing failure summary."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tinyhil.cli import main
from tinyhil.device_farm.reports.summary import junit_unescape
from tinyhil.fixtures.summary import summary_problems

SUITE_NAME = "test_failing_suite.py"
SUITE = """
import logging
import sys


def test_passes(hil_target):
    pass


def test_boom(hil_target):
    print("a line on stdout")
    print("a line on stderr", file=sys.stderr)
    logging.getLogger("suite").warning("a log record")
    assert hil_target.name == "elsewhere", "ran on the wrong target"
"""
ASSERT_LINE = 1 + SUITE.splitlines().index('    assert hil_target.name == "elsewhere", "ran on the wrong target"')
FAILING_ID = f"{SUITE_NAME}::test_boom[NULL]"


@dataclass
class FarmRun:
    reports: Path
    output: str


@pytest.fixture(scope="module")
def farm_run(tmp_path_factory: pytest.TempPathFactory) -> FarmRun:
    root = tmp_path_factory.mktemp("failing")
    (root / "suite").mkdir()
    (root / "suite" / SUITE_NAME).write_text(SUITE)
    with pytest.MonkeyPatch.context() as patch:
        lines: list[str] = []
        patch.setattr("sys.stdout", _Lines(lines))
        status = main(["run", "--suite", str(root / "suite"), "--report", str(root / "run"), "--target", "NULL"])
    assert status == 1
    return FarmRun(root / "run", "".join(lines))


class _Lines:
    """A stdout that keeps what is written (the module-scoped run cannot use capsys)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def write(self, text: str) -> int:
        self.lines.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _failing_case(root: ET.Element) -> ET.Element:
    cases = [c for c in root.iter("testcase") if c.find("failure") is not None]
    assert len(cases) == 1
    return cases[0]


def test_junit_carries_the_traceback_output_and_log(farm_run: FarmRun) -> None:
    root = ET.parse(farm_run.reports / "junit.xml").getroot()
    case = _failing_case(root)
    assert case.get("classname") == SUITE_NAME.removesuffix(".py")  # relative to the suite's root, no checkout path
    failure = case.find("failure")
    assert failure is not None and failure.text is not None
    traceback = junit_unescape(failure.text)
    assert f"{SUITE_NAME}:{ASSERT_LINE}: AssertionError" in traceback
    assert 'assert hil_target.name == "elsewhere"' in traceback
    assert junit_unescape(failure.get("message") or "").startswith("AssertionError: ran on the wrong target")
    out, err = case.findtext("system-out") or "", case.findtext("system-err") or ""
    assert "a line on stdout" in out and "a log record" in out
    assert "a line on stderr" in err
    passing = [c for c in root.iter("testcase") if c.get("name") == "test_passes[NULL]"]
    assert len(passing) == 1 and passing[0].find("system-out") is None  # a pass keeps no output


def test_the_summary_carries_them_and_follows_its_schema(farm_run: FarmRun) -> None:
    document = json.loads((farm_run.reports / "summary.json").read_text())
    assert summary_problems(document) == []
    by_id = {r["nodeid"]: r for r in document["results"]}
    failing = by_id[FAILING_ID]
    assert failing["key"] == f"{FAILING_ID}@NULL"
    assert f"{SUITE_NAME}:{ASSERT_LINE}: AssertionError" in failing["longrepr"]
    assert "a line on stdout" in failing["stdout"] and "a line on stderr" in failing["stderr"]
    assert "a log record" in failing["log"] and "WARNING" in failing["log"]
    assert not {"longrepr", "stdout", "stderr", "log"} & set(by_id[f"{SUITE_NAME}::test_passes[NULL]"])


@dataclass
class _Page(HTMLParser):
    """The failures' anchors and collapsed details, and the matrix cells' links."""

    anchors: dict[str, str] = field(default_factory=dict)  # failure anchor -> its data-test
    details: dict[str, str] = field(default_factory=dict)  # data-detail -> its text
    links: list[str] = field(default_factory=list)
    _detail: str | None = None

    def __post_init__(self) -> None:
        super().__init__()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "li" and (found.get("id") or "").startswith("failure-"):
            self.anchors[str(found["id"])] = str(found.get("data-test"))
        elif tag == "details":
            self._detail = found.get("data-detail")
            self.details[str(self._detail)] = ""
        elif tag == "a" and (found.get("href") or "").startswith("#"):
            self.links.append(str(found["href"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self._detail = None

    def handle_data(self, data: str) -> None:
        if self._detail is not None:
            self.details[self._detail] += data


def test_the_page_shows_them_collapsed_and_the_matrix_links_to_them(farm_run: FarmRun) -> None:
    page = _Page()
    page.feed((farm_run.reports / "report.html").read_text())
    assert page.anchors == {"failure-1": FAILING_ID}
    assert page.links == ["#failure-1"]  # the failing cell; the passing one links nowhere
    assert f"{SUITE_NAME}:{ASSERT_LINE}: AssertionError" in page.details["longrepr"]
    assert "a line on stdout" in page.details["stdout"] and "a line on stderr" in page.details["stderr"]
    assert "a log record" in page.details["log"]


def test_the_terminal_ends_with_a_failure_summary(farm_run: FarmRun) -> None:
    results = json.loads((farm_run.reports / "summary.json").read_text())["results"]
    board = next(r["board"] for r in results if r["nodeid"] == FAILING_ID)
    lines = farm_run.output.rstrip("\n").splitlines()
    assert "short failure summary" in lines[-3]
    assert lines[-2] == f"FAILED {FAILING_ID} on NULL (board {board}): AssertionError: ran on the wrong target"
    assert lines[-1] == f"  details: {farm_run.reports.resolve() / 'report.html'}#failure-1"
