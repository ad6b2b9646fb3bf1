"""The ``*.hiltrace.jsonl`` format: a header line, one JSON object per record, and an ``end`` line with the count.

Line 1 is the :class:`~tinyhil.trace.records.TraceHeader` (``{"format": "tinyhil-trace", "version": 1, ...}``); each
following line is one record with the field names of :mod:`tinyhil.trace.records` (``data`` in hex, absent fields
omitted); the last line is ``{"op": "end", "count": N}``, so a file cut at a line boundary is caught as truncated.

Reading streams (:class:`JsonlSource`): the file is read in binary, one line at a time, each line at most
``LIMITS["trace-line"]`` bytes and parsed by :func:`tinyhil.loading.parse_json` (UTF-8, depth and integer caps), each
field typed once by :class:`tinyhil.loading.Fields`; memory is bounded by the longest line, not the file.

Raises (:func:`load_jsonl`, :func:`parse_jsonl`, :meth:`JsonlSource.records`):
:class:`~tinyhil.trace.errors.TraceFormatError` naming the line number and the field: not UTF-8 or not JSON, too
deep, a line over the cap, a wrong format name or version, a missing or mistyped field or one out of its bounds
(:mod:`tinyhil.trace.limits`), records out of ``seq`` order, a completion of a tag never submitted, a missing ``end``
line or a count that disagrees.
"""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from tinyhil.loading import LIMITS, Fields, FileFormatError, parse_json
from tinyhil.trace.errors import TraceFormatError
from tinyhil.trace.limits import TRANSFER_MAX_BYTES, U32, hex_field, trace_fields
from tinyhil.trace.records import (
    FORMAT_NAME,
    USBMON_SETUP_BYTES,
    Complete,
    HostCall,
    Op,
    Record,
    Submit,
    Trace,
    TraceHeader,
    Transfer,
    TransferStatus,
    UsbmonFields,
)
from tinyhil.trace.source import TraceSource

__all__ = ["JSONL_SUFFIX", "JsonlSource", "dump_jsonl", "header_to_json", "jsonl_lines", "load_jsonl", "parse_jsonl",
           "read_jsonl", "record_to_json", "save_jsonl", "write_jsonl"]  # fmt: skip

JSONL_SUFFIX: Final = ".hiltrace.jsonl"
END_OP: Final = "end"
_SETUP: Final = ("bmRequestType", "bRequest", "wValue", "wIndex")
_OPTIONAL_INTS: Final = (*_SETUP, "ret", "transferred", "value")
_NAME_MAX: Final = 4096  # an err class name, a target string


def _usbmon_to_json(fields: UsbmonFields) -> dict[str, Any]:
    out: dict[str, Any] = {name: value.hex() if isinstance(value, bytes) else value for name, value in fields.raw}
    if fields.orig_len is not None:
        out["orig_len"] = fields.orig_len
    if fields.options:
        out["options"] = fields.options.hex()
    return out


def record_to_json(record: Record) -> dict[str, Any]:
    """One record as the JSON object of its line (``data`` hex-encoded here, never when recording)."""
    out: dict[str, Any] = {"seq": record.seq, "t_ns": record.t_ns, "dur_ns": record.dur_ns, "op": record.op.value}
    if isinstance(record, HostCall):
        for name in ("value", "ret", "err"):
            if getattr(record, name) is not None:
                out[name] = getattr(record, name)
        return out
    if isinstance(record, Complete):
        out.update(tag=record.tag, status=record.status.value, actual=record.actual, data=record.data.hex())
    else:
        if isinstance(record, Submit):
            out["tag"] = record.tag
        for name in _SETUP:
            if getattr(record, name) is not None:
                out[name] = getattr(record, name)
        out.update(ep=record.ep, length=record.length, data=record.data.hex(), timeout=record.timeout)
        for name in ("ret", "err", "transferred"):
            if getattr(record, name, None) is not None:
                out[name] = getattr(record, name)
    if record.usbmon is not None:
        out["usbmon"] = _usbmon_to_json(record.usbmon)
    return out


def header_to_json(header: TraceHeader) -> dict[str, Any]:
    out: dict[str, Any] = {"format": FORMAT_NAME, "version": header.version, "target": header.target,
                           "options": header.options, "device": header.device, "descriptors": header.descriptors,
                           "versions": header.versions, "clock": header.clock, "host_ops": header.host_ops}  # fmt: skip
    if header.pcapng is not None:
        out["pcapng"] = header.pcapng
    return out


def jsonl_lines(header: TraceHeader, records: Iterable[Record]) -> Iterator[str]:
    """The lines of a trace (each ending in a newline), one record at a time: ``records`` may be streamed."""
    yield json.dumps(header_to_json(header), separators=(",", ":")) + "\n"
    count = 0
    for record in records:
        yield json.dumps(record_to_json(record), separators=(",", ":")) + "\n"
        count += 1
    yield json.dumps({"op": END_OP, "count": count}) + "\n"


