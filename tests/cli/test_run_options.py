"""The options ``tinyhil run`` and ``tinyhil farm run`` share: ``--deadline`` durations, ``--reruns``, and
``tinyhil run --resume DIR`` running its own run again from the header."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinyhil.cli import main
from tinyhil.cli.run_options import parse_duration
from tinyhil.device_farm.journal import read_journal
from tinyhil.device_farm.run_header import read_header
from tinyhil.errors import InvalidArgument


@pytest.mark.parametrize(("text", "seconds"), [("2h", 2 * 3600), ("30m", 30 * 60), ("90s", 90), ("1h30m", 5400),
                                               ("5400", 5400), ("0.5", 0.5), ("1m30s", 90)])  # fmt: skip
def test_a_deadline_is_hours_minutes_seconds_or_plain_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2x", "h", "-5", "0", "0s", "inf", "30m2h"])
def test_a_bad_deadline_is_named(text: str) -> None:
    with pytest.raises(InvalidArgument, match=f"--deadline {text!r}, expected a duration"):
        parse_duration(text)


@pytest.mark.parametrize("command", [["run"], ["farm", "run"]])
def test_both_run_commands_document_deadline_reruns_and_resume(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--deadline D", "--reruns N", "--resume DIR", "124"):
        assert option in text, option


def test_a_negative_rerun_count_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--target", "NULL", "--report", str(tmp_path / "r"), "--reruns", "-1"]) == 2
    assert "--reruns -1, expected an integer >= 0" in capsys.readouterr().err


SUITE = """
def test_one(hil_target):
    pass


def test_two(hil_target):
    pass
"""


def test_tinyhil_run_resumes_its_own_run_from_the_header_without_reading_dev(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = tmp_path / "test_two.py"
    suite.write_text(SUITE)
    report = tmp_path / "report"
    assert main(["run", "--target", "NULL", "--suite", str(suite), "--report", str(report)]) == 0
    header, journal = read_header(report)
    assert header.command == "run" and header.targets == ("NULL",) and len(journal.final) == 2
    lines = (report / "journal.jsonl").read_text().splitlines()
    results = [line for line in lines[1:] if "test_two" not in line]  # the header (line 1) names every pair
    (report / "journal.jsonl").write_text("\n".join([lines[0], *results]) + "\n")
    monkeypatch.setenv("DEV", "MOCKKFD+AMD")  # the header's targets, not the environment's
    capsys.readouterr()
    assert main(["run", "--resume", str(report)]) == 0
    out = capsys.readouterr().out
    assert "running the portable suite on NULL (resumed)" in out
    after = read_journal(report / "journal.jsonl")
    assert sorted(after.final) == list(header.keys or ()) and all(len(a) == 1 for a in after.attempts.values())
    counts = json.loads((report / "summary.json").read_text())["counts"]
    assert {kind: n for kind, n in counts.items() if n} == {"passed": 2}  # every kind is listed, zeros too


FLAKY_SUITE = """
import os
from pathlib import Path


def test_flaky(hil_target):
    mark = Path(os.environ["FLAKY_MARK"])
    if not mark.exists():
        mark.write_text("failed once")
        print("first attempt")
        assert False, "fails the first time"


def test_broken(hil_target):
    assert 1 == 2
"""


def test_reruns_report_a_test_that_fails_then_passes_as_flaky_with_every_attempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = tmp_path / "test_flaky.py"
    suite.write_text(FLAKY_SUITE)
    monkeypatch.setenv("FLAKY_MARK", str(tmp_path / "mark"))
    report = tmp_path / "run"
    args = ["farm", "run", "--suite", str(suite), "--target", "NULL", "--state", str(tmp_path / "s"), "--report"]
    assert main([*args, str(report), "--reruns", "2"]) == 1  # test_broken fails every attempt
    assert "run again for --reruns: AssertionError: fails the first time" in capsys.readouterr().out
    summary = json.loads((report / "summary.json").read_text())
    by_name = {r["nodeid"].split("::")[1].split("[")[0]: r for r in summary["results"]}
    flaky, broken = by_name["test_flaky"], by_name["test_broken"]
    assert (flaky["outcome"], flaky["flaky"], [e["outcome"] for e in flaky["earlier"]]) == ("passed", True, ["failed"])
    assert (broken["outcome"], broken["flaky"], broken["attempt"]) == ("failed", False, 3)
    assert [e["outcome"] for e in broken["earlier"]] == ["failed", "failed"]
    journal = read_journal(report / "journal.jsonl")
    first = journal.attempts[flaky["key"]][0]
    assert "fails the first time" in first["longrepr"] and "first attempt" in first["stdout"]  # every attempt kept
    assert read_header(report)[0].reruns == 2
    assert main([*args, str(tmp_path / "again")]) == 1  # without --reruns a failure is final at once
    summary = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert {r["attempt"] for r in summary["results"]} == {1} and not any(r["flaky"] for r in summary["results"])
