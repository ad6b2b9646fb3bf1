"""``tinyhil trace ...``: convert traces between their formats and summarise them (docs/traces.md).

tinyhil trace convert IN OUT    convert a trace; formats from the extensions (.hiltrace.jsonl, .pcapng)
tinyhil trace show FILE         a readable summary: requests by name, transfer sizes, errors, counts
tinyhil trace drift TRACE       feed the trace's requests to the emulator its header describes; list every reply that
                                differs (exit 0 and "no drift" when none does, 1 otherwise)
tinyhil repro BUNDLE            run a failing test's repro bundle again (on REPLAY+AMD over its trace, or on the
                                emulator from the same options); exit 0 when the failure reproduces, 1 when not

A malformed trace, an unknown extension or an unreadable file is a usage error (exit status 2) in one line that
names the file and the line or byte offset. Traces are streamed (``open_trace``): show, convert and drift hold one
record at a time. Everything printed that came from a trace has its control characters escaped (``printable``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from tinyhil.errors import InvalidArgument
from tinyhil.printable import printable
from tinyhil.registry import TargetRegistry
from tinyhil.trace.convert import convert_trace, load_trace, open_trace, trace_format
from tinyhil.trace.summary import summarize

__all__ = ["add_repro_command", "add_trace_commands"]

EXIT_DIFFERS: Final = 1  # drift found, or a failure that does not reproduce
_REPLAY_TARGET: Final = "REPLAY+AMD"
_REPLAY_ERRORS: Final = ("ReplayMismatch", "ReplayExhausted", "TraceNotConsumed")
# What the rerun must not inherit from the shell that ran the failing session.
_SESSION_ENV: Final = ("DEV", "TINYHIL_REPRO_DIR", "TINYHIL_RECORD", "TINYHIL_REPLAY", "TINYHIL_SUMMARY",
                       "TINYHIL_FARM_SHARD", "TINYHIL_STRICT")  # fmt: skip


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
    return 0


def _show(args: argparse.Namespace, registry: TargetRegistry) -> int:
    source = _io(lambda: open_trace(args.file))
    _print(_io(lambda: summarize(source, name=args.file)))
    return 0


def _drift(args: argparse.Namespace, registry: TargetRegistry) -> int:
    from tinyhil.mocks.drift import drift_report
    from tinyhil.trace.drift import drift_lines

    source = _io(lambda: open_trace(args.file))
    found, total = _io(lambda: drift_report(source, path=args.file))
    _print(drift_lines(found, name=args.file, total=total))
    return EXIT_DIFFERS if found else 0


def _retarget(nodeid: str, old: str, new: str) -> str:
    """``nodeid`` with its parametrization id ``old`` (the target) replaced by ``new``."""
    head, bracket, params = nodeid.partition("[")
    if not bracket:
        return nodeid
    parts = params.removesuffix("]").split("-")
    return f"{head}[{'-'.join(new if part == old else part for part in parts)}]"


def _say(text: str) -> None:
    """Print one line of ``tinyhil repro``'s output: it holds text from the bundle, so control characters are
    escaped (:func:`~tinyhil.printable.printable`)."""
    print(printable(text, newlines=False))


def _rerun(
    bundle: Any, directory: Path, on: str, work: Path, registry: TargetRegistry, source: Path
) -> tuple[dict[str, Any], Path]:
    """Run the bundle's test once more in a pytest child process; returns its summary entry and the trace file the
    rerun recorded (which may not exist).

    Nothing from the bundle becomes an option of that process: the target and the trace are values of ``=``
    options, the node id (checked by :func:`~tinyhil.trace.bundle.check_nodeid`) comes after ``--``, and the rootdir
    (checked to be a directory) is only its working directory.
    """
    from tinyhil.fixtures.summary import load_summary_results

    summary, record = work / "summary.json", work / "record"
    nodeid = bundle.nodeid
    if on == "replay":
        nodeid = _retarget(bundle.nodeid, bundle.target, _REPLAY_TARGET)
        extra = [f"--hil-target={_REPLAY_TARGET}", f"--hil-replay={directory / bundle.trace}"]
    else:
        extra = [f"--hil-target={bundle.target}", f"--hil-bundle-options={source}"]
        if "record" in registry.resolve(bundle.target).definition.options:
            extra.append(f"--hil-record={record}")
    name = nodeid.partition("::")[2]
    # the test module by its absolute path when the bundle knows it: a farm shard's rootdir need not hold it
    test_path = Path(bundle.test_path) if bundle.test_path else None
    argument = f"{test_path}::{name}" if test_path is not None and test_path.is_file() else nodeid
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, f"--hil-summary={summary}",
               "--", argument]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in _SESSION_ENV}
    done = subprocess.run(command, cwd=bundle.rootdir, env=env, capture_output=True, text=True, check=False)
    results = load_summary_results(summary) if summary.is_file() else []
    found = [r for r in results if r["nodeid"] == nodeid or str(r["nodeid"]).endswith(f"::{name}")]
    if not found:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise InvalidArgument(printable(f"the rerun of {nodeid} in {bundle.rootdir} ran no such test (pytest exit "
                                        f"status {done.returncode}): {' / '.join(tail) or 'no output'}",
                                        newlines=False))  # fmt: skip
    traces = sorted(record.glob("*.hiltrace.jsonl")) if record.is_dir() else []
    return found[0], (traces[0] if traces else record / "none")


def _why_not(bundle: Any, directory: Path, on: str, outcome: str, reason: str, rerun_trace: Path) -> str:
    """Where a rerun that did not fail as recorded departed from the bundle, in words."""
    from tinyhil.trace.drift import trace_divergence

    if any(name in reason for name in _REPLAY_ERRORS):
        return f"the rerun diverged from the recorded trace: {reason}"
    if outcome in ("failed", "error"):
        return f"the rerun {outcome}, where the recorded run {bundle.outcome} in {bundle.when}: {reason}"
    if on == "replay":
        return (f"the test {outcome} on rerun; the driver made every recorded request and got every recorded reply, "
                "so the difference lies outside the device")  # fmt: skip
    if bundle.trace is None or not rerun_trace.is_file():
        return f"the test {outcome} on rerun; there is no trace to compare ({bundle.target} records none)"
    where = trace_divergence(load_trace(directory / bundle.trace), load_trace(rerun_trace))
    if where is None:
        return f"the test {outcome} on rerun; its USB trace equals the recorded one (the difference is elsewhere)"
    return f"the test {outcome} on rerun; first divergence from the recorded trace: {where}"


def _repro(args: argparse.Namespace, registry: TargetRegistry) -> int:
    from tinyhil.trace.bundle import load_bundle

    bundle, directory = load_bundle(args.bundle)
    directory = directory.resolve()  # the rerun runs in the bundle's rootdir
    on = args.on or ("replay" if bundle.trace else "emulator")
    if on == "replay" and bundle.trace is None:
        raise InvalidArgument(f"{args.bundle}: the bundle holds no trace ({bundle.target} records none), expected "
                              "--on emulator")  # fmt: skip
    _say(f"tinyhil repro: {bundle.nodeid} on {bundle.target}, rerun on "
         f"{_REPLAY_TARGET + ' over its trace' if on == 'replay' else 'the emulator with its options'}")  # fmt: skip
    _say(f"  recorded: {bundle.outcome} in {bundle.when}: {bundle.reason}")
    with tempfile.TemporaryDirectory(prefix="tinyhil-repro-") as work:
        result, rerun_trace = _rerun(bundle, directory, on, Path(work), registry, Path(args.bundle).resolve())
        outcome, reason = str(result["outcome"]), str(result.get("reason") or "")
        _say(f"  rerun:    {outcome}{': ' + reason if reason else ''}")
        if outcome == bundle.outcome and not any(name in reason for name in _REPLAY_ERRORS):
            same = "the same" if reason == bundle.reason else "a different"
            _say(f"reproduces: the test {outcome} again, with {same} reason")
            return 0
        _say(f"does not reproduce: {_why_not(bundle, directory, on, outcome, reason, rerun_trace)}")
    return EXIT_DIFFERS


def add_repro_command(commands: Any) -> None:
    """Add ``repro`` to the ``tinyhil`` parser's subcommands."""
    repro = commands.add_parser(
        "repro",
        help="run a failing test's reproduction bundle again (--hil-repro-dir); this runs the test code it names",
        description="Run a failing test's reproduction bundle again and say whether the failure reproduces. "
        "Replaying a bundle runs the test code it names (the test module in its rootdir, and that directory's "
        "conftest.py files) with your permissions, by design: replay only bundles you would run the tests of. "
        "Nothing in the bundle becomes a pytest option; a node id outside its rootdir is refused.",
    )
    repro.add_argument("bundle", metavar="BUNDLE", help="a bundle directory (or its bundle.json)")
    repro.add_argument("--on", choices=("replay", "emulator"), default=None,
                       help="rerun on REPLAY+AMD over the bundle's trace (default when it has one) or on the "
                            "emulator from the bundle's options")  # fmt: skip
    repro.set_defaults(handler=_repro)


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
    drift = sub.add_parser("drift", help="list every reply the emulator gives that differs from a trace's")
    drift.add_argument("file", metavar="TRACE", help="a .hiltrace.jsonl or .pcapng trace with a MOCKUSB+AMD header")
    drift.set_defaults(handler=_drift)
