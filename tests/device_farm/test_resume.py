"""``farm run --resume DIR`` runs the run its journal's header describes: the same pairs, with no ``--suite``,
``--hwmap``, ``--target`` or ``--state`` given; a changed suite, map or option, or a journal with no header, is one
line and exit status 2."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tinyhil.cli import main
from tinyhil.device_farm.journal import read_journal
from tinyhil.device_farm.run_header import RunChanged, RunHeader, check_pairs, keys_record, read_header, suite_digests

SLOW_SUITE = """
import time

import pytest


@pytest.mark.parametrize("n", range(12))
def test_slow(hil_target, n):
    time.sleep(0.25)
"""
SMALL_SUITE = """
def test_one(hil_target):
    pass


def test_two(hil_target):
    pass
"""
HWMAP = '[[board]]\nid = "null-a"\nkind = "emulated"\nemulated = { target = "NULL" }\n'


def test_a_killed_12_pair_run_resumed_without_arguments_ends_with_exactly_its_12_results(tmp_path: Path) -> None:
    (tmp_path / "suite").mkdir()
    suite = tmp_path / "suite" / "test_slow_suite.py"
    suite.write_text(SLOW_SUITE)
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "tinyhil.cli", "farm", "run"]
    started = [*command, "--suite", str(suite), "--state", str(tmp_path / "s"), "--target", "NULL", "--workers", "1",
               "--report", str(run_dir)]  # fmt: skip
    process = subprocess.Popen(started, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    journal = run_dir / "journal.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (journal.exists() and len(read_journal(journal).final) >= 3):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    header, before = read_header(run_dir)
    assert 3 <= len(before.final) < 12 and header.keys is not None and len(header.keys) == 12
    elsewhere = tmp_path / "elsewhere"  # no suite, map or state in sight: the header says them all
    elsewhere.mkdir()
    resumed = subprocess.run([*command, "--resume", str(run_dir)], cwd=elsewhere, capture_output=True, text=True,
                             check=False)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = read_journal(journal)
    assert sorted(after.final) == list(header.keys) and after.duplicates == 0
    assert all(len(after.attempts[key]) == 1 for key in before.final)  # finished before the kill: not run again
    summary = json.loads((run_dir / "summary.json").read_text())
    assert {k: n for k, n in summary["counts"].items() if n} == {"passed": 12} and summary["complete"] is True


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small finished farm run on a map of one NULL board, with its suite in a directory."""
    root = tmp_path_factory.mktemp("resume")
    (root / "suite").mkdir()
    (root / "suite" / "test_small.py").write_text(SMALL_SUITE)
    (root / "hwmap.toml").write_text(HWMAP)
    args = ["farm", "run", "--suite", str(root / "suite"), "--hwmap", str(root / "hwmap.toml"), "--state",
            str(root / "s"), "--report", str(root / "run")]  # fmt: skip
    assert main(args) == 0
    return root


