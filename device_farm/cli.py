"""The ``tinyhil`` command line; every command is an operation of the farm.

tinyhil targets [--json | --markdown]        list every registered target, available or why not
tinyhil run [--target T ...] [--report DIR]  run the portable suite on targets (default: $DEV, else every
                                             available emulated target): a farm run with one board per target
tinyhil bench copyin [--model M] [--size S]  predicted USB copyin throughput per protocol revision vs hardware
tinyhil farm discover [--hwmap FILE]         this host's boards and the drift against a hardware map
tinyhil trace convert IN OUT | show FILE     convert a USB trace (JSONL <-> usbmon pcapng) or summarise it
tinyhil trace drift TRACE                    the emulator's replies to a trace's requests that differ from it
tinyhil repro BUNDLE [--on replay|emulator]  run a failing test's repro bundle again: does it reproduce?

Exit status: 0 success; 1 tests failed (or a benchmark is out of tolerance); 2 a usage error, reported in one
line; 3 a target named explicitly cannot run here (``--allow-unavailable`` runs anyway, counting its skips); 141 a
run whose output closed (``tinyhil run | head -1``: no further test started, reports marked incomplete where pairs
are missing; any other command whose output closes exits 0); otherwise pytest's own status.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import tinyhil
from tinyhil.device_farm._pipes import OUTPUT_CLOSED_EXIT_STATUS, silence_stdout
from tinyhil.device_farm.bench import DEFAULT_TOLERANCE, CopyinResult, bench_copyin, check_tolerance, parse_size
from tinyhil.device_farm.farm_cli import add_farm_commands
from tinyhil.device_farm.farm_run import CollectionFailed, FarmRun, run_farm
from tinyhil.device_farm.hwmap import target_inventory
from tinyhil.device_farm.reference import render_target_reference
from tinyhil.device_farm.runner import check_run_arguments
from tinyhil.device_farm.trace_cli import add_repro_command, add_trace_commands
from tinyhil.emulators.timing import TimingModel
from tinyhil.errors import InvalidArgument, TinyHilError
from tinyhil.fixtures import SUITE_PACKAGE
from tinyhil.fixtures.options import ENV_TARGET, read_targets_from_environment
from tinyhil.registry import SELECT_EMULATED, TargetRegistry, default_registry

__all__ = ["EXIT_UNAVAILABLE", "EXIT_USAGE", "main"]

EXIT_USAGE: Final = 2
EXIT_UNAVAILABLE: Final = 3
DEFAULT_REPORT_DIR: Final = "tinyhil-report"
# tinyhil run keeps its farm state (health, leases of its per-target boards, durations) beside its reports, so runs
# in separate report directories never wait on each other's leases and a rerun in one directory plans by its
# durations.
RUN_STATE_DIR: Final = "farm-state"


def _targets(args: argparse.Namespace, registry: TargetRegistry) -> int:
    if args.markdown:
        print(render_target_reference(registry), end="")
        return 0
    rows: list[dict[str, Any]] = []
    for definition in registry.definitions():
        resolved = registry.resolve(definition.name)
        reason = resolved.unavailable_reason()
        rows.append(
            {
                "target": definition.name,
                "available": reason is None,
                "reason": reason,
                "emulated": definition.emulated,
                "capabilities": sorted(definition.capabilities),
                "renderers": sorted(definition.renderer_map),
                "archs": list(definition.archs),
                "summary": definition.summary,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    width = max(len(row["target"]) for row in rows)
    for row in rows:
        state = "available" if row["available"] else "unavailable"
        detail = ", ".join(row["capabilities"]) if row["available"] else row["reason"]
        print(f"{row['target']:<{width}}  {state:<11}  {detail}")
    return 0


def _run(args: argparse.Namespace, registry: TargetRegistry) -> int:
    """``tinyhil farm run`` without a map: one board per selected target (the embedded default)."""
    from_env = read_targets_from_environment()
    if args.target:
        selectors, source = args.target, "--target"
    elif from_env:
        selectors, source = list(from_env), f"${ENV_TARGET}"
    else:
        selectors, source = [SELECT_EMULATED], "default"
    resolved = registry.select(selectors)
    report_dir = Path(args.report)
    suite = args.suite or (SUITE_PACKAGE,)
    check_run_arguments(report_dir, suite, args.pytest_args)
    if args.workers < 1:
        raise InvalidArgument(f"--workers {args.workers}, expected an integer >= 1")
    strict = source != "default" and not args.allow_unavailable
    if not resolved:
        print(f"tinyhil run: no available target matches {selectors}; see `tinyhil targets`", file=sys.stderr)
        return EXIT_USAGE
    unavailable = [(t.name, reason) for t in resolved if (reason := t.unavailable_reason()) is not None]
    if strict and unavailable:
        for name, reason in unavailable:
            print(f"tinyhil run: target {name} ({source}) cannot run here: {reason}", file=sys.stderr)
        print("tinyhil run: pass --allow-unavailable to run anyway and count its tests as skipped", file=sys.stderr)
        return EXIT_UNAVAILABLE
    targets = [t.name for t in resolved]
    print(f"tinyhil {tinyhil.__version__}: running the portable suite on {', '.join(targets)} ({source})", flush=True)
    available = [t for t in resolved if t.name not in dict(unavailable)]
    run = FarmRun(target_inventory(available, slots=args.workers), tuple(_absolute(s) for s in suite),
                  report_dir.resolve(), report_dir.resolve() / RUN_STATE_DIR, args.workers, pyargs=not args.suite,
                  pytest_args=tuple(args.pytest_args), targets=tuple(targets), allow_unavailable=True)  # fmt: skip
    try:
        return run_farm(run)
    except CollectionFailed as exc:
        print(f"tinyhil run: {exc}; no report written", file=sys.stderr)
        return exc.exitstatus


def _absolute(entry: str) -> str:
    """A suite path as an absolute path (the run's pytest processes work in the report directory)."""
    return str(Path(entry).resolve()) if Path(entry).exists() else entry


def _bench_copyin(args: argparse.Namespace, registry: TargetRegistry) -> int:
    nbytes = parse_size(args.size)
    TimingModel.preset(args.model)  # an unknown model fails before anything is printed
    rows: list[CopyinResult] = []

    def show(result: CopyinResult) -> None:
        if not rows:  # printed once the first revision has run: a size the target cannot hold fails before it
            print(
                f"tinyhil bench copyin: {args.size} ({nbytes} bytes) into MOCKUSB+AMD in timed mode, timing model "
                f"{args.model!r}; MB/s = 10**6 bytes per second of virtual time",
            )
            print(f"{'revision':<16} {'model MB/s':>10} {'hardware MB/s':>13} {'error':>7}", flush=True)
        rows.append(result)
        flag = "" if abs(result.error) <= args.tolerance else f"  outside +-{args.tolerance:.0%}"
        print(f"{result.revision:<16} {result.mbps:>10.1f} {result.hardware_mbps:>13.0f} {result.error:>+7.1%}{flag}",
              flush=True)  # fmt: skip

    bench_copyin(args.model, nbytes, on_result=show)
    worst = max(abs(r.error) for r in rows)
    verdict = "within" if worst <= args.tolerance else "NOT within"
    print(f"every revision {verdict} {args.tolerance:.0%} of its hardware figure (worst {worst:.1%})")
    return 0 if worst <= args.tolerance else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tinyhil", description="hardware-in-the-loop test and emulation harness")
    parser.add_argument("--version", action="version", version=f"tinyhil {tinyhil.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = commands.add_parser("targets", help="list registered targets, their availability and capabilities")
    formats = listing.add_mutually_exclusive_group()
    formats.add_argument("--json", action="store_true", help="print JSON for machines")
    formats.add_argument(
        "--markdown", action="store_true", help="print the target and capability reference (docs/targets.md)"
    )
    listing.set_defaults(handler=_targets)
    run = commands.add_parser("run", help="run the portable HIL suite on targets and write reports")
    run.add_argument(
        "--target",
        action="append",
        metavar="T",
        help=f"target string, 'all', 'emulated' or a glob (repeatable, or comma-separated; default: ${ENV_TARGET}, "
        "else every available emulated target)",
    )
    run.add_argument(
        "--allow-unavailable",
        action="store_true",
        help="run even when a target named with --target or $DEV cannot run here, counting its tests as skipped",
    )
    run.add_argument(
        "--suite",
        action="append",
        metavar="PATH_OR_PACKAGE",
        help=f"tests to run (repeatable; default: the portable suite, {SUITE_PACKAGE})",
    )
    run.add_argument(
        "--report", default=DEFAULT_REPORT_DIR, metavar="DIR", help="where junit.xml, summary.json and report.html go"
    )
    run.add_argument("--workers", type=int, default=2, metavar="N", help="test processes at once (default 2)")
    run.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS", help="extra arguments passed to pytest")
    run.set_defaults(handler=_run)
    bench = commands.add_parser("bench", help="benchmarks")
    benches = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    copyin = benches.add_parser(
        "copyin", help="predicted USB copyin throughput of each protocol revision next to the hardware figures"
    )
    copyin.add_argument("--model", default="asm2464-usb3", help="timing model preset (default: asm2464-usb3)")
    copyin.add_argument("--size", default="64M", help="bytes to copy in, e.g. 64M, 512K (default: 64M)")
    copyin.add_argument(
        "--tolerance",
        type=_argparse_type(check_tolerance),
        default=DEFAULT_TOLERANCE,
        help=f"exit 1 when a revision is further than this from its hardware figure (default: {DEFAULT_TOLERANCE})",
    )
    copyin.set_defaults(handler=_bench_copyin)
    add_farm_commands(commands)
    add_trace_commands(commands)
    add_repro_command(commands)
    return parser


def _argparse_type(check: Callable[[float], float]) -> Callable[[str], float]:
    """An argparse ``type=`` that parses a float and checks it with the one validator for that value."""

    def convert(text: str) -> float:
        try:
            return check(float(text))
        except (ValueError, InvalidArgument) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        status = int(args.handler(args, default_registry()))
        sys.stdout.flush()
        return status
    except BrokenPipeError:  # stdout's reader went away (`| head`): no traceback; a run it cut short says so
        status = silence_stdout()
        cut_short = args.command == "run" or getattr(args, "farm_command", None) == "run"
        return OUTPUT_CLOSED_EXIT_STATUS if cut_short else status
    except TinyHilError as exc:
        print(f"tinyhil {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"tinyhil {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
