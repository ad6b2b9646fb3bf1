"""Profiling timeline: profile keys and the Perfetto trace-event export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinyhil import InvalidArgument, open_target
from tinyhil.profile import (
    ProfileGraphEvent,
    ProfilePointEvent,
    ProfileRangeEvent,
    export_trace,
    profile_key,
    to_trace_events,
)

KERNEL = "int variant = {n};\nvoid scale(unsigned long long *a, const unsigned *g, const unsigned *s) {{ (void)a; }}\n"


def test_two_null_programs_with_one_name_stay_distinct_in_the_exported_trace(tmp_path: Path) -> None:
    with open_target("NULL") as device:
        first, second, same = (device.compile(KERNEL.format(n=n), "scale") for n in (1, 2, 1))
        for program in (first, second, same):
            device.exec(program, 1, 1)
        path = export_trace(device.profile_events, tmp_path / "trace.json")
    document = json.loads(path.read_text())
    kernels = [e for e in document["traceEvents"] if e["name"] == "scale"]
    keys = [e["args"]["profile_key"] for e in kernels]
    assert keys[0] != keys[1], "different bodies, same name: two keys"
    assert keys[0] == keys[2], "identical programs: one key"
    assert keys == [profile_key(p.binary) for p in (first, second, same)]


def test_trace_events_carry_the_fields_perfetto_needs() -> None:
    events = [
        ProfileRangeEvent("MOCKUSB+AMD", "copy", 1_000, 3_500, key="ab", queue="sdma0", args=(("nbytes", 4),)),
        ProfilePointEvent("MOCKUSB+AMD", "doorbell", 1_200, queue="sdma0"),
        ProfileGraphEvent(
            "NULL",
            "graph",
            (ProfileRangeEvent("NULL", "k1", 10, 20, key="k1"), ProfileRangeEvent("NULL", "k2", 20, 50, key="k2")),
        ),
    ]
    document = to_trace_events(events)
    assert set(document) == {"traceEvents", "displayTimeUnit"}
    body = [e for e in document["traceEvents"] if e["ph"] != "M"]
    for event in body:
        assert {"ph", "ts", "pid", "tid", "name", "args"} <= set(event)
    copy = next(e for e in body if e["name"] == "copy")
    assert (copy["ph"], copy["ts"], copy["dur"], copy["args"]) == ("X", 1.0, 2.5, {"nbytes": 4, "profile_key": "ab"})
    graph = next(e for e in body if e["name"] == "graph")
    assert (graph["ts"], graph["dur"], graph["args"]) == (0.01, 0.04, {"entries": 2})
    names = {(e["name"], e["args"]["name"]) for e in document["traceEvents"] if e["ph"] == "M"}
    assert ("process_name", "MOCKUSB+AMD") in names and ("thread_name", "sdma0") in names
    pids = {e["pid"] for e in body}
    assert len(pids) == 2, "one process track per device"


def test_range_events_validate_their_order() -> None:
    with pytest.raises(InvalidArgument, match="ends at 5 ns before it starts"):
        ProfileRangeEvent("NULL", "k", 10, 5)
    with pytest.raises(InvalidArgument, match="no entries"):
        ProfileGraphEvent("NULL", "g", ())
