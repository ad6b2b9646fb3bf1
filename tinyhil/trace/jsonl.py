"""The ``*.hiltrace.jsonl`` format: a header line, one JSON object per record, and an ``end`` line with the count.

Line 1 is the :class:`~tinyhil.trace.records.TraceHeader` (``{"format": "tinyhil-trace", "version": 1, ...}``); each
following line is one record with the field names of :mod:`tinyhil.trace.records` (``data`` in hex, absent fields
omitted); the last line is ``{"op": "end", "count": N}``, so a file cut at a line boundary is caught as truncated.

Raises (:func:`load_jsonl`, :func:`parse_jsonl`): :class:`~tinyhil.trace.errors.TraceFormatError` naming the line
number and the field: not JSON, a wrong format name or version, a missing or mistyped field, records out of ``seq``
order, a completion of a tag never submitted, a missing ``end`` line or a count that disagrees.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from tinyhil.trace.errors import TraceFormatError
from tinyhil.trace.records import (
    FORMAT_NAME,
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

__all__ = ["JSONL_SUFFIX", "dump_jsonl", "header_to_json", "load_jsonl", "parse_jsonl", "record_to_json", "save_jsonl"]

JSONL_SUFFIX: Final = ".hiltrace.jsonl"
END_OP: Final = "end"
_SETUP: Final = ("bmRequestType", "bRequest", "wValue", "wIndex")
_OPTIONAL_INTS: Final = (*_SETUP, "ret", "transferred", "value")


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


def dump_jsonl(trace: Trace) -> Iterator[str]:
    """The lines of ``trace`` (each ending in a newline)."""
    yield json.dumps(header_to_json(trace.header), separators=(",", ":")) + "\n"
    for record in trace.records:
        yield json.dumps(record_to_json(record), separators=(",", ":")) + "\n"
    yield json.dumps({"op": END_OP, "count": len(trace.records)}) + "\n"


def save_jsonl(trace: Trace, path: str | Path) -> None:
    """Write ``trace`` to ``path`` (``*.hiltrace.jsonl``)."""
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(dump_jsonl(trace))


class _Fields:
    """Typed access to one line's JSON object; every failure names the line and the field."""

    def __init__(self, obj: dict[str, Any], where: str) -> None:
        self.obj, self.where = obj, where

    def fail(self, name: str, expected: str) -> TraceFormatError:
        shown = repr(self.obj[name]) if name in self.obj else "missing"
        return TraceFormatError(self.where, f"field {name!r}={shown}, expected {expected}")

    def uint(self, name: str) -> int:
        value = self.obj.get(name)
        if type(value) is not int or value < 0:
            raise self.fail(name, "an int >= 0")
        return value

    def sint(self, name: str) -> int:
        value = self.obj.get(name)
        if type(value) is not int:
            raise self.fail(name, "an int")
        return value

    def opt_int(self, name: str) -> int | None:
        return None if self.obj.get(name) is None else self.uint(name)

    def opt_str(self, name: str) -> str | None:
        value = self.obj.get(name)
        if value is not None and not isinstance(value, str):
            raise self.fail(name, "a string")
        return value

    def hex(self, name: str) -> bytes:
        value = self.obj.get(name, "")
        try:
            return bytes.fromhex(value)
        except (TypeError, ValueError):
            raise self.fail(name, "a string of hex digits (two per byte)") from None

    def dict(self, name: str) -> dict[str, Any]:
        value = self.obj.get(name, {})
        if not isinstance(value, dict):
            raise self.fail(name, "a JSON object")
        return value


def _usbmon_from_json(fields: _Fields) -> UsbmonFields | None:
    if "usbmon" not in fields.obj:
        return None
    from tinyhil.trace.pcapng import USBMON_FIELDS  # the field list lives with the struct it describes

    sub = _Fields(fields.dict("usbmon"), f"{fields.where}, usbmon")
    raw = tuple((name, sub.hex(name) if name == "setup" else sub.sint(name)) for name in USBMON_FIELDS)
    return UsbmonFields(raw, sub.opt_int("orig_len"), sub.hex("options"))


