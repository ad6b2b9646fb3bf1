"""Line numbers in a TOML file of ``[[name]]`` tables, for errors that name file, line and field.

``tomllib`` keeps no positions; the farm's files (the hardware map, the quarantine file) are arrays of tables
whose keys sit one per line, so the line of an entry's field is found by scanning from the entry's header.
"""

from __future__ import annotations

import re
from typing import Final

from tinyhil.errors import InvalidArgument

__all__ = ["FileFieldError", "TableLines", "decode_error_line"]

_HEADER: Final = re.compile(r"^\s*\[")


class FileFieldError(InvalidArgument):
    """A farm file that cannot be used: ``path:line: field: what was expected`` (line 0: the file itself)."""

    def __init__(self, path: str, line: int, field: str, why: str) -> None:
        super().__init__(f"{path}:{line}: {field}: {why}")
        self.path, self.line, self.field = path, line, field


class TableLines:
    """Where the ``[[table]]`` entries of ``text`` start, and where each one's fields are."""

    def __init__(self, text: str, table: str) -> None:
        self._lines = text.splitlines()
        header = re.compile(rf"^\s*\[\[\s*{re.escape(table)}\s*\]\]")
        self._starts = [n for n, line in enumerate(self._lines, 1) if header.match(line)]

    def entry(self, index: int) -> int:
        """The line of entry ``index``'s header (1 when the file has fewer headers, as for an inline array)."""
        return self._starts[index] if index < len(self._starts) else 1

    def field(self, index: int, name: str) -> int:
        """The line of ``name = ...`` in entry ``index`` (its header line when the key is absent)."""
        start = self.entry(index)
        key = re.compile(rf"^\s*{re.escape(name)}\s*=")
        for number in range(start + 1, len(self._lines) + 1):
            line = self._lines[number - 1]
            if _HEADER.match(line):
                break
            if key.match(line):
                return number
        return start


def decode_error_line(message: str) -> int:
    """The line a ``tomllib.TOMLDecodeError`` message names (``... (at line 3, column 7)``), else 1."""
    found = re.search(r"line (\d+)", message)
    return int(found.group(1)) if found else 1
