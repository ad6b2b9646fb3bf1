"""``tinyhil trace ...``: convert traces between their formats and summarise them (docs/traces.md).

tinyhil trace convert IN OUT    convert a trace; formats from the extensions (.hiltrace.jsonl, .pcapng)
tinyhil trace show FILE         a readable summary: requests by name, transfer sizes, errors, counts

A malformed trace, an unknown extension or an unreadable file is a usage error (exit status 2) in one line that
names the file and the line or byte offset.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from tinyhil.errors import InvalidArgument
from tinyhil.registry import TargetRegistry
from tinyhil.trace.convert import convert_trace, load_trace, trace_format
from tinyhil.trace.summary import summarize

__all__ = ["add_trace_commands"]


def _io(call: Callable[[], Any]) -> Any:
    """Run ``call``; a file the OS refuses becomes an InvalidArgument naming it (one line, no traceback)."""
    try:
        return call()
    except OSError as exc:
        raise InvalidArgument(f"{exc.filename or ''}: {exc.strerror or exc}") from None


def _convert(args: argparse.Namespace, registry: TargetRegistry) -> int:
    trace_format(args.source)
    trace_format(args.destination)  # both names are checked before anything is read
    trace = _io(lambda: convert_trace(args.source, args.destination))
    print(f"tinyhil trace: {args.source} -> {args.destination} ({len(trace.records)} records)")
    return 0


def _show(args: argparse.Namespace, registry: TargetRegistry) -> int:
    trace = _io(lambda: load_trace(args.file))
    print("\n".join(summarize(trace, name=args.file)))
    return 0


def add_trace_commands(commands: Any) -> None:
    """Add ``trace`` and its subcommands to the ``tinyhil`` parser's subcommands."""
    trace = commands.add_parser("trace", help="USB traces: convert between JSONL and usbmon pcapng, summarise")
    sub = trace.add_subparsers(dest="trace_command", required=True, metavar="TRACE_COMMAND")
    convert = sub.add_parser("convert", help="convert a trace (formats from the extensions .hiltrace.jsonl, .pcapng)")
    convert.add_argument("source", metavar="IN", help="the trace to read")
    convert.add_argument("destination", metavar="OUT", help="the file to write")
    convert.set_defaults(handler=_convert)
    show = sub.add_parser("show", help="summarise a trace: requests by name, transfer sizes, errors")
    show.add_argument("file", metavar="FILE", help="a .hiltrace.jsonl or .pcapng trace")
    show.set_defaults(handler=_show)
