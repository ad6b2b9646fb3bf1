"""The run journal: every result appended as one JSON line, flushed and fsynced, as it arrives.

A scheduler that crashes loses nothing already written; ``--resume RUN`` reads the journal back and runs only the
pairs with no final result. Records::

    {"kind": "run", "run_id": "...", "started": 1764770000.0, "pairs": 120}
    {"kind": "result", "key": "tests/x.py::test_a@MOCKUSB+AMD", "nodeid": "...", "target": "MOCKUSB+AMD",
     "board": "emu", "host": "lab-1", "attempt": 1, "outcome": "passed", "duration_s": 0.12, "reason": "",
     "infrastructure": null, "final": true}

A result with ``"final": false`` is an attempt lost to an infrastructure failure (``infrastructure`` says which)
that the farm retries; the final record is what the reports show, and a pair has at most one (a second one is
ignored and counted, so a result is never reported twice). A line that does not parse, or lacks a field, or the
last line cut short by a crash mid-write, is *corrupt*: reported by :func:`read_journal`, and its pair re-run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

__all__ = ["RESULT_FIELDS", "Journal", "JournalState", "read_journal"]

RESULT_FIELDS: Final = ("key", "nodeid", "target", "board", "attempt", "outcome", "final")


class Journal:
    """An open journal, appending records; a journal cut short by a crash is first ended with a newline."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        size = os.fstat(self._fd).st_size
        if size:
            with self.path.open("rb") as existing:
                existing.seek(size - 1)
                if existing.read(1) != b"\n":
                    self._write(b"\n")  # the torn line stays corrupt; the next record starts on its own line

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)

    def append(self, record: Mapping[str, Any]) -> None:
        """Write ``record`` as one line and fsync it before returning."""
        if self._fd is None:
            raise ValueError(f"journal {self.path} is closed")
        self._write(json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


@dataclass(slots=True)
class JournalState:
    """A journal read back: the run header, every attempt per pair, the final result per pair, and the damage."""

    run: dict[str, Any] | None = None
    attempts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    final: dict[str, dict[str, Any]] = field(default_factory=dict)
    corrupt: list[tuple[int, str]] = field(default_factory=list)
    duplicates: int = 0


def _problem(line: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        record = json.loads(line)
    except ValueError as exc:
        return None, f"not JSON ({exc})"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    if record.get("kind") == "run":
        return record, ""
    if record.get("kind") != "result":
        return None, f"unknown kind {record.get('kind')!r}"
    missing = [name for name in RESULT_FIELDS if name not in record]
    return (None, f"missing {', '.join(missing)}") if missing else (record, "")


def read_journal(path: str | Path) -> JournalState:
    """Read the journal at ``path`` (a missing one reads as empty)."""
    state = JournalState()
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return state
    lines = data.split(b"\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if number == len(lines):  # no newline after it: a write cut short
            state.corrupt.append((number, "cut short (no newline): the write did not finish"))
            continue
        record, problem = _problem(line)
        if record is None:
            state.corrupt.append((number, problem))
            continue
        if record["kind"] == "run":
            state.run = state.run or record
            continue
        key = str(record["key"])
        state.attempts.setdefault(key, []).append(record)
        if record["final"]:
            if key in state.final:
                state.duplicates += 1
            else:
                state.final[key] = record
    return state