def _record(fields: _Fields) -> Record:
    op_text = fields.obj.get("op")
    try:
        op = Op(str(op_text))
    except ValueError:
        raise fields.fail("op", f"one of {[o.value for o in Op]}") from None
    seq, t_ns = fields.uint("seq"), fields.uint("t_ns")
    if op is Op.COMPLETE:
        status = str(fields.obj.get("status"))
        if status not in TransferStatus.__members__:
            raise fields.fail("status", f"one of {list(TransferStatus.__members__)}")
        return Complete(seq=seq, t_ns=t_ns, tag=fields.uint("tag"), status=TransferStatus(status),
                        actual=fields.uint("actual"), data=fields.hex("data"),
                        usbmon=_usbmon_from_json(fields))  # fmt: skip
    ints = {name: fields.opt_int(name) for name in _OPTIONAL_INTS}
    err = fields.opt_str("err")
    if op is Op.SUBMIT:
        return Submit(seq=seq, t_ns=t_ns, tag=fields.uint("tag"), ep=fields.uint("ep"), length=fields.uint("length"),
                      data=fields.hex("data"), timeout=fields.uint("timeout"), bmRequestType=ints["bmRequestType"],
                      bRequest=ints["bRequest"], wValue=ints["wValue"], wIndex=ints["wIndex"], err=err,
                      usbmon=_usbmon_from_json(fields))  # fmt: skip
    if op in (Op.CONTROL, Op.BULK):
        return Transfer(seq=seq, t_ns=t_ns, dur_ns=fields.uint("dur_ns"), op=op, ep=fields.uint("ep"),
                        length=fields.uint("length"), data=fields.hex("data"), timeout=fields.uint("timeout"),
                        bmRequestType=ints["bmRequestType"], bRequest=ints["bRequest"], wValue=ints["wValue"],
                        wIndex=ints["wIndex"], ret=ints["ret"], err=err, transferred=ints["transferred"],
                        usbmon=_usbmon_from_json(fields))  # fmt: skip
    return HostCall(seq, t_ns, fields.uint("dur_ns"), op, value=ints["value"], ret=ints["ret"], err=err)


def _objects(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(lines, 1):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            cut = "" if line.endswith("\n") else " (the file ends mid-line: truncated?)"
            raise TraceFormatError(
                f"line {number}", f"not a JSON object: {exc.msg} at column {exc.colno}{cut}"
            ) from None
        if not isinstance(obj, dict):
            raise TraceFormatError(f"line {number}", f"{type(obj).__name__}, expected a JSON object")
        yield number, obj


def _header(obj: dict[str, Any]) -> TraceHeader:
    fields = _Fields(obj, "line 1")
    if obj.get("format") != FORMAT_NAME:
        raise fields.fail("format", f"{FORMAT_NAME!r} (is this a tinyhil trace?)")
    pcapng = obj.get("pcapng")
    if pcapng is not None and not isinstance(pcapng, dict):
        raise fields.fail("pcapng", "a JSON object")
    host_ops = obj.get("host_ops", True)
    if not isinstance(host_ops, bool):
        raise fields.fail("host_ops", "true or false")
    try:
        return TraceHeader(target=fields.opt_str("target") or "", options=fields.dict("options"),
                           device=fields.dict("device"), descriptors=fields.dict("descriptors"),
                           versions=fields.dict("versions"), clock=fields.opt_str("clock") or "virtual",
                           host_ops=host_ops, pcapng=pcapng, version=obj.get("version"))  # type: ignore[arg-type]  # fmt: skip
    except TraceFormatError as exc:
        raise TraceFormatError("line 1", exc.problem) from None


def parse_jsonl(lines: Iterable[str]) -> Trace:
    """A trace from its lines (see the module docstring for what is checked)."""
    objects = _objects(lines)
    first = next(objects, None)
    if first is None:
        raise TraceFormatError("line 1", "the file is empty, expected a header line")
    header = _header(first[1])
    records: list[Record] = []
    in_flight: set[int] = set()
    for number, obj in objects:
        where = f"line {number}"
        if obj.get("op") == END_OP:
            count = obj.get("count")
            if count != len(records):
                raise TraceFormatError(where, f"field 'count'={count!r}, expected {len(records)} (records read)")
            if next(objects, None) is not None:
                raise TraceFormatError(f"line {number + 1}", "a line after the 'end' line, expected none")
            return Trace(header, tuple(records))
        try:
            record = _record(_Fields(obj, where))
        except TraceFormatError as exc:
            if exc.where.startswith("line"):
                raise
            raise TraceFormatError(f"{where}, {exc.where}", exc.problem) from None
        if records and record.seq <= records[-1].seq:
            raise TraceFormatError(where, f"field 'seq'={record.seq}, expected > {records[-1].seq} (records out of "
                                          "order)")  # fmt: skip
        if isinstance(record, Submit) and record.err is None:
            in_flight.add(record.tag)
        elif isinstance(record, Complete) and record.usbmon is None:  # a capture may begin with URBs in flight
            if record.tag not in in_flight:
                raise TraceFormatError(where, f"field 'tag'={record.tag}, expected the tag of a submit in flight")
            in_flight.discard(record.tag)
        records.append(record)
    raise TraceFormatError(f"line {len(records) + 2}", "the trace ends without its 'end' line (truncated?)")


def load_jsonl(path: str | Path) -> Trace:
    """Read and check a ``*.hiltrace.jsonl`` file; errors name the file and the line."""
    with open(path, encoding="utf-8") as lines:
        try:
            return parse_jsonl(lines)
        except TraceFormatError as exc:
            raise TraceFormatError(exc.where, exc.problem, path=str(path)) from None
