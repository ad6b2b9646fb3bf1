"""``tinyhil repro BUNDLE [--on replay|emulator]``: run a failing test's repro bundle again: does it reproduce?

The rerun is a pytest child process: on REPLAY+AMD over the bundle's trace (the default when it has one), or on
the emulator from the bundle's options. Exit 0 when the test fails again as recorded, 1 when it does not (the
output says where the rerun departed from the bundle), 2 for a bundle that cannot be used.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

from tinyhil.cli.usage import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_subcommand
from tinyhil.device_farm.shard.plugin import SHARD_ENV
from tinyhil.errors import InvalidArgument
from tinyhil.fixtures.options import ENV_RECORD, ENV_REPLAY, ENV_REPRO_DIR, ENV_STRICT, ENV_SUMMARY, ENV_TARGET
from tinyhil.mocks.targets import REPLAY_TARGET
from tinyhil.printable import printable
from tinyhil.registry import TargetRegistry
from tinyhil.trace.convert import load_trace
from tinyhil.trace.errors import ReplayExhausted, ReplayMismatch, TraceNotConsumed

__all__ = ["add_repro_command"]

# A rerun that ended on one of these did not reach the test's own failure: it diverged from the recorded trace.
_REPLAY_ERRORS: Final = tuple(error.__name__ for error in (ReplayMismatch, ReplayExhausted, TraceNotConsumed))
# What the rerun must not inherit from the shell that ran the failing session.
_SESSION_ENV: Final = (ENV_TARGET, ENV_REPRO_DIR, ENV_RECORD, ENV_REPLAY, ENV_SUMMARY, SHARD_ENV, ENV_STRICT)


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
        nodeid = _retarget(bundle.nodeid, bundle.target, REPLAY_TARGET)
        extra = [f"--hil-target={REPLAY_TARGET}", f"--hil-replay={directory / bundle.trace}"]
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
         f"{REPLAY_TARGET + ' over its trace' if on == 'replay' else 'the emulator with its options'}")  # fmt: skip
    _say(f"  recorded: {bundle.outcome} in {bundle.when}: {bundle.reason}")
    with tempfile.TemporaryDirectory(prefix="tinyhil-repro-") as work:
        result, rerun_trace = _rerun(bundle, directory, on, Path(work), registry, Path(args.bundle).resolve())
        outcome, reason = str(result["outcome"]), str(result.get("reason") or "")
        _say(f"  rerun:    {outcome}{': ' + reason if reason else ''}")
        if outcome == bundle.outcome and not any(name in reason for name in _REPLAY_ERRORS):
            same = "the same" if reason == bundle.reason else "a different"
            _say(f"reproduces: the test {outcome} again, with {same} reason")
            return EXIT_OK
        _say(f"does not reproduce: {_why_not(bundle, directory, on, outcome, reason, rerun_trace)}")
    return EXIT_FAILED


def add_repro_command(commands: Any) -> None:
    """Add ``repro`` to the ``tinyhil`` parser's subcommands."""
    repro = add_subcommand(
        commands,
        "repro",
        "run a failing test's reproduction bundle again (--hil-repro-dir); this runs the test code it names",
        EXIT_OK,
        EXIT_FAILED,
        EXIT_USAGE,
        details="Run a failing test's reproduction bundle again and say whether the failure reproduces. "
        "Replaying a bundle runs the test code it names (the test module in its rootdir, and that directory's "
        "conftest.py files) with your permissions, by design: replay only bundles you would run the tests of. "
        "Nothing in the bundle becomes a pytest option; a node id outside its rootdir is refused.",
    )
    repro.add_argument("bundle", metavar="BUNDLE", help="a bundle directory (or its bundle.json)")
    repro.add_argument("--on", choices=("replay", "emulator"), default=None,
                       help="rerun on REPLAY+AMD over the bundle's trace (default when it has one) or on the "
                            "emulator from the bundle's options")  # fmt: skip
    repro.set_defaults(handler=_repro)
