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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tinyhil.device_farm.inventory.toml_lines import TableLines, raising
from tinyhil.loading import Fields, FileFormatError, parse_toml, read_capped

__all__ = [
    "MAX_ENTRIES",
    "REASON_MAX_CHARS",
    "Quarantine",
    "QuarantineEntry",
    "QuarantineError",
    "load_quarantine",
    "parse_quarantine",
]

_KEYS: Final = ("test", "target", "board", "reason", "expires")
MAX_ENTRIES: Final = 4096  # entries in one quarantine file
REASON_MAX_CHARS: Final = 4096


class QuarantineError(FileFormatError):
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


def _pattern(entry: Fields, key: str) -> re.Pattern[str] | None:
    value = entry.string(key, required=key == "test")
    if value is None:
        return None
    try:
        return re.compile(value)
    except (re.error, RecursionError, OverflowError) as exc:  # a regex nested past the parser's recursion limit
        raise entry.error(key, f"{value!r:.60} is not a regex: {exc}") from None


def _entry(path: str, lines: TableLines, index: int, table: Any) -> QuarantineEntry:
    where = f"entry #{index + 1}"
    if not isinstance(table, dict):
        raise QuarantineError(path, lines.entry(index), where, "expected a [[quarantine]] table")
    entry = Fields(table, path, prefix=f"{where} ", line_of=lambda name: lines.field(index, name))
    entry.only(_KEYS)
    test = _pattern(entry, "test")
    assert test is not None
    reason = entry.string("reason", max_len=REASON_MAX_CHARS)
    assert reason is not None
    if not reason.strip():
        raise entry.error("reason", f"{reason!r}, expected why (text)")
    expires = table.get("expires")
    if not isinstance(expires, dt.date) or isinstance(expires, dt.datetime):
        shown = "missing" if expires is None else f"{expires!r:.60}"
        raise entry.error("expires", f"{shown}, expected a TOML date such as 2027-01-31 (unquoted)")
    target = _pattern(entry, "target")
    board = _pattern(entry, "board")
    return QuarantineEntry(test, target, board, reason, expires, lines.entry(index))


def parse_quarantine(text: str | bytes, path: str = "quarantine.toml") -> Quarantine:
    """Validate a quarantine file's text (``path`` only names it in errors).

    Raises:
        QuarantineError: not UTF-8 or not TOML, nested too deep, an integer past 64 bits, more than
            :data:`MAX_ENTRIES` entries, an unknown field, a bad regex, a missing reason, a bad or missing date.
    """
    with raising(QuarantineError):
        document = parse_toml(text, path)
        for key in document:
            if key != "quarantine":
                raise QuarantineError(path, 1, key, "unknown top-level field, expected [[quarantine]] tables")
        tables = document.get("quarantine", [])
        if not isinstance(tables, list):
            raise QuarantineError(path, 1, "quarantine", "expected [[quarantine]] tables (an array of tables)")
        if len(tables) > MAX_ENTRIES:
            raise QuarantineError(path, 0, "quarantine", f"{len(tables)} entries, expected at most {MAX_ENTRIES}")
        lines = TableLines(text if isinstance(text, str) else text.decode(), "quarantine")
        return Quarantine(path, tuple(_entry(path, lines, n, table) for n, table in enumerate(tables)))


def load_quarantine(path: str | Path) -> Quarantine:
    """Read and validate the quarantine file at ``path`` (refused unread past its size cap, ``LIMITS["quarantine"]``).

    Raises:
        QuarantineError: it cannot be read or is too large, or its content is invalid (see :func:`parse_quarantine`).
    """
    with raising(QuarantineError):
        data = read_capped(path, "quarantine")
    return parse_quarantine(data, str(path))
