"""Run history end to end through the command line: four nights of ``tinyhil run`` on a suite where one test
starts failing on the third and another fails every other night; ``farm history`` (text, ``--json``,
``--export``), the marks in report.html, ``--last-failed``, ``--on-finish`` and ``--history none``."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from support.history_runs import record

from tinyhil.cli import main, parser

SUITE = """
from pathlib import Path

NIGHT = int((Path(__file__).parent / "night.txt").read_text())


def test_steady(hil_device):
    hil_device.free(hil_device.alloc(64))


def test_broke(hil_device):
    assert NIGHT < 3, f"broke on night {NIGHT}"


def test_flappy(hil_device):
    assert NIGHT % 2 == 1, f"even night {NIGHT}"
"""
NIGHTS = 4
BROKE, FLAPPY = "test_nightly.py::test_broke[NULL]@NULL", "test_nightly.py::test_flappy[NULL]@NULL"
NOTIFY = "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + chr(10))"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four nights recorded in ``history.db``; each night's reports in ``night<N>``."""
    root = tmp_path_factory.mktemp("lab")
    suite = root / "suite"
    suite.mkdir()
    (suite / "test_nightly.py").write_text(SUITE)
    for night in range(1, NIGHTS + 1):
        (suite / "night.txt").write_text(str(night))
        args = ["run", "--target", "NULL", "--suite", str(suite), "--report", str(root / f"night{night}"),
                "--history", str(root / "history.db"),
                "--on-finish", f"{sys.executable} -c {NOTIFY!r} {root / 'notified.txt'}"]  # fmt: skip
        main(args)
        if night == 3:  # the morning after the third night: what a lab reads
            (root / "third.json").write_text(json.dumps(_history_json(root, "changes")))
    return root


def _history_json(root: Path, *question: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["farm", "history", *question, "--history", str(root / "history.db"), "--json"]) == 0
    found = json.loads(out.getvalue())
    assert isinstance(found, dict)
    return found


def _marks(page: Path) -> dict[str, str]:
    """Each listed failure's test function, with the history mark beside it."""
    found = {}
    for item in page.read_text().split('<li id="failure-')[1:]:
        test = item.split('data-test="', 1)[1].split('"', 1)[0].split("::")[1].split("[")[0]
        found[test] = item.split('data-history="', 1)[1].split('"', 1)[0]
    return found


def test_farm_history_lists_the_third_nights_new_failure(lab: Path) -> None:
    third = json.loads((lab / "third.json").read_text())
    assert BROKE in third["changes"]["new"]
    assert third["changes"]["known"] == []


def test_report_html_marks_the_new_failure(lab: Path) -> None:
    assert _marks(lab / "night3" / "report.html") == {"test_broke": "new"}
    assert _marks(lab / "night4" / "report.html") == {"test_broke": "known", "test_flappy": "flaky"}
    page = (lab / "night3" / "report.html").read_text()
    assert '<svg id="trend" data-runs="3"' in page
    assert f'href="{(lab / "night2" / "report.html").as_uri()}"' in page


def test_the_flake_rate_of_the_every_other_night_test_comes_from_history(lab: Path) -> None:
    flaky = {row["pair"]: row for row in _history_json(lab, "flaky")["flaky"]}
    assert flaky[FLAPPY]["rate"] == 0.5 and flaky[FLAPPY]["runs"] == NIGHTS and flaky[FLAPPY]["flaky"] is True
    assert flaky[BROKE]["flaky"] is False
    fourth = _history_json(lab, "changes")["changes"]
    assert fourth["known"] == [BROKE] and fourth["new"] == [FLAPPY] and fourth["flaky"] == [FLAPPY]


def test_the_text_answers_and_the_export(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["farm", "history", "--history", str(lab / "history.db")]) == 0
    out = capsys.readouterr().out
    assert f"known failures (still fail): 1\n  {BROKE}" in out
    assert f"{FLAPPY} (flaky by history)" in out
    assert "50%" in out and "null: 0% (0 of" in out
    assert main(["farm", "history", "--history", str(lab / "history.db"), "--export", str(lab / "all.csv")]) == 0
    with (lab / "all.csv").open(newline="") as table:
        rows = list(csv.DictReader(table))
    assert len({row["run_id"] for row in rows}) == NIGHTS
    assert f"{len(rows)} attempts written" in capsys.readouterr().out


