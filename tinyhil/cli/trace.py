"""``tinyhil trace ...``: convert traces between their formats, summarise them, and find drift (docs/traces.md).

tinyhil trace convert IN OUT    convert a trace; formats from the extensions (.hiltrace.jsonl, .pcapng)
tinyhil trace show FILE         a readable summary: requests by name, transfer sizes, errors, counts
tinyhil trace drift TRACE       feed the trace's requests to the emulator its header describes; list every reply that
                                differs (exit 0 and "no drift" when none does, 1 otherwise)

A malformed trace, an unknown extension or an unreadable file is a usage error (exit status 2) in one line that
names the file and the line or byte offset. Traces are streamed (``open_trace``): show, convert and drift hold one
record at a time. Everything printed that came from a trace has its control characters escaped (``printable``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from tinyhil.cli.usage import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_command_group, add_subcommand, description
from tinyhil.errors import InvalidArgument
from tinyhil.printable import printable
from tinyhil.registry import TargetRegistry
from tinyhil.trace.convert import convert_trace, open_trace, trace_format
from tinyhil.trace.summary import summarize

__all__ = ["add_trace_command"]


def _io(call: Callable[[], Any]) -> Any:
    """Run ``call``; a file the OS refuses becomes an InvalidArgument naming it (one line, no traceback)."""
    try:
        return call()
    except OSError as exc:
        raise InvalidArgument(f"{exc.filename or ''}: {exc.strerror or exc}") from None


def _print(lines: list[str]) -> None:
    """Print lines that hold text from a trace, every control or reordering character escaped."""
    print("\n".join(printable(line, newlines=False) for line in lines))


def _convert(args: argparse.Namespace, registry: TargetRegistry) -> int:
    trace_format(args.source)
    trace_format(args.destination)  # both names are checked before anything is read
    count = _io(lambda: convert_trace(args.source, args.destination))
    _print([f"tinyhil trace: {args.source} -> {args.destination} ({count} records)"])
    return EXIT_OK


def _show(args: argparse.Namespace, registry: TargetRegistry) -> int:
    source = _io(lambda: open_trace(args.file))
    _print(_io(lambda: summarize(source, name=args.file)))
    return EXIT_OK


def _drift(args: argparse.Namespace, registry: TargetRegistry) -> int:
    from tinyhil.mocks.trace_drift import drift_report
    from tinyhil.trace.drift import drift_lines

    source = _io(lambda: open_trace(args.file))
    found, total = _io(lambda: drift_report(source, path=args.file))
    _print(drift_lines(found, name=args.file, total=total))
    return EXIT_FAILED if found else EXIT_OK


def add_trace_command(commands: Any) -> None:
    """Add ``trace`` and its subcommands to the ``tinyhil`` parser's subcommands."""
    sub = add_command_group(
        commands,
        "trace",
        "USB traces: convert between JSONL and usbmon pcapng, summarise, find drift against the emulator",
        EXIT_OK,
        EXIT_FAILED,
        EXIT_USAGE,
        details=description(__doc__),
        dest="trace_command",
        metavar="TRACE_COMMAND",
    )
    convert = add_subcommand(
        sub,
        "convert",
        "convert a trace (formats from the extensions .hiltrace.jsonl, .pcapng)",
        EXIT_OK,
        EXIT_FAILED,
        EXIT_USAGE,
    )
    convert.add_argument("source", metavar="IN", help="the trace to read")
    convert.add_argument("destination", metavar="OUT", help="the file to write")
    convert.set_defaults(handler=_convert)
    show = add_subcommand(
        sub, "show", "summarise a trace: requests by name, transfer sizes, errors", EXIT_OK, EXIT_FAILED, EXIT_USAGE
    )
    show.add_argument("file", metavar="FILE", help="a .hiltrace.jsonl or .pcapng trace")
    show.set_defaults(handler=_show)
    drift = add_subcommand(
        sub,
        "drift",
        "list every reply the emulator gives that differs from a trace's",
        EXIT_OK,
        EXIT_FAILED,
        EXIT_USAGE,
    )
    drift.add_argument("file", metavar="TRACE", help="a .hiltrace.jsonl or .pcapng trace with a MOCKUSB+AMD header")
    drift.set_defaults(handler=_drift)
