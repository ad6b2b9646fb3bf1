"""Traces by file name: the format comes from the extension (``.hiltrace.jsonl`` or ``.pcapng``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Final

from tinyhil.errors import InvalidArgument
from tinyhil.trace.jsonl import JSONL_SUFFIX, load_jsonl, save_jsonl
from tinyhil.trace.pcapng import PCAPNG_SUFFIX, load_pcapng, save_pcapng
from tinyhil.trace.records import Trace

__all__ = ["TRACE_SUFFIXES", "convert_trace", "load_trace", "save_trace", "trace_file_name", "trace_format"]

_LOADERS: Final[dict[str, Callable[[str | Path], Trace]]] = {JSONL_SUFFIX: load_jsonl, PCAPNG_SUFFIX: load_pcapng}
_SAVERS: Final[dict[str, Callable[[Trace, str | Path], None]]] = {JSONL_SUFFIX: save_jsonl, PCAPNG_SUFFIX: save_pcapng}
TRACE_SUFFIXES: Final = tuple(_LOADERS)


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


def load_trace(path: str | Path) -> Trace:
    """Read and check a trace in either format (errors name the line or byte offset)."""
    return _LOADERS[trace_format(path)](path)


def save_trace(trace: Trace, path: str | Path) -> None:
    """Write ``trace`` in the format ``path``'s extension names."""
    _SAVERS[trace_format(path)](trace, path)


def convert_trace(source: str | Path, destination: str | Path) -> Trace:
    """Convert ``source`` to ``destination`` (formats from the extensions); returns the trace."""
    save = _SAVERS[trace_format(destination)]
    trace = load_trace(source)
    save(trace, destination)
    return trace


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