def test_on_finish_ran_once_a_night_with_the_summary(lab: Path) -> None:
    notified = (lab / "notified.txt").read_text().splitlines()
    assert notified == [str((lab / f"night{n}" / "summary.json").resolve()) for n in range(1, NIGHTS + 1)]


def test_last_failed_runs_only_what_failed_last_night(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "--target", "NULL", "--suite", str(lab / "suite"), "--report", str(lab / "lf"), "--history",
            str(lab / "lf.db"), "--last-failed"]  # fmt: skip
    main(args)  # no history yet: everything, said in one line
    assert "no previous run of this suite in history; running everything" in capsys.readouterr().out
    first = json.loads((lab / "lf" / "summary.json").read_text())
    main(args)
    assert "running the 2 of 3 pairs that failed in the previous run" in capsys.readouterr().out
    second = json.loads((lab / "lf" / "summary.json").read_text())
    assert len(first["results"]) == 3 and len(second["results"]) == 2


def test_history_none_records_nothing(tmp_path: Path, lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "--target", "NULL", "--suite", str(lab / "suite"), "--report", str(tmp_path / "r"), "--history",
            "none"]  # fmt: skip
    main(args)
    assert 'data-recorded="false"' in (tmp_path / "r" / "report.html").read_text()
    assert main([*args, "--last-failed"]) == 2
    assert "--last-failed reads the previous run from history" in capsys.readouterr().err


def test_both_run_commands_take_the_history_options(tmp_path: Path) -> None:
    given = ["--history", str(tmp_path / "h.db"), "--last-failed", "--on-finish", "notify --to 'lab ops'"]
    for command in (["run"], ["farm", "run"]):
        args = parser().parse_args([*command, *given])
        assert (args.history, args.last_failed, args.on_finish) == (given[1], True, given[4])


CHROMIUM = "/usr/bin/chromium"


@pytest.mark.skipif(
    importlib.util.find_spec("playwright") is None or shutil.which(CHROMIUM) is None,
    reason="needs the Debian package chromium (/usr/bin/chromium) and Playwright (pip install playwright)",
)
def test_the_marks_and_the_trend_render_in_chromium(lab: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto((lab / "night3" / "report.html").as_uri())
            mark = page.locator("#failures [data-history]")
            assert mark.count() == 1 and mark.inner_text() == "new" and mark.is_visible()
            assert page.locator("#trend g").count() == 3
            heights = page.locator("#trend rect").evaluate_all("rs => rs.map(r => r.getBoundingClientRect().height)")
            assert sum(heights) > 0  # drawn, not just present in the markup
            assert page.locator("#previous-run").get_attribute("href") == (lab / "night2" / "report.html").as_uri()
            page.goto((lab / "night4" / "report.html").as_uri())
            shown = sorted(page.locator("#failures [data-history]").all_inner_texts())
            assert shown == ["flaky", "known"]
        finally:
            browser.close()


def test_farm_history_without_a_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "none-yet.db"
    assert main(["farm", "history", "--history", str(missing)]) == 0
    assert capsys.readouterr().out == f"no run history at {missing}\n"
    assert not missing.exists()  # reading makes no database
    assert main(["farm", "history", "--history", str(missing), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"history": str(missing), "runs": 0}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--history", "none"], "--history none: farm history reads a database, expected its path"),
        (["--runs", "0"], "history runs=0 (--runs), expected an integer >= 1"),
        (["--export", "out.txt"], "extension '.txt' names no format"),
    ],
)
def test_farm_history_refuses_bad_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    record(tmp_path / "h.db", "r1", {"t.py::test_a": "passed"}, started=1.0)
    given = ["--history", str(tmp_path / "h.db"), *args] if "--history" not in args else args
    assert main(["farm", "history", *given]) == 2
    assert message in capsys.readouterr().err
