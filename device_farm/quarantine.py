"""The quarantine file: tests that run and report but do not fail the run, until their entry expires.

A TOML file of ``[[quarantine]]`` tables::

    [[quarantine]]
    test = 'test_copy\\.py::test_big'   # a regular expression searched in the test id (required)
    target = 'MOCKUSB\\+.*'             # searched in the target string (optional: any)
    board = 'bridge-.*'                # searched in the board id (optional: any)
    reason = "flaky link, issue 42"    # required
    expires = 2027-01-31               # a TOML date (required): on and after it the entry no longer applies

Expired entries are reported as expired and match nothing. Every mistake is one :class:`QuarantineError` naming
the file, the line, the field and what was expected.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tinyhil.device_farm.toml_lines import FileFieldError, TableLines, decode_error_line

__all__ = ["Quarantine", "QuarantineEntry", "QuarantineError", "load_quarantine", "parse_quarantine"]

_KEYS: Final = ("test", "target", "board", "reason", "expires")


class QuarantineError(FileFieldError):
    """A quarantine file that cannot be used."""


@dataclass(frozen=True, slots=True)
class QuarantineEntry:
    """One entry; the patterns are searched (``re.search``), a missing one matches anything."""

    test: re.Pattern[str]
    target: re.Pattern[str] | None
    board: re.Pattern[str] | None
    reason: str
    expires: dt.date
    line: int

    def expired(self, today: dt.date) -> bool:
        return today >= self.expires

    def matches(self, test: str, target: str | None, board: str | None) -> bool:
        """Whether the entry covers ``test`` on ``target`` and ``board``; ``board=None`` means "on some board" (before
        planning, when the board is not known yet), which any board pattern allows."""
        return (
            self.test.search(test) is not None
            and (self.target is None or (target is not None and self.target.search(target) is not None))
            and (self.board is None or board is None or self.board.search(board) is not None)
        )

    def __str__(self) -> str:
        parts = [f"test /{self.test.pattern}/"]
        parts += [f"{name} /{p.pattern}/" for name, p in (("target", self.target), ("board", self.board)) if p]
        return f"{' '.join(parts)} until {self.expires.isoformat()}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Quarantine:
    """The entries of one file; :meth:`match` applies only those not expired on ``today``."""

    path: str
    entries: tuple[QuarantineEntry, ...]

    def active(self, today: dt.date) -> tuple[QuarantineEntry, ...]:
        return tuple(e for e in self.entries if not e.expired(today))

    def expired(self, today: dt.date) -> tuple[QuarantineEntry, ...]:
        return tuple(e for e in self.entries if e.expired(today))

    def match(self, test: str, target: str | None, board: str | None, today: dt.date) -> QuarantineEntry | None:
        """The first active entry matching the test on that target and board, or ``None``."""
        return next((e for e in self.active(today) if e.matches(test, target, board)), None)


def _pattern(path: str, lines: TableLines, index: int, table: dict[str, Any], key: str) -> re.Pattern[str] | None:
    value = table.get(key)
    if value is None and key != "test":
        return None
    line = lines.field(index, key)
    if not isinstance(value, str) or not value:
        shown = "missing" if value is None else repr(value)
        raise QuarantineError(path, line, f"entry #{index + 1} {key}", f"{shown}, expected a regular expression")
    try:
        return re.compile(value)
    except re.error as exc:
        raise QuarantineError(path, line, f"entry #{index + 1} {key}", f"{value!r} is not a regex: {exc}") from None


def _entry(path: str, lines: TableLines, index: int, table: Any) -> QuarantineEntry:
    where = f"entry #{index + 1}"
    if not isinstance(table, dict):
        raise QuarantineError(path, lines.entry(index), where, "expected a [[quarantine]] table")
    for key in table:
        if key not in _KEYS:
            raise QuarantineError(path, lines.field(index, key), f"{where} {key}",
                                  f"unknown field, expected one of {', '.join(_KEYS)}")  # fmt: skip
    test = _pattern(path, lines, index, table, "test")
    assert test is not None
    reason = table.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        shown = "missing" if reason is None else repr(reason)
        raise QuarantineError(path, lines.field(index, "reason"), f"{where} reason", f"{shown}, expected why (text)")
    expires = table.get("expires")
    if not isinstance(expires, dt.date) or isinstance(expires, dt.datetime):
        shown = "missing" if expires is None else repr(expires)
        raise QuarantineError(path, lines.field(index, "expires"), f"{where} expires",
                              f"{shown}, expected a TOML date such as 2027-01-31 (unquoted)")  # fmt: skip
    target = _pattern(path, lines, index, table, "target")
    board = _pattern(path, lines, index, table, "board")
    return QuarantineEntry(test, target, board, reason, expires, lines.entry(index))


def parse_quarantine(text: str, path: str = "quarantine.toml") -> Quarantine:
    """Validate a quarantine file's text (``path`` only names it in errors).

    Raises:
        QuarantineError: not TOML, an unknown field, a bad regex, a missing reason, a bad or missing date.
    """
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise QuarantineError(path, decode_error_line(str(exc)), "toml", str(exc)) from None
    for key in document:
        if key != "quarantine":
            raise QuarantineError(path, 1, key, "unknown top-level field, expected [[quarantine]] tables")
    tables = document.get("quarantine", [])
    if not isinstance(tables, list):
        raise QuarantineError(path, 1, "quarantine", "expected [[quarantine]] tables (an array of tables)")
    lines = TableLines(text, "quarantine")
    return Quarantine(path, tuple(_entry(path, lines, n, table) for n, table in enumerate(tables)))


def load_quarantine(path: str | Path) -> Quarantine:
    """Read and validate the quarantine file at ``path``.

    Raises:
        QuarantineError: it cannot be read, or its content is invalid (see :func:`parse_quarantine`).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise QuarantineError(str(path), 0, "file", f"cannot read it: {exc}") from None
    return parse_quarantine(text, str(path))
