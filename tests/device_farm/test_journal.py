"""The run journal: records survive as written, a torn last line is corrupt and its pair has no result, resumes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tinyhil.device_farm.journal import Journal, read_journal
from tinyhil.loading import LIMITS, FileFormatError


def _result(key: str, *, final: bool = True, outcome: str = "passed", attempt: int = 1) -> dict[str, object]:
    nodeid, target = key.split("@")
    record: dict[str, object] = {"kind": "result", "key": key, "nodeid": nodeid, "target": target, "board": "emu"}
    return {**record, "attempt": attempt, "outcome": outcome, "final": final, "infrastructure": None if final else "x"}


def test_records_read_back_with_attempts_and_one_final_result_each(tmp_path: Path) -> None:
    path = tmp_path / "run" / "journal.jsonl"
    with Journal(path) as journal:
        journal.append({"kind": "run", "run_id": "r1", "pairs": 2})
        journal.append(_result("t::a@NULL", final=False, outcome="error"))
        journal.append(_result("t::a@NULL", attempt=2))
        journal.append(_result("t::b@NULL", outcome="failed"))
        journal.append(_result("t::b@NULL", outcome="passed"))  # a second final result is never reported
    state = read_journal(path)
    assert state.run == {"kind": "run", "run_id": "r1", "pairs": 2}
    assert [r["attempt"] for r in state.attempts["t::a@NULL"]] == [1, 2]
    assert state.final["t::a@NULL"]["attempt"] == 2 and state.final["t::b@NULL"]["outcome"] == "failed"
    assert state.duplicates == 1 and state.corrupt == []


def test_a_line_torn_by_a_crash_is_corrupt_and_the_next_writer_starts_a_new_line(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        journal.append(_result("t::a@NULL"))
    whole = json.dumps(_result("t::b@NULL"))
    with path.open("a") as out:
        out.write(whole[: len(whole) // 2])  # the scheduler died mid-write
    state = read_journal(path)
    assert list(state.final) == ["t::a@NULL"]
    assert state.corrupt == [(2, "cut short (no newline): the write did not finish")]
    with Journal(path) as journal:  # --resume: t::b has no result, so it runs again
        journal.append(_result("t::b@NULL"))
    state = read_journal(path)
    assert list(state.final) == ["t::a@NULL", "t::b@NULL"]
    assert [n for n, _ in state.corrupt] == [2] and state.corrupt[0][1].startswith("not JSON")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("[1, 2]", "not a JSON object"),
        ('{"kind": "beep"}', "unknown kind 'beep'"),
        ('{"kind": "result", "key": "k"}', "missing nodeid, target, board, attempt, outcome, final"),
        (json.dumps({**_result("t::b@NULL"), "duration_s": "slow"}), "duration_s: 'slow', expected a number >= 0"),
        (json.dumps({**_result("t::b@NULL"), "attempt": "2"}), "attempt: '2', expected an integer >= 1"),
        (json.dumps({**_result("t::b@NULL"), "final": 1}), "final: 1, expected true or false"),
        (json.dumps({**_result("t::b@NULL"), "key": ["k"]}), "key: ['k'], expected a non-empty string"),
        (json.dumps({**_result("t::b@NULL"), "infrastructure": 3}), "infrastructure: 3, expected a non-empty"),
        (json.dumps({**_result("t::b@NULL"), "attempt": 2**64}), "attempt: an integer past 64 bits"),
        (json.dumps({**_result("t::b@NULL"), "attempt": 1}).replace(": 1,", ": " + "9" * 5000 + ","), "not JSON: "),
        ('{"kind": "result", "key": ' + "[" * 5000 + "]" * 5000 + "}", "nested deeper than 32 levels"),
        ('{"kind": "run", "run_id": 5}', "run_id: 5, expected a non-empty string"),
        ('{"kind": ' + "[" * 40 + "]" * 40 + "}", "kind[0][0]"),
    ],
)
def test_lines_that_are_not_records_are_named_corrupt(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text(line + "\n" + json.dumps(_result("t::a@NULL")) + "\n")
    state = read_journal(path)
    assert [n for n, _ in state.corrupt] == [1] and state.corrupt[0][1].startswith(problem), state.corrupt
    assert list(state.final) == ["t::a@NULL"]


def test_a_missing_journal_reads_as_empty(tmp_path: Path) -> None:
    state = read_journal(tmp_path / "none.jsonl")
    assert state.run is None and state.final == {} and state.corrupt == []


def test_what_was_appended_before_a_sigkill_is_all_there(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    child = textwrap.dedent(
        f"""
        import os, signal
        from tinyhil.device_farm.journal import Journal
        journal = Journal({str(path)!r})
        for n in range(50):
            journal.append({{"kind": "result", "key": f"t::{{n}}@NULL", "nodeid": "t", "target": "NULL",
                            "board": "b", "attempt": 1, "outcome": "passed", "final": True}})
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    assert subprocess.run([sys.executable, "-c", child], check=False).returncode == -9
    state = read_journal(path)
    assert len(state.final) == 50 and state.corrupt == []


def test_a_line_past_the_cap_is_corrupt_and_skipped_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    cap = LIMITS["journal"].max_bytes
    with path.open("w") as out:
        out.write(json.dumps(_result("t::a@NULL")) + "\n")
        out.write('{"kind": "result", "reason": "' + "x" * cap + '"}\n')
        out.write(json.dumps(_result("t::b@NULL")) + "\n")
    with path.open("ab") as raw:
        raw.write(b'"\xff\xfe"\n')
    state = read_journal(path)
    assert state.corrupt == [
        (2, f"longer than {cap} bytes, the limit for a journal line"),
        (4, "not UTF-8 text (byte 1: invalid start byte)"),
    ]
    assert list(state.final) == ["t::a@NULL", "t::b@NULL"]


def test_a_journal_that_cannot_be_read_is_one_typed_error(tmp_path: Path) -> None:
    with pytest.raises(FileFormatError, match=r"journal\.jsonl: file: cannot read it: Is a directory"):
        read_journal((tmp_path / "journal.jsonl").mkdir() or tmp_path / "journal.jsonl")
