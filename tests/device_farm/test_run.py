"""``tinyhil farm run`` end to end on emulated boards: every pair once, only GOOD boards, one test per board slot at a
time, reports naming the board of every test, and a resumed run that re-runs nothing finished."""

from __future__ import annotations

import io
import itertools
import json
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tinyhil.cli import main
from tinyhil.device_farm.collection import read_pairs
from tinyhil.device_farm.health.states import HealthBook, ProbeResult
from tinyhil.device_farm.inventory.hwmap import load_hwmap
from tinyhil.device_farm.journal import read_journal
from tinyhil.device_farm.planning import Pair, parse_subset, read_durations, select_pairs
from tinyhil.device_farm.reports.summary import PairReport, junit_unescape, write_junit
from tinyhil.errors import InvalidArgument
from tinyhil.loading import FileFormatError

SUITE = """
import time

import pytest


@pytest.mark.parametrize("n", range(4))
def test_alloc(hil_device, n):
    time.sleep(0.02)
    buf = hil_device.alloc(64)
    hil_device.free(buf)


@pytest.mark.hil(requires=["copyout"])
def test_round_trip(hil_device):
    buf = hil_device.alloc(4)
    hil_device.copyin(buf, b"abcd")
    assert hil_device.copyout(buf) == b"abcd"
"""
HWMAP = """
[[board]]
id = "null-a"
kind = "emulated"
emulated = { target = "NULL" }

[[board]]
id = "null-b"
kind = "emulated"
emulated = { target = "NULL" }

[[board]]
id = "null-sick"
kind = "emulated"
emulated = { target = "NULL", slots = 4 }
"""


def _files(tmp_path: Path) -> tuple[Path, Path]:
    suite = tmp_path / "test_farm_suite.py"
    suite.write_text(SUITE)
    hwmap = tmp_path / "hwmap.toml"
    hwmap.write_text(HWMAP)
    return suite, hwmap


