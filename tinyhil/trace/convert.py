"""Traces by file name: the format comes from the extension (``.hiltrace.jsonl`` or ``.pcapng``).

:func:`open_trace` streams a trace (:class:`~tinyhil.trace.source.TraceSource`: the header at once, the records
lazily); :func:`load_trace` reads it whole. Writing is streamed too, into a temporary file beside the destination
that replaces it only once the whole trace is written: a trace found malformed half-way leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any, Final

from tinyhil._files import replacing
from tinyhil.errors import InvalidArgument
from tinyhil.trace.jsonl import JSONL_SUFFIX, read_jsonl, write_jsonl
from tinyhil.trace.pcapng import PCAPNG_SUFFIX, write_pcapng
from tinyhil.trace.pcapng_reader import read_pcapng
from tinyhil.trace.records import Record, Trace, TraceHeader
from tinyhil.trace.source import TraceSource

__all__ = ["TRACE_SUFFIXES", "convert_trace", "load_trace", "open_trace", "save_trace", "trace_file_name",
           "trace_format", "write_trace"]  # fmt: skip

_READERS: Final[dict[str, Callable[[str | Path], TraceSource]]] = {JSONL_SUFFIX: read_jsonl, PCAPNG_SUFFIX: read_pcapng}
_WRITERS: Final[dict[str, Callable[[TraceHeader, Iterable[Record], IO[bytes]], Any]]] = {
    JSONL_SUFFIX: write_jsonl,
    PCAPNG_SUFFIX: write_pcapng,
}
TRACE_SUFFIXES: Final = tuple(_READERS)


def trace_format(path: str | Path) -> str:
    """The suffix naming ``path``'s format.

    Raises:
        InvalidArgument: the name ends in neither known suffix (the message lists them).
    """
    name = Path(path).name
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            return suffix
    known = " or ".join(f"'*{suffix}'" for suffix in TRACE_SUFFIXES)
    raise InvalidArgument(f"trace file {str(path)!r}: unknown extension, expected {known}")


def open_trace(path: str | Path) -> TraceSource:
    """A trace in either format, streamed: its header read and checked now, its records as they are iterated.

    Raises:
        InvalidArgument: an unknown extension; TraceFormatError: an unreadable or malformed file (the file, the line
            or byte offset, the field).
    """
    return _READERS[trace_format(path)](path)


def load_trace(path: str | Path) -> Trace:
    """Read and check a whole trace in either format (errors name the line or byte offset)."""
    return open_trace(path).trace()


def write_trace(header: TraceHeader, records: Iterable[Record], path: str | Path) -> int:
    """Write a trace (``records`` streamed) in the format ``path``'s extension names, atomically: into a temporary
    file beside ``path``, renamed over it when complete, removed when anything fails. Returns the record count."""
    write = _WRITERS[trace_format(path)]
    count = 0

    def counted() -> Iterable[Record]:
        nonlocal count
        for record in records:
            count += 1
            yield record

    with replacing(Path(path)) as out:
        write(header, counted(), out)
    return count


def save_trace(trace: Trace, path: str | Path) -> None:
    """Write ``trace`` in the format ``path``'s extension names."""
    write_trace(trace.header, trace.records, path)


def convert_trace(source: str | Path, destination: str | Path) -> int:
    """Convert ``source`` to ``destination`` (formats from the extensions), streamed; returns the record count."""
    trace_format(destination)
    reader = open_trace(source)
    return write_trace(reader.header, reader.records(), destination)


_NAME_LIMIT: Final = 160
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._+=@-]+")
TARGET_PLACEHOLDER: Final = "@"


def trace_file_name(nodeid: str, target: str, suffix: str = ".hiltrace.jsonl") -> str:
    """The file name ``--hil-record`` gives one test's trace on ``target``: the node id with the target in it
    replaced by ``@``, then ``--`` and the target, every other character outside ``[A-Za-z0-9._+=@-]`` as ``_``
    (long names are cut and end in a hash of the whole). ``--hil-replay DIR`` finds a test's trace by this name."""
    stem = _UNSAFE.sub(
        "_", nodeid.replace(f"[{target}]", f"[{TARGET_PLACEHOLDER}]").replace(target, TARGET_PLACEHOLDER)
    )
    if len(stem) > _NAME_LIMIT:
        stem = f"{stem[:_NAME_LIMIT]}~{hashlib.sha256(stem.encode()).hexdigest()[:12]}"
    return f"{stem}--{_UNSAFE.sub('_', target)}{suffix}"
