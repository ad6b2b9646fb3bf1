"""``tinyhil farm history --export FILE``: every recorded attempt with its run's facts, one row each, as CSV or JSON
lines (by the file's extension, or ``--format``), for a team's own dashboards."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path
from typing import Final

from tinyhil._files import write_atomically
from tinyhil.errors import InvalidArgument

__all__ = ["EXPORT_COLUMNS", "EXPORT_FORMATS", "export_format", "export_history"]

EXPORT_FORMATS: Final = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}
EXPORT_COLUMNS: Final = ("run_id", "suite", "run_started", "run_finished", "revision", "version", "hosts",
                         "map_hash", "test", "target", "board", "host", "attempt", "final", "outcome", "flaky",
                         "quarantined", "infrastructure", "duration_s", "started", "message")  # fmt: skip
_QUERY: Final = (
    "SELECT r.run_id, r.suite, r.started, r.finished, r.revision, r.version, r.hosts, r.map_hash, a.test, a.target, "
    "a.board, a.host, a.attempt, a.final, a.outcome, a.flaky, a.quarantined, a.infrastructure, a.duration_s, "
    "a.started, a.message FROM attempts a JOIN runs r ON a.run = r.id ORDER BY r.started, r.id, a.id"
)
_FLAGS: Final = ("final", "flaky", "quarantined")


def export_format(path: Path, given: str | None) -> str:
    """The format ``path`` is written in: ``given`` (``--format``), else by its extension.

    Raises:
        InvalidArgument: no ``--format`` and an extension that names none.
    """
    if given:
        return given
    found = EXPORT_FORMATS.get(path.suffix.lower())
    if found is None:
        known = ", ".join(EXPORT_FORMATS)
        raise InvalidArgument(f"--export {str(path)!r}: extension {path.suffix!r} names no format, expected one of "
                              f"{known} or --format csv|jsonl")  # fmt: skip
    return found


def export_history(db: sqlite3.Connection, path: Path, fmt: str) -> int:
    """Write every attempt to ``path`` in ``fmt`` (``csv``: a header row of :data:`EXPORT_COLUMNS`; ``jsonl``: an
    object per line); returns the number of rows."""
    rows = [dict(zip(EXPORT_COLUMNS, row, strict=True)) for row in db.execute(_QUERY)]
    for row in rows:
        row["hosts"] = json.loads(row["hosts"])
        row.update({flag: bool(row[flag]) for flag in _FLAGS})
    if fmt == "csv":
        text = io.StringIO()
        writer = csv.DictWriter(text, EXPORT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows({**row, "hosts": " ".join(row["hosts"])} for row in rows)
        write_atomically(path, text.getvalue())
    else:
        write_atomically(path, "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
    return len(rows)