def dump_jsonl(trace: Trace) -> Iterator[str]:
    """The lines of ``trace`` (each ending in a newline)."""
    return jsonl_lines(trace.header, trace.records)


def write_jsonl(header: TraceHeader, records: Iterable[Record], out: IO[bytes]) -> None:
    """Write a trace of ``header`` and ``records`` (streamed) to the binary stream ``out``."""
    for line in jsonl_lines(header, records):
        out.write(line.encode("utf-8"))


def save_jsonl(trace: Trace, path: str | Path) -> None:
    """Write ``trace`` to ``path`` (``*.hiltrace.jsonl``)."""
    with open(path, "wb") as out:
        write_jsonl(trace.header, trace.records, out)


_DATA_MAX: Final = TRANSFER_MAX_BYTES  # a record's data field, before the record bounds it by its own length


def _bounded(fields: Fields, name: str, low: int, high: int) -> int:
    value = fields.integer(name, minimum=low, maximum=high)
    assert value is not None  # required: a missing one raised
    return value


def _setup(fields: Fields) -> bytes:
    setup = hex_field(fields, "setup", USBMON_SETUP_BYTES)
    if len(setup) != USBMON_SETUP_BYTES:
        raise fields.error("setup", f"{len(setup)} bytes, expected {USBMON_SETUP_BYTES}")
    return setup


def _usbmon_from_json(fields: Fields) -> UsbmonFields | None:
    sub = fields.table_of("usbmon", required=False)
    if sub is None:
        return None
    from tinyhil.trace.pcapng import USBMON_FIELDS, USBMON_RANGES  # the fields live with the struct they describe

    raw: tuple[tuple[str, int | bytes], ...] = tuple(
        (name, _setup(sub) if name == "setup" else _bounded(sub, name, *USBMON_RANGES[name])) for name in USBMON_FIELDS
    )
    orig_len = sub.integer("orig_len", required=False, minimum=0, maximum=U32)
    return UsbmonFields(raw, orig_len, hex_field(sub, "options", LIMITS["trace-block"].max_bytes))


def _uint(fields: Fields, name: str) -> int:
    """A required integer >= 0 (its upper bound is the record's to check: :mod:`tinyhil.trace.limits`)."""
    value = fields.integer(name, minimum=0)
    assert value is not None  # required: a missing one raised
    return value


def _record(fields: Fields) -> Record:
    op = fields.choice("op", Op)
    assert op is not None
    seq, t_ns = _uint(fields, "seq"), _uint(fields, "t_ns")
    if op is Op.COMPLETE:
        status = fields.choice("status", TransferStatus)
        assert status is not None
        return Complete(seq=seq, t_ns=t_ns, tag=_uint(fields, "tag"), status=status, actual=_uint(fields, "actual"),
                        data=hex_field(fields, "data", _DATA_MAX), usbmon=_usbmon_from_json(fields))  # fmt: skip
    ints = {name: fields.integer(name, required=False, minimum=0) for name in _OPTIONAL_INTS}
    err = fields.string("err", required=False, max_len=_NAME_MAX)
    if op in (Op.SUBMIT, Op.CONTROL, Op.BULK):
        ep, length, timeout = _uint(fields, "ep"), _uint(fields, "length"), _uint(fields, "timeout")
        data = hex_field(fields, "data", _DATA_MAX)
    if op is Op.SUBMIT:
        return Submit(seq=seq, t_ns=t_ns, tag=_uint(fields, "tag"), ep=ep, length=length, data=data, timeout=timeout,
                      bmRequestType=ints["bmRequestType"], bRequest=ints["bRequest"], wValue=ints["wValue"],
                      wIndex=ints["wIndex"], err=err, usbmon=_usbmon_from_json(fields))  # fmt: skip
    dur_ns = _uint(fields, "dur_ns")
    if op in (Op.CONTROL, Op.BULK):
        return Transfer(seq=seq, t_ns=t_ns, dur_ns=dur_ns, op=op, ep=ep, length=length, data=data, timeout=timeout,
                        bmRequestType=ints["bmRequestType"], bRequest=ints["bRequest"], wValue=ints["wValue"],
                        wIndex=ints["wIndex"], ret=ints["ret"], err=err, transferred=ints["transferred"],
                        usbmon=_usbmon_from_json(fields))  # fmt: skip
    return HostCall(seq, t_ns, dur_ns, op, value=ints["value"], ret=ints["ret"], err=err)


