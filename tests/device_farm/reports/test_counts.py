"""One outcome model feeds every output: a farm run with a result of every kind (passed, failed, error, skipped at
run time and at collection, xfailed, xpassed, flaky by a lost board and by a killed shard, quarantined) shows the
same counts on the console, in report.html, in junit.xml and in summary.json; the progress counter reaches the
total; the timeline shows the retried and killed attempts on a time axis, with a legend."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tinyhil.cli import main
from tinyhil.device_farm.journal import read_journal
from tinyhil.fixtures.outcomes import FAILING, KINDS, counts_line, junit_counts
from tinyhil.fixtures.summary import summary_problems

SUITE = """
import errno
import os
import signal
from pathlib import Path

import pytest

MARKS = Path({marks!r})


def _first_time(name):
    mark = MARKS / name
    if mark.exists():
        return False
    mark.write_text("")
    return True


@pytest.fixture
def broken_setup():
    raise RuntimeError("setup breaks")


def test_passes(hil_target):
    pass


def test_fails(hil_target):
    assert hil_target.name == "elsewhere"


def test_errors(hil_target, broken_setup):
    pass


def test_skips_at_run_time(hil_target):
    pytest.skip("decided while running")


@pytest.mark.hil(requires=["copyout"])
def test_skips_at_collection(hil_target):
    pass


@pytest.mark.xfail(reason="known bug")
def test_xfails(hil_target):
    assert False


@pytest.mark.xfail(reason="known bug, fixed")
def test_xpasses(hil_target):
    pass


def test_quarantined(hil_target):
    assert False, "a known failure"


def test_flaky_board(hil_target):
    if _first_time("board"):
        raise OSError(errno.ENODEV, "the board went away")


def test_flaky_killed(hil_target):
    if _first_time("killed"):
        os.kill(os.getpid(), signal.SIGKILL)
"""
QUARANTINE = "[[quarantine]]\ntest = 'test_quarantined'\nreason = 'known, issue 7'\nexpires = 2999-01-01\n"
# What the suite above is made of, one test per kind (two ways to skip, two ways to be flaky).
EXPECTED = {"passed": 1, "failed": 1, "error": 1, "skipped": 2, "xfailed": 1, "xpassed": 1, "flaky": 2,
            "quarantined": 1}  # fmt: skip


@dataclass
class Run:
    reports: Path
    output: str
    status: int


@pytest.fixture(scope="module")
def farm_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("counts")
    (root / "marks").mkdir()
    (root / "suite").mkdir()
    (root / "suite" / "test_every_kind.py").write_text(SUITE.format(marks=str(root / "marks")))
    (root / "quarantine.toml").write_text(QUARANTINE)
    args = ["farm", "run", "--suite", str(root / "suite"), "--report", str(root / "run"), "--state",
            str(root / "state"), "--target", "NULL", "--quarantine", str(root / "quarantine.toml")]  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        lines: list[str] = []
        patch.setattr("sys.stdout", _Lines(lines))
        status = main(args)
    return Run(root / "run", "".join(lines), status)


class _Lines:
    """A stdout that keeps what is written (the module-scoped run cannot use capsys); not a terminal."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def write(self, text: str) -> int:
        self.lines.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class _Page(HTMLParser):
    """The attributes of report.html's totals, matrix cells and timeline elements."""

    def __init__(self) -> None:
        super().__init__()
        self.totals: dict[str, str | None] = {}
        self.cells: list[dict[str, str | None]] = []
        self.bars: list[dict[str, str | None]] = []
        self.ticks = 0
        self.legend = False
        self.metadata: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        classes = (found.get("class") or "").split()
        if found.get("id") == "totals":
            self.totals = found
        elif tag == "td" and "data-kind" in found:
            self.cells.append(found)
        elif "bar" in classes and "data-test" in found:
            self.bars.append(found)
        elif "tick" in classes:
            self.ticks += 1
        elif found.get("id") == "timeline-legend":
            self.legend = True
        elif tag == "tr" and "data-name" in found:
            self.metadata.append(str(found["data-name"]))


def _summary(run: Run) -> dict[str, object]:
    document: dict[str, object] = json.loads((run.reports / "summary.json").read_text())
    return document


def _page(run: Run) -> _Page:
    page = _Page()
    page.feed((run.reports / "report.html").read_text())
    return page


def test_the_run_has_a_result_of_every_kind_and_fails_for_the_failure_only(farm_run: Run) -> None:
    summary = _summary(farm_run)
    assert summary_problems(summary) == []
    assert summary["counts"] == {kind: EXPECTED.get(kind, 0) for kind in KINDS}
    assert farm_run.status == summary["exitstatus"] == 1  # the failure and the error; not the quarantined one


