"""The quarantine file: matching by test, target and board regexes; expiry; one-line errors naming file, line, field."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from tinyhil.device_farm.quarantine import QuarantineError, load_quarantine, parse_quarantine
from tinyhil.loading import LIMITS

GOOD = """\
[[quarantine]]
test = 'test_copy\\.py::test_big'
target = 'MOCKUSB\\+'
reason = "flaky link, issue 42"
expires = 2027-01-31

[[quarantine]]
test = 'test_old'
board = '^bridge-'
reason = "fixed long ago"
expires = 2026-01-01
"""
TODAY = dt.date(2026, 12, 3)


def test_active_entries_match_by_test_target_and_board() -> None:
    quarantine = parse_quarantine(GOOD, "q.toml")
    entry = quarantine.match("tests/test_copy.py::test_big[MOCKUSB+AMD]", "MOCKUSB+AMD", "emu", TODAY)
    assert entry is not None and entry.reason == "flaky link, issue 42" and entry.line == 1
    assert str(entry) == r"test /test_copy\.py::test_big/ target /MOCKUSB\+/ until 2027-01-31: flaky link, issue 42"
    assert quarantine.match("tests/test_copy.py::test_big", "NULL", "emu", TODAY) is None
    assert quarantine.match("tests/test_copy.py::test_small", "MOCKUSB+AMD", "emu", TODAY) is None
    assert quarantine.match("tests/test_copy.py::test_big", None, "emu", TODAY) is None


def test_expired_entries_are_reported_and_no_longer_apply() -> None:
    quarantine = parse_quarantine(GOOD)
    assert [e.reason for e in quarantine.expired(TODAY)] == ["fixed long ago"]
    assert quarantine.match("test_old", "NULL", "bridge-a", TODAY) is None
    assert quarantine.match("test_old", "NULL", "bridge-a", dt.date(2025, 12, 31)) is not None
    assert quarantine.match("tests/test_copy.py::test_big", "MOCKUSB+AMD", None, dt.date(2027, 1, 31)) is None


def _entry(**fields: str) -> str:
    body = {"test": "'x'", "reason": "'r'", "expires": "2027-01-01", **fields}
    return "[[quarantine]]\n" + "".join(f"{key} = {value}\n" for key, value in body.items() if value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[quarantine]\n", "q.toml:1: file: not TOML: "),
        (_entry(test="'(x'"), "q.toml:2: entry #1 test: '(x' is not a regex"),
        (_entry(test=""), "q.toml:1: entry #1 test: missing"),
        (_entry(reason=""), "q.toml:1: entry #1 reason: missing"),
        (_entry(expires="'2027-01-01'"), "q.toml:4: entry #1 expires: '2027-01-01', expected a TOML date"),
        (_entry(expires="2027-01-01T10:00:00"), "q.toml:4: entry #1 expires: datetime.datetime(2027, 1, 1, 10, 0)"),
        (_entry(board="'['"), "q.toml:5: entry #1 board: '[' is not a regex"),
        (_entry(colour="1"), "q.toml:5: entry #1 colour: unknown field, expected one of test, target"),
        ("tests = 1\n", "q.toml:1: tests: unknown top-level field"),
        (_entry(reason="1"), "q.toml:3: entry #1 reason: 1, expected a non-empty string"),
        (_entry(reason="'  '"), "q.toml:3: entry #1 reason: '  ', expected why (text)"),
        (_entry(test="['x']"), "q.toml:2: entry #1 test: ['x'], expected a non-empty string"),
        (_entry(target="{ a = 1 }"), "q.toml:5: entry #1 target: {'a': 1}, expected a non-empty string"),
        (_entry(reason="'" + "r" * 5000 + "'"), "q.toml:3: entry #1 reason: 'rrrr"),
        (_entry(test="'" + "(" * 5000 + "x" + ")" * 5000 + "'"), "q.toml:2: entry #1 test: '(((("),
        (_entry(expires="[" * 5000 + "]" * 5000), "q.toml: file: nested deeper than 32 levels"),
        (_entry(expires="[" * 40 + "]" * 40), "q.toml: quarantine[0].expires[0][0]"),
        (_entry(expires="9" * 5000), "q.toml: file: not TOML: "),
        (_entry(expires="99999999999999999999"), "q.toml: quarantine[0].expires: an integer past 64 bits"),
        ("quarantine = [1]\n", "q.toml:1: entry #1: expected a [[quarantine]] table"),
        ("[[quarantine]]\n" * 4097, "q.toml: quarantine: 4097 entries, expected at most 4096"),
    ],
)
def test_a_bad_file_is_one_error_naming_file_line_and_field(text: str, message: str) -> None:
    with pytest.raises(QuarantineError) as raised:
        parse_quarantine(text, "q.toml")
    assert str(raised.value).startswith(message), str(raised.value)


def test_load_names_an_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "q.toml").write_text(GOOD)
    assert len(load_quarantine(tmp_path / "q.toml").entries) == 2
    with pytest.raises(QuarantineError, match=r"nope\.toml: file: cannot read it"):
        load_quarantine(tmp_path / "nope.toml")


def test_before_planning_a_board_pattern_allows_any_board() -> None:
    entry = parse_quarantine(GOOD).entries[1]
    assert entry.matches("test_old", "NULL", None) and not entry.matches("test_old", "NULL", "emu")


def test_a_file_over_its_cap_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "q.toml"
    path.write_bytes(b"#" * (LIMITS["quarantine"].max_bytes + 1))
    with pytest.raises(QuarantineError, match=r"q\.toml: file: larger than 4194304 bytes, the limit for a quarantine"):
        load_quarantine(path)
    path.write_bytes(b"[[quarantine]]\ntest = '\xff'\n")
    with pytest.raises(QuarantineError, match=r"q\.toml: file: not UTF-8 text"):
        load_quarantine(path)
