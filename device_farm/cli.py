"""The ``tinyhil`` command line; every command is an operation of the farm.

tinyhil targets [--json]                     list every registered target, available or why not
tinyhil run [--target T ...] [--report DIR]  run the portable suite on targets (default: every emulated one)
tinyhil bench copyin [--model M] [--size S]  predicted USB copyin throughput per protocol revision vs hardware
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import tinyhil
from tinyhil.device_farm.bench import DEFAULT_TOLERANCE, CopyinResult, bench_copyin, parse_size
from tinyhil.device_farm.matrix import render_matrix
from tinyhil.device_farm.runner import run_suite
from tinyhil.emulators.timing import TimingModel
from tinyhil.errors import TinyHilError
from tinyhil.fixtures import SUITE_PACKAGE
from tinyhil.registry import SELECT_EMULATED, TargetRegistry, default_registry

__all__ = ["main"]

EXIT_USAGE: Final = 2
DEFAULT_REPORT_DIR: Final = "tinyhil-report"


def _targets(args: argparse.Namespace, registry: TargetRegistry) -> int:
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
    selectors = args.target or [SELECT_EMULATED]
    targets = [t.name for t in registry.select(selectors)]
    if not targets:
        print(f"tinyhil run: no available target matches {selectors}; see `tinyhil targets`", file=sys.stderr)
        return EXIT_USAGE
    report_dir = Path(args.report)
    print(f"tinyhil {tinyhil.__version__}: running the portable suite on {', '.join(targets)}", flush=True)
    outcome = run_suite(targets, report_dir, suite=args.suite or (SUITE_PACKAGE,), pytest_args=args.pytest_args)
    print()
    print(render_matrix(outcome.summary.get("results", []), targets))
    counts = outcome.summary.get("counts", {})
    print()
    print("totals: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing ran"))
    print(f"reports: {outcome.junit_path} {outcome.summary_path}")
    return outcome.exitstatus


def _bench_copyin(args: argparse.Namespace, registry: TargetRegistry) -> int:
    nbytes = parse_size(args.size)
    TimingModel.preset(args.model)  # an unknown model fails before anything is printed
    print(
        f"tinyhil bench copyin: {args.size} ({nbytes} bytes) into MOCKUSB+AMD in timed mode, timing model "
        f"{args.model!r}; MB/s = 10**6 bytes per second of virtual time",
        flush=True,
    )
    print(f"{'revision':<16} {'model MB/s':>10} {'hardware MB/s':>13} {'error':>7}", flush=True)
    rows: list[CopyinResult] = []

    def show(result: CopyinResult) -> None:
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
    listing.add_argument("--json", action="store_true", help="print JSON for machines")
    listing.set_defaults(handler=_targets)
    run = commands.add_parser("run", help="run the portable HIL suite on targets and write reports")
    run.add_argument(
        "--target",
        action="append",
        metavar="T",
        help="target string, 'all', 'emulated' or a glob (repeatable; default: every available emulated target)",
    )
    run.add_argument(
        "--suite",
        action="append",
        metavar="PATH_OR_PACKAGE",
        help=f"tests to run (repeatable; default: the portable suite, {SUITE_PACKAGE})",
    )
    run.add_argument("--report", default=DEFAULT_REPORT_DIR, metavar="DIR", help="where junit.xml and summary.json go")
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
        type=float,
        default=DEFAULT_TOLERANCE,
        help=f"exit 1 when a revision is further than this from its hardware figure (default: {DEFAULT_TOLERANCE})",
    )
    copyin.set_defaults(handler=_bench_copyin)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.handler(args, default_registry()))
    except TinyHilError as exc:
        print(f"tinyhil {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"tinyhil {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