def _lines(stream: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """``(number, line)`` of each line, each read with at most ``LIMITS["trace-line"]`` bytes in memory."""
    cap = LIMITS["trace-line"]
    for number in itertools.count(1):
        line = stream.readline(cap.max_bytes + 1)
        if not line:
            return
        if len(line) > cap.max_bytes:
            raise TraceFormatError(f"line {number}", f"longer than {cap.max_bytes} bytes, the limit for a {cap.what}")
        yield number, line


def _object(number: int, line: bytes) -> dict[str, Any]:
    try:
        obj = parse_json(line, "", line=number)
    except FileFormatError as exc:
        cut = "" if line.endswith(b"\n") else " (the file ends mid-line: truncated?)"
        inner = "" if exc.field == "file" else f"field {exc.field!r}: "
        raise TraceFormatError(f"line {number}", f"not a JSON object: {inner}{exc.why}{cut}") from None
    if not isinstance(obj, dict):
        raise TraceFormatError(f"line {number}", f"{type(obj).__name__}, expected a JSON object")
    return obj


def _header(obj: dict[str, Any]) -> TraceHeader:
    fields = Fields(obj, "", line=1)
    with trace_fields("line 1"):
        if obj.get("format") != FORMAT_NAME:
            raise fields.error("format", f"{obj.get('format')!r:.40}, expected {FORMAT_NAME!r} (is this a tinyhil "
                                         "trace?)")  # fmt: skip
        try:
            return TraceHeader(target=fields.string("target", required=False, max_len=_NAME_MAX, empty=True) or "",
                               options=fields.of_type("options", dict, required=False) or {},
                               device=fields.of_type("device", dict, required=False) or {},
                               descriptors=fields.of_type("descriptors", dict, required=False) or {},
                               versions=fields.of_type("versions", dict, required=False) or {},
                               clock=fields.string("clock", required=False, max_len=_NAME_MAX) or "virtual",
                               host_ops=fields.boolean("host_ops", required=False, default=True),
                               pcapng=fields.of_type("pcapng", dict, required=False),
                               version=obj.get("version"))  # type: ignore[arg-type]  # fmt: skip
        except TraceFormatError as exc:
            raise TraceFormatError("line 1", exc.problem, field=exc.field) from None


def _records(lines: Iterator[tuple[int, bytes]]) -> Iterator[Record]:
    """The records after the header line, checked in order, up to the ``end`` line."""
    count, last_seq = 0, -1
    in_flight: set[int] = set()
    for number, line in lines:
        where = f"line {number}"
        obj = _object(number, line)
        if obj.get("op") == END_OP:
            if obj.get("count") != count:
                raise TraceFormatError(where, f"field 'count'={obj.get('count')!r:.30}, expected {count} (records "
                                              "read)", field="count")  # fmt: skip
            if next(lines, None) is not None:
                raise TraceFormatError(f"line {number + 1}", "a line after the 'end' line, expected none")
            return
        try:
            with trace_fields(where):
                record = _record(Fields(obj, "", line=number))
        except TraceFormatError as exc:
            raise exc.within(where) from None
        if record.seq <= last_seq:
            raise TraceFormatError(
                where, f"field 'seq'={record.seq}, expected > {last_seq} (records out of order)", field="seq"
            )
        if isinstance(record, Submit) and record.err is None:
            in_flight.add(record.tag)
        elif isinstance(record, Complete) and record.usbmon is None:  # a capture may begin with URBs in flight
            if record.tag not in in_flight:
                raise TraceFormatError(
                    where, f"field 'tag'={record.tag}, expected the tag of a submit in flight", field="tag"
                )
            in_flight.discard(record.tag)
        last_seq, count = record.seq, count + 1
        yield record
    raise TraceFormatError(f"line {count + 2}", "the trace ends without its 'end' line (truncated?)")


class JsonlSource(TraceSource):
    """A ``*.hiltrace.jsonl`` file, streamed (:class:`~tinyhil.trace.source.TraceSource`): memory is bounded by the
    longest line."""

    def _read_header(self, stream: IO[bytes]) -> TraceHeader:
        first = next(_lines(stream), None)
        if first is None:
            raise TraceFormatError("line 1", "the file is empty, expected a header line")
        return _header(_object(*first))

    def _read_records(self, stream: IO[bytes]) -> Iterator[Record]:
        lines = _lines(stream)
        next(lines, None)  # the header, read at open
        return _records(lines)


def read_jsonl(path: str | Path) -> JsonlSource:
    """Open a ``*.hiltrace.jsonl`` file for streaming; errors name the file and the line."""
    return JsonlSource(lambda: open(path, "rb"), str(path))


def parse_jsonl(lines: Iterable[str]) -> Trace:
    """A trace from its lines (see the module docstring for what is checked)."""
    blob = "".join(lines).encode("utf-8", "surrogatepass")
    return JsonlSource(lambda: io.BytesIO(blob)).trace()


def load_jsonl(path: str | Path) -> Trace:
    """Read and check a ``*.hiltrace.jsonl`` file whole; errors name the file and the line."""
    return read_jsonl(path).trace()