def test_without_a_map_every_pair_runs_once_on_the_emulated_targets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, _ = _files(tmp_path)
    args = ["farm", "run", "--suite", str(suite), "--report", str(tmp_path / "run"), "--state", str(tmp_path / "s")]
    assert main([*args, "--target", "NULL", "--target", "MOCKKFD+AMD"]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    outcomes = {(r["nodeid"].split("::")[1], r["target"]): r["outcome"] for r in summary["results"]}
    assert len(outcomes) == len(summary["results"]) == 10  # 5 tests x 2 targets, each reported once
    assert outcomes[("test_round_trip[NULL]", "NULL")] == "skipped"  # NULL refuses copyout
    assert outcomes[("test_round_trip[MOCKKFD+AMD]", "MOCKKFD+AMD")] == "passed"
    assert {kind: n for kind, n in summary["counts"].items() if n} == {"passed": 9, "skipped": 1}
    cases = ET.parse(tmp_path / "run" / "junit.xml").getroot().iter("testcase")
    for case in cases:
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert set(properties) >= {"target", "board", "host", "attempt"}
    assert "reports: " in capsys.readouterr().out


def test_with_a_map_tests_land_only_on_good_boards_one_at_a_time_and_reports_name_each_board(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, hwmap_path = _files(tmp_path)
    state = tmp_path / "state"
    book = HealthBook(load_hwmap(hwmap_path).boards, clock=time.time, state_dir=state)
    book.record_probe("null-sick", ProbeResult(False, "SRAM round trip: byte 3 reads 0x00"))
    args = ["farm", "run", "--hwmap", str(hwmap_path), "--suite", str(suite), "--report", str(tmp_path / "run"),
            "--state", str(state), "--workers", "3"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "board null-sick: BAD (probe failed: SRAM round trip: byte 3 reads 0x00); it takes no work" in out
    journal = read_journal(tmp_path / "run" / "journal.jsonl")
    ran = [r for r in journal.final.values() if r["outcome"] != "skipped"]
    assert len(ran) == 4 and {r["board"] for r in ran} <= {"null-a", "null-b"}
    for board in ("null-a", "null-b"):  # one slot each: no two tests overlap on one board
        spans = sorted((r["started"], r["finished"]) for r in ran if r["board"] == board)
        assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert all(r["board"] for r in summary["results"])
    assert {b["board"]: b["health"] for b in summary["boards"]} == {"null-a": "GOOD", "null-b": "GOOD",
                                                                    "null-sick": "BAD"}  # fmt: skip


def test_a_named_target_no_good_board_serves_fails_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite, hwmap_path = _files(tmp_path)
    args = ["farm", "run", "--hwmap", str(hwmap_path), "--suite", str(suite), "--report", str(tmp_path / "run"),
            "--state", str(tmp_path / "s"), "--target", "MOCKUSB+AMD"]  # fmt: skip
    assert main(args) == 3
    assert "no GOOD board serves MOCKUSB+AMD; pass --allow-unavailable" in capsys.readouterr().out


def test_resume_runs_only_pairs_without_a_final_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite, _ = _files(tmp_path)
    run_dir, state = tmp_path / "run", tmp_path / "s"
    base = ["farm", "run", "--suite", str(suite), "--state", str(state), "--target", "NULL"]
    assert main([*base, "--report", str(run_dir)]) == 0
    journal = run_dir / "journal.jsonl"
    lines = journal.read_text().splitlines()
    kept = [line for line in lines if "test_alloc[NULL-3]" not in line or '"kind":"run"' in line]  # header kept
    journal.write_text("\n".join(kept) + "\n" + lines[-1][: len(lines[-1]) // 2])  # lost one, tore the last
    before = json.loads((run_dir / "summary.json").read_text())
    capsys.readouterr()
    assert main([*base, "--resume", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "is corrupt (cut short (no newline)" in out
    rerun = [line for line in out.splitlines() if line.startswith("[")]
    assert any("test_alloc[NULL-3]" in line for line in rerun) and len(rerun) <= 2
    after = json.loads((run_dir / "summary.json").read_text())
    strip = lambda d: sorted((r["nodeid"], r["outcome"]) for r in d["results"])  # noqa: E731
    assert strip(after) == strip(before)


SLOW_SUITE = """
import time

import pytest


@pytest.mark.parametrize("n", range(8))
def test_slow(hil_target, n):
    time.sleep(0.3)
"""


def test_a_sigkilled_farm_run_resumes_without_rerunning_or_losing_results(tmp_path: Path) -> None:
    suite = tmp_path / "test_slow_suite.py"
    suite.write_text(SLOW_SUITE)
    run_dir, state = tmp_path / "run", tmp_path / "s"
    args = [sys.executable, "-m", "tinyhil.cli", "farm", "run", "--suite", str(suite), "--state",
            str(state), "--target", "NULL", "--workers", "1"]  # fmt: skip
    process = subprocess.Popen([*args, "--report", str(run_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    journal = run_dir / "journal.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # kill it once a few results are journaled
        if journal.exists() and len(read_journal(journal).final) >= 3:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = set(read_journal(journal).final)
    assert 3 <= len(finished) < 8
    resumed = subprocess.run([*args, "--resume", str(run_dir)], capture_output=True, text=True, check=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    state_after = read_journal(journal)
    assert len(state_after.final) == 8 and state_after.duplicates == 0
    for key in finished:  # finished before the kill: not run again
        assert len(state_after.attempts[key]) == 1
    summary = json.loads((run_dir / "summary.json").read_text())
    assert {kind: n for kind, n in summary["counts"].items() if n} == {"passed": 8}


def test_subsets_split_the_pairs_into_disjoint_parts_that_cover_them_all() -> None:
    pairs = [Pair(f"t.py::test_{n}", "NULL") for n in range(23)]

    def parts(seed: int) -> list[set[str]]:
        return [{p.key for p in select_pairs(pairs, subset=(i, 3), subset_seed=seed)} for i in (1, 2, 3)]

    keys = parts(0)
    assert set().union(*keys) == {p.key for p in pairs} and sum(len(k) for k in keys) == len(pairs)
    assert parts(0) == keys and parts(9) != keys  # reproducible for a seed, different for another
    assert parse_subset("2/4") == (2, 4)
    for bad in ("0/3", "4/3", "x", "1/"):
        with pytest.raises(InvalidArgument, match="--subset"):
            parse_subset(bad)


def test_quarantine_verify_runs_only_the_quarantined_tests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite, _ = _files(tmp_path)
    (tmp_path / "q.toml").write_text(
        "[[quarantine]]\ntest = 'test_alloc\\[NULL-2'\nreason = 'flaky'\nexpires = 2999-01-01\n"
    )
    args = ["farm", "run", "--suite", str(suite), "--report", str(tmp_path / "run"), "--state", str(tmp_path / "s"),
            "--target", "NULL", "--quarantine", str(tmp_path / "q.toml"), "--quarantine-verify"]  # fmt: skip
    assert main(args) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert [r["nodeid"].split("::")[1] for r in summary["results"]] == ["test_alloc[NULL-2]"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_in_a_terminal_progress_is_one_updating_line_naming_what_each_board_runs() -> None:
    from tinyhil.device_farm.engine import Result
    from tinyhil.device_farm.reports.progress import Progress

    out = _Terminal()
    progress = Progress(2, out)
    progress.started("emu-1", "t.py::test_a[NULL]")
    progress.started("emu-2", "t.py::test_b[NULL]")
    assert out.getvalue().split("\r\x1b[2K")[-1] == "0/2 done, 0 failed | emu-1: test_a[NULL], emu-2: test_b[NULL]"
    progress.show(Result("k", "t.py::test_a[NULL]", "NULL", "emu-1", "h", 1, "failed", 0.1, "boom"))
    lines = out.getvalue().split("\r\x1b[2K")
    assert lines[-2] == "[1/2] failed t.py::test_a[NULL] on emu-1\n"  # a failure stays above the live line
    assert lines[-1] == "1/2 done, 1 failed | emu-2: test_b[NULL]"
    plain = io.StringIO()
    quiet = Progress(1, plain)
    quiet.started("emu-1", "t.py::test_a[NULL]")
    quiet.show(Result("k", "t.py::test_a[NULL]", "NULL", "emu-1", "h", 1, "passed", 0.1))
    assert plain.getvalue() == "[1/1] passed t.py::test_a[NULL] on emu-1\n"  # not a terminal: one line per result


FAULTY_MAP = """
[[board]]
id = "usb-bad"
kind = "emulated"
emulated = { target = "MOCKUSB+AMD", options = { faults = [
    { operation = "control_in", request = 0xE4, occurrence = 1, fault = "stall" } ] } }

[[board]]
id = "usb-flaky"
kind = "emulated"
emulated = { target = "MOCKUSB+AMD", options = { faults = [
    { operation = "bulk_out", occurrence = 3, fault = "no_device" } ] } }

[[board]]
id = "usb-clean"
kind = "emulated"
emulated = { target = "MOCKUSB+AMD" }
"""
COPY_SUITE = """
import pytest


@pytest.mark.parametrize("n", range(6))
def test_copy_a_megabyte(hil_device, n):
    data = bytes(range(256)) * 4096
    buf = hil_device.alloc(len(data))
    hil_device.copyin(buf, data)
    assert hil_device.copyout(buf) == data
"""


def test_map_fault_plans_make_one_board_bad_and_a_lost_device_retried_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "hwmap.toml").write_text(FAULTY_MAP)
    (tmp_path / "test_copy_suite.py").write_text(COPY_SUITE)
    args = ["farm", "run", "--hwmap", str(tmp_path / "hwmap.toml"), "--suite", str(tmp_path / "test_copy_suite.py"),
            "--report", str(tmp_path / "run"), "--state", str(tmp_path / "s"), "--workers", "2"]  # fmt: skip
    assert main(args) == 0
    assert "board usb-bad: BAD (probe failed: bridge probe: USBErrorPipe" in capsys.readouterr().out
    journal = read_journal(tmp_path / "run" / "journal.jsonl")
    attempts = [a for per_pair in journal.attempts.values() for a in per_pair]
    assert "usb-bad" not in {a["board"] for a in attempts}  # a BAD board receives no work
    lost = [a for a in attempts if not a["final"]]
    assert lost and all(
        a["board"] == "usb-flaky" and a["infrastructure"] == "board lost: USBErrorNoDevice" for a in lost
    )
    # six tests, so the flaky board's lane has its own to run before the clean lane, which looks two tests ahead,
    # could take them all (a lane that runs out takes the others' queued tests)
    assert all(r["outcome"] == "passed" for r in journal.final.values()) and len(journal.final) == 6
    assert {journal.final[a["key"]]["board"] for a in lost} == {"usb-clean"}  # retried on another board
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["counts"]["flaky"] == len(lost)


CONTROLS = "".join(map(chr, range(0x20)))
MESSAGE = f"start {CONTROLS} \\x41 \\ \ud800\ufffe\x7f end"


def test_junit_carries_every_control_character_reversibly(tmp_path: Path) -> None:
    final = {"nodeid": f"t.py::test_x[{CONTROLS}]", "target": "NULL", "board": "b\x1b", "host": "h", "attempt": 1,
             "outcome": "failed", "reason": MESSAGE, "duration_s": 0.5}  # fmt: skip
    skipped = {**final, "nodeid": "t.py::test_y", "outcome": "skipped", "reason": f"skip {CONTROLS}"}
    write_junit(tmp_path / "junit.xml", [PairReport(final), PairReport(skipped)], f"run \x00{CONTROLS}")
    root = ET.parse(tmp_path / "junit.xml").getroot()  # well-formed XML 1.0
    failed_case, skipped_case = root.iter("testcase")
    failure = failed_case.find("failure")
    assert failure is not None and failure.text is not None
    assert junit_unescape(failure.get("message", "")) == junit_unescape(failure.text) == MESSAGE
    assert junit_unescape(failed_case.get("name", "")) == f"test_x[{CONTROLS}]"
    board = [p.get("value") for p in failed_case.iter("property") if p.get("name") == "board"]
    assert [junit_unescape(str(b)) for b in board] == ["b\x1b"]
    skip = skipped_case.find("skipped")
    assert skip is not None and junit_unescape(skip.get("message", "")) == f"skip {CONTROLS}"
    suite = root.find("testsuite")
    assert suite is not None and junit_unescape(suite.get("name", "")) == f"run \x00{CONTROLS}"


CONTROL_SUITE = """
def test_controls(hil_target):
    assert False, "bad\\x00\\x01\\x07\\x08 mid\\x0b\\x0c\\x1c\\x1d\\x1e\\u2028 end"
"""


def test_a_failure_message_with_control_characters_reaches_junit_whole(tmp_path: Path) -> None:
    suite = tmp_path / "test_controls.py"
    suite.write_text(CONTROL_SUITE)
    args = ["run", "--target", "NULL", "--suite", str(suite), "--report", str(tmp_path / "run"), "--workers", "1"]
    assert main(args) == 1
    whole = "bad\x00\x01\x07\x08 mid\x0b\x0c\x1c\x1d\x1e\u2028 end"
    (result,) = json.loads((tmp_path / "run" / "summary.json").read_text())["results"]
    assert result["reason"].endswith(whole), result["reason"]  # not cut at \x0b
    failure = ET.parse(tmp_path / "run" / "junit.xml").getroot().find("testsuite/testcase/failure")
    assert failure is not None and junit_unescape(failure.get("message", "")) == result["reason"]


def _pairs_document(**fields: object) -> str:
    pair = {"nodeid": "t.py::a", "arg": "/x/t.py::a", "target": "NULL", "requires": [], "skip": None, **fields}
    return json.dumps({"format": 1, "pairs": [pair]})


@pytest.mark.parametrize(
    ("text", "field", "why"),
    [
        (_pairs_document(arg=3), "pairs[0].arg", "3, expected a non-empty string"),
        (_pairs_document(requires="copyin"), "pairs[0].requires", "'copyin', expected a list"),
        (_pairs_document(requires=[1]), "pairs[0].requires", "[1], expected a list of strings"),
        (_pairs_document(target=["NULL"]), "pairs[0].target", "['NULL'], expected a non-empty string"),
        (_pairs_document(skip=False), "pairs[0].skip", "False, expected a string"),
        (
            json.dumps({"format": 1, "pairs": [{"arg": "a", "nodeid": "a", "requires": []}]}),
            "pairs[0].target",
            "missing",
        ),
        (json.dumps({"format": 1, "pairs": [{"arg": "a", "requires": []}]}), "pairs[0].nodeid", "missing"),
        (json.dumps({"pairs": {}}), "pairs", "{}, expected a list"),
        (json.dumps({"pairs": [3]}), "pairs[0]", "an integer, expected a table"),
        ('{"pairs": ' + "[" * 5000 + "]" * 5000 + "}", "file", "nested deeper than 32 levels"),
        ('{"pairs": [' + "9" * 5000 + "]}", "file", "not JSON: an integer of 5000 digits"),
    ],
)
def test_collected_pairs_read_back_are_typed_once(tmp_path: Path, text: str, field: str, why: str) -> None:
    path = tmp_path / "pairs.json"
    path.write_text(text)
    with pytest.raises(FileFormatError) as raised:
        read_pairs(path)
    assert (raised.value.path, raised.value.field) == (str(path), field) and raised.value.why.startswith(why)
    path.write_text(_pairs_document(skip="lacks copyin", target=None))
    assert read_pairs(path)[0]["skip"] == "lacks copyin"


@pytest.mark.parametrize(
    "text",
    ["[1]", '{"a": ' + "[" * 5000 + "]" * 5000 + "}", '{"a": ' + "9" * 5000 + "}", '{"a": "slow"}', "\xff"],
)
def test_kept_durations_that_cannot_be_used_are_a_fresh_start(tmp_path: Path, text: str) -> None:
    (tmp_path / "durations.json").write_text(text)
    assert read_durations(tmp_path) == {}
    (tmp_path / "durations.json").write_text('{"a": 1.5, "b": "slow", "c": -1, "d": true, "e": 1e300}')
    assert read_durations(tmp_path) == {"a": 1.5}
