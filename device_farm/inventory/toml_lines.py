"""Line numbers in a TOML file of ``[[name]]`` tables, and the one adapter from the loader rule's error to a farm
file's own error type.

``tomllib`` keeps no positions; the farm's files (the hardware map, the quarantine file) are arrays of tables
whose keys sit one per line, so the line of an entry's field is found by scanning from the entry's header. Every
check itself is :mod:`tinyhil.loading`'s (:class:`~tinyhil.loading.Fields`); :func:`raising` only retypes its
:class:`~tinyhil.loading.FileFormatError` as the file's subclass (``HwmapError``, ``QuarantineError``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from tinyhil.loading import FileFormatError

__all__ = ["TableLines", "raising"]

_HEADER: Final = re.compile(r"^\s*\[")


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


@contextmanager
def raising(kind: type[FileFormatError]) -> Iterator[None]:
    """Re-raise a :class:`~tinyhil.loading.FileFormatError` from the block as ``kind`` (same path, line, field and
    why), so a caller catching the file's own error type catches every problem with the file."""
    try:
        yield
    except FileFormatError as exc:
        if isinstance(exc, kind):
            raise
        raise kind(exc.path, exc.line, exc.field, exc.why) from None
