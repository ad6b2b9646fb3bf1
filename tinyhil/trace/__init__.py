"""USB traces: record a handle, store the trace as JSONL or usbmon pcapng, replay it as a handle.

- :mod:`tinyhil.trace.records`: ``TraceHeader``, ``Transfer``, ``Submit``, ``Complete``, ``HostCall``, ``Trace``.
- :mod:`tinyhil.trace.jsonl` / :mod:`tinyhil.trace.pcapng` (writing) and :mod:`tinyhil.trace.pcapng_reader`: the two
  formats, both read streamed (:mod:`tinyhil.trace.source`); :mod:`tinyhil.trace.convert` picks one
  by file name (``open_trace``, a :class:`~tinyhil.trace.source.TraceSource` streaming its records; ``load_trace``,
  ``save_trace``, ``write_trace``, ``convert_trace``); :mod:`tinyhil.trace.limits`: the bounds of every field.
- :mod:`tinyhil.trace.recorder`: ``TraceRecorder`` and the recording wrappers (handle, transfer, context).
- :mod:`tinyhil.trace.exchanges` / :mod:`tinyhil.trace.replay`: a trace as the requests to match; ``ReplayContext``
  and ``ReplayHandle``, a trace served as a handle.
- :mod:`tinyhil.trace.summary`: ``summarize``, what ``tinyhil trace show`` prints.
- :mod:`tinyhil.trace.errors`: ``TraceFormatError``, ``ReplayMismatch``, ``ReplayExhausted``, ``TraceNotConsumed``.

The formats, and what a trace can and cannot make tinyhil do (its bounds), are described in ``docs/traces.md``.
"""

from __future__ import annotations

from tinyhil.trace.convert import (
    TRACE_SUFFIXES,
    convert_trace,
    load_trace,
    open_trace,
    save_trace,
    trace_file_name,
    trace_format,
    write_trace,
)
from tinyhil.trace.errors import ReplayExhausted, ReplayMismatch, TraceError, TraceFormatError, TraceNotConsumed
from tinyhil.trace.exchanges import ReplayOrder
from tinyhil.trace.recorder import RecordingContext, RecordingHandle, RecordingTransfer, TraceRecorder
from tinyhil.trace.records import (
    FORMAT_VERSION,
    Complete,
    HostCall,
    Op,
    Record,
    Submit,
    Trace,
    TraceHeader,
    Transfer,
    TransferStatus,
)
from tinyhil.trace.replay import ReplayContext, ReplayHandle
from tinyhil.trace.source import TraceSource
from tinyhil.trace.summary import summarize

__all__ = [
    "FORMAT_VERSION",
    "TRACE_SUFFIXES",
    "Complete",
    "HostCall",
    "Op",
    "Record",
    "RecordingContext",
    "RecordingHandle",
    "RecordingTransfer",
    "ReplayContext",
    "ReplayExhausted",
    "ReplayHandle",
    "ReplayMismatch",
    "ReplayOrder",
    "Submit",
    "Trace",
    "TraceError",
    "TraceFormatError",
    "TraceHeader",
    "TraceNotConsumed",
    "TraceRecorder",
    "TraceSource",
    "Transfer",
    "TransferStatus",
    "convert_trace",
    "load_trace",
    "open_trace",
    "save_trace",
    "summarize",
    "trace_file_name",
    "trace_format",
    "write_trace",
]