def _refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--target", "MOCKKFD+AMD"], "--target MOCKKFD+AMD contradicts the run's (none)"),
        (["--seed", "7"], "--seed 7 contradicts the run's 0"),
        (["--reruns", "2"], "--reruns 2 contradicts the run's 0"),
        (["--", "-k", "one"], "pytest arguments -k one contradicts the run's (none)"),
    ],
)
def test_an_option_that_contradicts_the_header_is_refused_in_one_line(
    finished_run: Path, option: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refused(["farm", "run", "--resume", str(finished_run / "run"), *option], capsys)
    assert expected in err and "resume it as it was, or start a new run" in err


def test_a_changed_suite_or_map_is_refused_saying_what_changed(
    finished_run: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    resume = ["farm", "run", "--resume", str(finished_run / "run")]
    test_file, hwmap = finished_run / "suite" / "test_small.py", finished_run / "hwmap.toml"
    test_file.write_text(SMALL_SUITE + "\n# edited\n")
    try:
        assert f"suite file changed since the run started: {test_file}" in _refused(resume, capsys)
    finally:
        test_file.write_text(SMALL_SUITE)
    added = finished_run / "suite" / "test_more.py"
    added.write_text(SMALL_SUITE)
    try:
        assert f"suite file added since the run started: {added}" in _refused(resume, capsys)
    finally:
        added.unlink()
    hwmap.write_text(HWMAP.replace("null-a", "null-b"))
    try:
        assert f"the hardware map {hwmap} changed since the run started (SHA-256" in _refused(resume, capsys)
    finally:
        hwmap.write_text(HWMAP)
    assert "`tinyhil farm run` started this run; resume it with `tinyhil farm run --resume" in _refused(
        ["run", "--resume", str(finished_run / "run")], capsys
    )


def test_an_unchanged_finished_run_resumes_to_the_same_results_running_nothing(
    finished_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = finished_run / "run" / "journal.jsonl"
    before = journal.read_bytes()
    assert main(["farm", "run", "--resume", str(finished_run / "run"), "--seed", "0"]) == 0  # agrees: accepted
    assert "resuming the run in" in capsys.readouterr().out
    assert journal.read_bytes() == before  # nothing ran, nothing appended


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("garbage\n", "run: no run header; line 1: not JSON"),
        ('{"kind": "run", "run_id": "abc"}\n', "header: None, expected 1"),
        ("", "run: no run header; expected the journal of a tinyhil run"),
    ],
)
def test_a_journal_without_a_header_is_one_line_and_runs_nothing(
    tmp_path: Path, text: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "journal.jsonl").write_text(text)
    err = _refused(["farm", "run", "--resume", str(tmp_path)], capsys)
    assert expected in err and str(tmp_path / "journal.jsonl") in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal.jsonl"]  # nothing collected, nothing written


def test_a_changed_pair_set_names_pairs_new_and_gone() -> None:
    record = {"kind": "run", "run_id": "r", "pairs": 2, "header": 1, "command": "farm run", "tinyhil": "0",
              "suite": [], "pyargs": True, "suite_files": {}, "hwmap": None, "hwmap_sha256": None, "pytest_args": [],
              "targets": [], "collected": ["NULL"], "allow_unavailable": False, "quarantine": None,
              "quarantine_sha256": None, "quarantine_verify": False, "subset": None, "seed": 0, "reruns": 0,
              "workers": 1, "state": "/s", "dask": None, **keys_record(["a@NULL", "b@NULL"])}  # fmt: skip
    header = RunHeader.from_record(record, Path("/runs/x/journal.jsonl"))
    check_pairs(header, ["b@NULL", "a@NULL"])  # the same set, in any order
    with pytest.raises(RunChanged, match=r"\(2 then, 2 now; new: c@NULL; gone: a@NULL\)"):
        check_pairs(header, ["b@NULL", "c@NULL"])


ENV_SUITE = """
import os

import pytest


@pytest.mark.parametrize("n", range(int(os.environ["PAIRS_N"])))
def test_n(hil_target, n):
    pass
"""


def test_a_resume_whose_collection_gives_other_pairs_is_refused_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = tmp_path / "test_env.py"
    suite.write_text(ENV_SUITE)  # the same file, other pairs: what the files' digests cannot see
    monkeypatch.setenv("PAIRS_N", "2")
    run_dir = tmp_path / "run"
    base = ["farm", "run", "--suite", str(suite), "--target", "NULL", "--state", str(tmp_path / "s")]
    assert main([*base, "--report", str(run_dir)]) == 0
    before = (run_dir / "journal.jsonl").read_bytes()
    monkeypatch.setenv("PAIRS_N", "3")
    err = _refused(["farm", "run", "--resume", str(run_dir)], capsys)
    assert "the suite's test x target pairs changed since the run started (2 then, 3 now; new: " in err
    assert "test_env.py::test_n[NULL-2]@NULL" in err
    assert (run_dir / "journal.jsonl").read_bytes() == before  # refused before anything ran


def test_the_suites_digests_cover_its_python_files_but_those_pytest_does_not_collect(tmp_path: Path) -> None:
    for name in ("test_a.py", "sub/test_b.py", "sub/data.txt", ".venv/lib/x.py", "venv/y.py", "build/z.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    digests = suite_digests([str(tmp_path)])
    assert sorted(Path(p).relative_to(tmp_path).as_posix() for p in digests) == ["sub/test_b.py", "test_a.py"]
    (tmp_path / "test_a.py").write_text("edited")
    assert suite_digests([str(tmp_path)])[str(tmp_path / "test_a.py")] != digests[str(tmp_path / "test_a.py")]
    edited = suite_digests([str(tmp_path)])[str(tmp_path / "test_a.py")]
    assert suite_digests([str(tmp_path / "test_a.py")]) == {str(tmp_path / "test_a.py"): edited}  # a file alone
