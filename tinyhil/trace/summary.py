"""A readable summary of a trace: what was recorded, requests by the bridge's names, transfer sizes, errors."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Final

from tinyhil.spec.asm2464 import Request
from tinyhil.trace.records import ENDPOINT_IN, Complete, HostCall, Submit, Trace, Transfer, TransferStatus
from tinyhil.trace.source import TraceSource

__all__ = ["summarize"]

# Standard requests (USB 2.0 table 9-4) a trace of the bridge holds besides the firmware's vendor requests.
STANDARD_REQUESTS: Final = {0x00: "GET_STATUS", 0x01: "CLEAR_FEATURE", 0x03: "SET_FEATURE", 0x05: "SET_ADDRESS",
                            0x06: "GET_DESCRIPTOR", 0x08: "GET_CONFIGURATION", 0x09: "SET_CONFIGURATION",
                            0x0A: "GET_INTERFACE", 0x0B: "SET_INTERFACE"}  # fmt: skip
_TYPE_MASK: Final = 0x60
_TYPE_VENDOR: Final = 0x40
_SHOWN_ERRORS: Final = 10


def _request_name(request_type: int, request: int) -> str:
    if request_type & _TYPE_MASK == _TYPE_VENDOR and request in Request._value2member_map_:
        name = Request(request).name
    else:
        name = STANDARD_REQUESTS.get(request, f"request {request:#04x}")
    return f"{name} ({request:#04x}) {'IN' if request_type & ENDPOINT_IN else 'OUT'}"


class _Sizes:
    def __init__(self) -> None:
        self.count = 0
        self.total = 0
        self.smallest: int | None = None
        self.largest = 0

    def add(self, nbytes: int) -> None:
        self.count += 1
        self.total += nbytes
        self.smallest = nbytes if self.smallest is None else min(self.smallest, nbytes)
        self.largest = max(self.largest, nbytes)

    def __str__(self) -> str:
        return (f"{self.count:>6} x  {self.total:>12} bytes  (each {self.smallest or 0}..{self.largest})")  # fmt: skip


def summarize(trace: Trace | TraceSource, *, name: str = "") -> list[str]:
    """The summary's lines: the header, counts per operation, control requests by name, bulk transfers per endpoint
    with their sizes, asynchronous statuses and every error (the first ten with their ``seq``).

    A :class:`~tinyhil.trace.source.TraceSource` is read once, a record at a time: the summary holds counts, not
    records. The lines hold text from the trace as it is: print them through :func:`tinyhil.printable.printable`.
    """
    header = trace.header
    device = header.device
    identity = (f"{device['vendor_id']:04X}:{device['product_id']:04X} serial {device.get('serial')!r}"
                if "vendor_id" in device and "product_id" in device else "not recorded (a capture)")  # fmt: skip
    ops: Counter[str] = Counter()
    requests: dict[str, _Sizes] = defaultdict(_Sizes)
    bulks: dict[str, _Sizes] = defaultdict(_Sizes)
    statuses: Counter[str] = Counter()
    errors: list[str] = []
    error_count, count, first_ns, end_ns = 0, 0, None, 0
    for record in trace.records if isinstance(trace, Trace) else trace.records():
        count += 1
        first_ns = record.t_ns if first_ns is None else first_ns
        end_ns = record.t_ns + record.dur_ns
        ops[record.op.value] += 1
        if isinstance(record, (Transfer, Submit)):
            if record.bmRequestType is not None and record.bRequest is not None:
                requests[_request_name(record.bmRequestType, record.bRequest)].add(record.length)
            else:
                bulks[f"ep {record.ep:#04x} {'IN' if record.ep & ENDPOINT_IN else 'OUT'}"].add(record.length)
            err = record.err
        elif isinstance(record, Complete):
            statuses[record.status.value] += 1
            err = None if record.status is TransferStatus.COMPLETED else record.status.value
        else:
            assert isinstance(record, HostCall)
            err = record.err
        if err is not None:
            error_count += 1
            if len(errors) < _SHOWN_ERRORS:
                errors.append(f"seq {record.seq} {record.op.value}: {err}")
    span = end_ns - first_ns if first_ns is not None else 0
    lines = [f"trace {name}".rstrip(), f"  target: {header.target or '(none)'}   device: {identity}",
             f"  {count} records over {span} ns ({header.clock} clock)"]  # fmt: skip
    lines.append("  operations: " + ", ".join(f"{op} {n}" for op, n in sorted(ops.items())))
    if requests:
        lines.append("  control requests:")
        lines += [f"    {label:<34} {sizes}" for label, sizes in sorted(requests.items())]
    if bulks:
        lines.append("  bulk transfers:")
        lines += [f"    {label:<34} {sizes}" for label, sizes in sorted(bulks.items())]
    if statuses:
        lines.append("  async completions: " + ", ".join(f"{s} {n}" for s, n in sorted(statuses.items())))
    lines.append(f"  errors: {error_count}" + ("" if errors else " (none)"))
    lines += [f"    {line}" for line in errors]
    if error_count > _SHOWN_ERRORS:
        lines.append(f"    ... and {error_count - _SHOWN_ERRORS} more")
    return lines
