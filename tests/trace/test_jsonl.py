"""The JSONL format: a lossless round trip, and one table of bad files, each error naming the line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinyhil.trace import TraceFormatError, load_trace
from tinyhil.trace.jsonl import dump_jsonl, parse_jsonl
from tinyhil.trace.records import Complete, HostCall, Op, Submit, Transfer


def test_a_recording_reads_back_equal_and_writes_back_identical(recorded: Path) -> None:
    trace = load_trace(recorded)
    assert "".join(dump_jsonl(trace)) == recorded.read_text()
    assert trace.header.target == "MOCKUSB+AMD" and trace.header.clock == "virtual"
    assert trace.header.device["vendor_id"] == 0xADD1 and trace.header.options["revision"] == "pipelined"
    kinds = {type(r) for r in trace.records}
    assert kinds == {Transfer, Submit, Complete, HostCall}
    assert [r.seq for r in trace.records] == sorted(r.seq for r in trace.records)
    times = [r.t_ns for r in trace.records]
    assert times == sorted(times) and times[-1] > 0, "virtual timestamps, in order"


def test_records_keep_the_direction_bits_and_the_payload_as_sent(recorded: Path) -> None:
    records = load_trace(recorded).records
    first = records[0]
    # an enumerated bridge is in configuration 1 already, so discovery asks and selects nothing (as on a board)
    assert isinstance(first, HostCall) and (first.op, first.ret) == (Op.GET_CONFIGURATION, 1)
    assert isinstance(records[1], HostCall) and (records[1].op, records[1].value) == (Op.CLAIM, 0)
    reads = [r for r in records if isinstance(r, Transfer) and r.bmRequestType == 0xC0]
    assert reads and all(r.ret == len(r.data) == r.length for r in reads)
    outs = [r for r in records if isinstance(r, Submit) and r.ep == 0x02]
    assert max(len(r.data) for r in outs) == 0x40000, "a full 256 KB window went out as one bulk OUT"
    completes = {r.tag: r for r in records if isinstance(r, Complete)}
    assert all(completes[s.tag].actual == s.length for s in outs)


def _lines(recorded: Path) -> list[str]:
    return recorded.read_text().splitlines(keepends=True)


def _edit(lines: list[str], number: int, **changes: object) -> list[str]:
    obj = json.loads(lines[number - 1])
    obj.update(changes)
    return [*lines[: number - 1], json.dumps(obj) + "\n", *lines[number:]]


BAD = {
    "empty": (lambda lines: [], "line 1: the file is empty"),
    "not-a-trace": (
        lambda lines: ['{"hello": 1}\n', *lines[1:]],
        "line 1: field 'format': None, expected 'tinyhil-trace'",
    ),
    "wrong-version": (lambda lines: _edit(lines, 1, version=2), "line 1: version=2, expected 1"),
    "corrupt-json": (lambda lines: [*lines[:4], "{not json\n", *lines[5:]], "line 5: not a JSON object"),
    "cut-mid-line": (lambda lines: [*lines[:6], lines[6][:20]], "line 7: not a JSON object"),
    "cut-at-a-line": (lambda lines: lines[:9], "line 10: the trace ends without its 'end' line (truncated?)"),
    "reordered": (lambda lines: [lines[0], lines[2], lines[1], *lines[3:]], "line 3: field 'seq'=0, expected > 1"),
    "bad-hex": (lambda lines: _edit(lines, 5, data="zz"), "line 5: field 'data': 'zz', expected a string of hex"),
    "unknown-op": (lambda lines: _edit(lines, 4, op="poke"), "line 4: field 'op': 'poke', expected one of"),
    "missing-field": (
        lambda lines: _edit(lines, 4, seq=None),
        "line 4: field 'seq': missing, expected an integer >= 0",
    ),
    "bad-setup": (lambda lines: _edit(lines, 5, wValue=0x10000), "line 5, field 'wValue': wValue=65536"),
    "wrong-count": (lambda lines: [*lines[:-1], '{"op": "end", "count": 3}\n'], "field 'count'=3, expected"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_trace_names_its_line_and_field(case: str, recorded: Path, tmp_path: Path) -> None:
    change, message = BAD[case]
    path = tmp_path / "bad.hiltrace.jsonl"
    path.write_text("".join(change(_lines(recorded))))
    with pytest.raises(TraceFormatError) as caught:
        load_trace(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_a_completion_of_a_tag_never_submitted_is_refused(recorded: Path) -> None:
    lines = _lines(recorded)
    number = next(i for i, line in enumerate(lines, 1) if '"op":"complete"' in line)
    with pytest.raises(TraceFormatError, match=rf"line {number}: field 'tag'=999, expected the tag of a submit"):
        parse_jsonl(_edit(lines, number, tag=999))
