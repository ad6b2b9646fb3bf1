"""Profiling timeline: range, point and graph events, exported as Chrome/Perfetto trace-event JSON.

Every event that belongs to a program carries a *profile key*, a content hash of the program's binary, so two
different programs that share a display name stay two tracks of data on the timeline (and two identical programs
share one key). Timestamps are integer nanoseconds on the device's clock: virtual time on emulated targets.

The export follows the trace-event format Perfetto and ``chrome://tracing`` load: a ``traceEvents`` list of
``{"ph", "ts", "dur", "pid", "tid", "name", "args"}`` objects with ``ts``/``dur`` in microseconds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tinyhil.errors import InvalidArgument

__all__ = [
    "PROFILE_KEY_HEX_DIGITS",
    "ProfileEvent",
    "ProfileGraphEvent",
    "ProfilePointEvent",
    "ProfileRangeEvent",
    "export_trace",
    "profile_key",
    "to_trace_events",
]

PROFILE_KEY_HEX_DIGITS: Final = 16
_NS_PER_US: Final = 1000.0


def profile_key(binary: bytes | bytearray | memoryview) -> str:
    """The content hash that identifies a program on a timeline (hex, 64 bits of sha256)."""
    return hashlib.sha256(binary).hexdigest()[:PROFILE_KEY_HEX_DIGITS]


def _frozen_args(args: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((args or {}).items()))


@dataclass(frozen=True, slots=True)
class ProfileRangeEvent:
    """Something that ran on ``device``/``queue`` from ``start_ns`` to ``end_ns``."""

    device: str
    name: str
    start_ns: int
    end_ns: int
    key: str | None = None
    queue: str = "compute"
    args: tuple[tuple[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        if self.end_ns < self.start_ns:
            raise InvalidArgument(
                f"range event {self.name!r} ends at {self.end_ns} ns before it starts ({self.start_ns})"
            )

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True, slots=True)
class ProfilePointEvent:
    """An instant on ``device``/``queue`` (a signal, a doorbell, a fault)."""

    device: str
    name: str
    ts_ns: int
    key: str | None = None
    queue: str = "compute"
    args: tuple[tuple[str, Any], ...] = field(default=())


@dataclass(frozen=True, slots=True)
class ProfileGraphEvent:
    """A batch of ranges submitted together (a command graph), shown as a parent range over its entries."""

    device: str
    name: str
    entries: tuple[ProfileRangeEvent, ...]
    queue: str = "compute"

    def __post_init__(self) -> None:
        if not self.entries:
            raise InvalidArgument(f"graph event {self.name!r} has no entries, expected at least one range")

    @property
    def start_ns(self) -> int:
        return min(entry.start_ns for entry in self.entries)

    @property
    def end_ns(self) -> int:
        return max(entry.end_ns for entry in self.entries)


ProfileEvent = ProfileRangeEvent | ProfilePointEvent | ProfileGraphEvent


def _make_args(key: str | None, args: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    out: dict[str, Any] = dict(args)
    if key is not None:
        out["profile_key"] = key
    return out


def to_trace_events(events: Iterable[ProfileEvent]) -> dict[str, Any]:
    """Convert events to a trace-event JSON document (a ``dict`` ready for ``json.dump``)."""
    pids: dict[str, int] = {}
    tids: dict[tuple[str, str], int] = {}
    trace: list[dict[str, Any]] = []

    def ids(device: str, queue: str) -> tuple[int, int]:
        if device not in pids:
            pids[device] = len(pids) + 1
            trace.append({"ph": "M", "name": "process_name", "pid": pids[device], "tid": 0, "args": {"name": device}})
        if (device, queue) not in tids:
            tids[(device, queue)] = len(tids) + 1
            trace.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": pids[device],
                    "tid": tids[(device, queue)],
                    "args": {"name": queue},
                }
            )
        return pids[device], tids[(device, queue)]

    def complete(event: ProfileRangeEvent) -> dict[str, Any]:
        pid, tid = ids(event.device, event.queue)
        return {
            "ph": "X",
            "name": event.name,
            "ts": event.start_ns / _NS_PER_US,
            "dur": event.duration_ns / _NS_PER_US,
            "pid": pid,
            "tid": tid,
            "args": _make_args(event.key, event.args),
        }

    for event in events:
        if isinstance(event, ProfileRangeEvent):
            trace.append(complete(event))
        elif isinstance(event, ProfilePointEvent):
            pid, tid = ids(event.device, event.queue)
            trace.append(
                {
                    "ph": "i",
                    "s": "t",
                    "name": event.name,
                    "ts": event.ts_ns / _NS_PER_US,
                    "pid": pid,
                    "tid": tid,
                    "args": _make_args(event.key, event.args),
                }
            )
        else:
            pid, tid = ids(event.device, event.queue)
            trace.append(
                {
                    "ph": "X",
                    "name": event.name,
                    "ts": event.start_ns / _NS_PER_US,
                    "dur": (event.end_ns - event.start_ns) / _NS_PER_US,
                    "pid": pid,
                    "tid": tid,
                    "args": {"entries": len(event.entries)},
                }
            )
            trace.extend(complete(entry) for entry in event.entries)
    return {"traceEvents": trace, "displayTimeUnit": "ns"}


def export_trace(events: Iterable[ProfileEvent], path: str | Path) -> Path:
    """Write events as a Perfetto-loadable trace-event JSON file and return its path."""
    out = Path(path)
    out.write_text(json.dumps(to_trace_events(events), indent=1))
    return out
