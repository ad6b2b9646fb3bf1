"""The health journal: every change of a board's state, one JSON line each, appended to ``health.jsonl`` in the
farm's state directory (when, which board, from which state to which, why, and who when an operator made it).

A line is written with one ``write`` to a file opened for appending, so lines of several processes never interleave;
:func:`read_changes` reads it back, every field typed, skipping a line a crash cut short.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from tinyhil.loading import LIMITS, Fields, FileFormatError, parse_json, read_capped

__all__ = ["HEALTH_LOG", "HealthChange", "append_change", "read_changes"]

HEALTH_LOG: Final = "health.jsonl"
_TEXT_MAX_CHARS: Final = LIMITS["health"].max_bytes
_FIELDS: Final = ("time", "board", "before", "after", "reason", "by")


@dataclass(frozen=True, slots=True)
class HealthChange:
    """One change of a board's health state; ``by`` is ``user@host`` for an operator's change, else empty."""

    time: float
    board: str
    before: str
    after: str
    reason: str
    by: str = ""


def append_change(state_dir: Path, change: HealthChange) -> None:
    """Append ``change`` to ``state_dir/health.jsonl`` as one line."""
    line = json.dumps(asdict(change), sort_keys=True).encode("utf-8", "backslashreplace") + b"\n"
    fd = os.open(state_dir / HEALTH_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_changes(state_dir: Path) -> list[HealthChange]:
    """The changes in ``state_dir/health.jsonl`` in the order they were made (none when it is missing).

    Raises:
        FileFormatError: the file is over its cap (``LIMITS["health"]``) or cannot be read.
    """
    path = state_dir / HEALTH_LOG
    if not path.exists():
        return []
    changes = []
    for line in read_capped(path, "health").splitlines():
        try:
            fields = Fields(parse_json(line, path), path)
            fields.only(_FIELDS)
            when = fields.number("time")
            board, before, after = (fields.string(name, max_len=_TEXT_MAX_CHARS) for name in _FIELDS[1:4])
            reason, by = (fields.string(name, max_len=_TEXT_MAX_CHARS, empty=True) for name in ("reason", "by"))
        except FileFormatError:
            continue  # a line a crash cut short
        assert when is not None and board and before and after and reason is not None and by is not None
        changes.append(HealthChange(when, board, before, after, reason, by))
    return changes
