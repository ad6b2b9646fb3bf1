"""The run journal: every result appended as one JSON line, flushed and fsynced, as it arrives.

A scheduler that crashes loses nothing already written; ``--resume RUN`` reads the journal back and runs only the
pairs with no final result. Records::

    {"kind": "run", "run_id": "...", "started": 1764770000.0, "pairs": 120, "header": 1, ...}
    {"kind": "result", "key": "tests/x.py::test_a@MOCKUSB+AMD", "nodeid": "...", "target": "MOCKUSB+AMD",
     "board": "emu", "host": "lab-1", "attempt": 1, "outcome": "passed", "duration_s": 0.12, "reason": "",
     "infrastructure": null, "final": true}

The first record is the run's header: what the run is (its suite, map, targets, options and pairs), typed and read
back by :mod:`~tinyhil.device_farm.run_header`, which ``--resume`` runs the same run from; this module checks only
``run_id``, ``started`` and ``pairs``. A result record is one attempt (a failure ``--reruns`` runs again too).

A failed or errored result also carries what the reports show of it: ``longrepr``, ``stdout``, ``stderr`` and
``log`` (each capped, :mod:`tinyhil.fixtures.outcomes`), and ``bundle`` and ``trace`` when the shard wrote a
reproduction bundle.

A result with ``"final": false`` is an attempt lost to an infrastructure failure (``infrastructure`` says which)
that the farm retries; the final record is what the reports show, and a pair has at most one (a second one is
ignored and counted, so a result is never reported twice). A line that does not parse, or lacks a field, or the
last line cut short by a crash mid-write, is *corrupt*: reported by :func:`read_journal`, and its pair re-run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from tinyhil.loading import LIMITS, Fields, FileFormatError, parse_json

__all__ = ["JOURNAL_NAME", "RESULT_FIELDS", "Journal", "JournalState", "read_journal"]

JOURNAL_NAME: Final = "journal.jsonl"  # in a run's directory

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


_LINE_MAX_BYTES: Final = LIMITS["journal"].max_bytes
_TEXT_MAX_CHARS: Final = _LINE_MAX_BYTES  # a failure's reason is kept whole: the line's cap bounds it
_CHUNK_BYTES: Final = 1 << 16


def _check_result(fields: Fields) -> None:
    """Type every field of a result record that the farm reads back (reports, resume), once, here."""
    for name in ("key", "nodeid", "target", "board"):
        fields.string(name, max_len=_TEXT_MAX_CHARS)
    fields.integer("attempt", minimum=1)
    fields.string("outcome")
    fields.boolean("final")
    for name in ("host", "reason", "longrepr", "stdout", "stderr", "log"):
        fields.string(name, required=False, max_len=_TEXT_MAX_CHARS, empty=True)
    for name in ("infrastructure", "bundle", "trace"):
        fields.string(name, required=False, max_len=_TEXT_MAX_CHARS)
    for name in ("duration_s", "started", "finished"):
        fields.number(name, required=False)


def _check_run(fields: Fields) -> None:
    fields.string("run_id", max_len=_TEXT_MAX_CHARS)
    fields.number("started", required=False)
    fields.integer("pairs", required=False, minimum=0)


def _problem(line: bytes, path: str | Path, number: int) -> tuple[dict[str, Any] | None, str]:
    try:
        record = parse_json(line, path, line=number)
    except FileFormatError as exc:
        return None, exc.why if exc.field == "file" else f"{exc.field}: {exc.why}"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    if record.get("kind") not in ("run", "result"):
        return None, f"unknown kind {record.get('kind')!r:.60}"
    missing = [name for name in RESULT_FIELDS if name not in record]
    if record["kind"] == "result" and missing:
        return None, f"missing {', '.join(missing)}"
    try:
        (_check_run if record["kind"] == "run" else _check_result)(Fields(record, path, line=number))
    except FileFormatError as exc:
        return None, f"{exc.field}: {exc.why}"
    return record, ""


def _lines(path: str | Path) -> Iterator[tuple[int, bytes, str]]:
    """Every line of the journal with its number, read one at a time: ``(number, line, problem)``, where ``problem``
    is set for a line over the cap (its rest read in chunks and dropped, never held) or the last line cut short."""
    with open(path, "rb") as journal:
        number = 0
        while line := journal.readline(_LINE_MAX_BYTES + 1):
            number += 1
            if len(line) > _LINE_MAX_BYTES:
                while line and not line.endswith(b"\n"):  # the rest of the line, a chunk at a time
                    line = journal.readline(_CHUNK_BYTES)
                yield number, b"", f"longer than {_LINE_MAX_BYTES} bytes, the limit for a journal line"
            elif not line.endswith(b"\n"):
                if line.strip():
                    yield number, line, "cut short (no newline): the write did not finish"
            else:
                yield number, line, ""


def read_journal(path: str | Path) -> JournalState:
    """Read the journal at ``path`` (a missing one reads as empty); memory is bounded by the longest line read, and
    a line over ``LIMITS["journal"]`` is corrupt.

    Raises:
        FileFormatError: the journal exists but cannot be read (a directory, no permission).
    """
    state = JournalState()
    try:
        for number, line, problem in _lines(path):
            if not problem and not line.strip():
                continue
            record, problem = (None, problem) if problem else _problem(line, path, number)
            if record is None:
                state.corrupt.append((number, problem))
                continue
            if record["kind"] == "run":
                state.run = state.run or record
                continue
            key = record["key"]
            state.attempts.setdefault(key, []).append(record)
            if record["final"]:
                if key in state.final:
                    state.duplicates += 1
                else:
                    state.final[key] = record
    except FileNotFoundError:
        return state
    except OSError as exc:
        raise FileFormatError(path, 0, "file", f"cannot read it: {exc.strerror or exc}") from None
    return state