def test_console_html_junit_and_summary_show_the_same_counts(farm_run: Run) -> None:
    counts = _summary(farm_run)["counts"]
    assert isinstance(counts, dict)
    assert f"totals: {counts_line(counts)}\n" in farm_run.output
    page = _page(farm_run)
    assert {kind: int(str(page.totals[f"data-{kind}"])) for kind in KINDS} == counts
    assert counts_line(counts) in farm_run.output and f"{sum(counts.values())} test x target pairs" in str(
        (farm_run.reports / "report.html").read_text()
    )
    assert Counter(str(cell["data-kind"]) for cell in page.cells) == Counter({k: n for k, n in counts.items() if n})
    suite = ET.parse(farm_run.reports / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert {name: int(str(suite.get(name))) for name in ("tests", "failures", "errors", "skipped")} == junit_counts(
        counts
    )
    properties = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert {kind: int(str(properties[f"count.{kind}"])) for kind in KINDS} == counts
    kinds = Counter(
        next(p.get("value") for p in case.iter("property") if p.get("name") == "outcome")
        for case in suite.iter("testcase")
    )
    assert kinds == Counter({k: n for k, n in counts.items() if n})


def test_junit_carries_a_quarantined_failure_as_a_skip_with_its_traceback(farm_run: Run) -> None:
    suite = ET.parse(farm_run.reports / "junit.xml").getroot()
    (case,) = [c for c in suite.iter("testcase") if str(c.get("name")).startswith("test_quarantined")]
    skipped = case.find("skipped")
    assert skipped is not None and skipped.get("type") == "tinyhil.quarantined"
    assert "known, issue 7" in str(skipped.get("message")) and "a known failure" in str(skipped.text)
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties["outcome"] == "quarantined" and properties["quarantined"] == "known, issue 7"


def test_the_progress_counter_reaches_the_total_counting_skips_decided_at_collection(farm_run: Run) -> None:
    total = sum(EXPECTED.values())
    counters = [(int(done), int(of)) for done, of in re.findall(r"^\[(\d+)/(\d+)\] ", farm_run.output, re.M)]
    assert [done for done, _ in counters] == list(range(1, total + 1))
    assert {of for _, of in counters} == {total}
    shown = Counter(re.findall(r"^\[\d+/\d+\] (\S+) ", farm_run.output, re.M))  # each as the kind the reports count
    assert shown == Counter({kind: n for kind, n in _summary(farm_run)["counts"].items() if n})  # type: ignore[union-attr]
    assert re.search(r"^\[\d+/\d+\] skipped test_every_kind\.py::test_skips_at_collection\[NULL\] on -$",
                     farm_run.output, re.M)  # fmt: skip


def test_the_timeline_shows_retried_and_killed_attempts_on_a_time_axis(farm_run: Run) -> None:
    journal = read_journal(farm_run.reports / "journal.jsonl")
    earlier = [a for attempts in journal.attempts.values() for a in attempts if not a["final"]]
    assert len(earlier) == EXPECTED["flaky"] and all(a["infrastructure"] for a in earlier)
    killed = [a for a in earlier if "test_flaky_killed" in a["nodeid"]]
    assert len(killed) == 1 and 0 < killed[0]["started"] <= killed[0]["finished"]  # kept when it started
    page = _page(farm_run)
    lost = [bar for bar in page.bars if "lost" in str(bar["class"]).split()]
    assert len(lost) == len(earlier) and all("retried" in str(bar["class"]).split() for bar in lost)
    timed = [a for attempts in journal.attempts.values() for a in attempts if a["started"] and a["finished"]]
    assert len(page.bars) == len(timed)
    for bar in page.bars:
        assert re.search(r", \d+\.\d{3} s", str(bar["title"])) and bar["data-duration"] is not None
    assert page.ticks >= 2 and page.legend


def test_failing_kinds_are_the_only_ones_listed_as_failures(farm_run: Run) -> None:
    summary = _summary(farm_run)
    results = summary["results"]
    assert isinstance(results, list)
    failing = sorted(r["nodeid"] for r in results if r["outcome"] in FAILING and r.get("quarantined") is None)
    shown = re.findall(r"^(?:FAILED|ERROR) (\S+) on NULL", farm_run.output, re.M)
    assert sorted(shown) == failing and len(failing) == EXPECTED["failed"] + EXPECTED["error"]
