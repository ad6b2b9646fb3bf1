"""``tinyhil run``: the portable suite (or ``--suite``) on targets, as a farm run with one board per target.

The targets are ``--target``, else ``$DEV``, else every available emulated target; a target named with ``--target``
or ``$DEV`` that cannot run here stops the run (exit 3) unless ``--allow-unavailable``. The run is made by the
farm's one constructor (:func:`~tinyhil.device_farm.run.new_run`), so it checks what ``tinyhil farm run`` checks.
Reports (junit.xml, summary.json, report.html) go to ``--report``; the run's farm state (health, leases of its
per-target boards, durations) stays beside them, so runs in separate report directories never wait on each
other's leases and a rerun in one directory plans by its durations.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final

import tinyhil
from tinyhil.cli.usage import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_OUTPUT_CLOSED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    add_subcommand,
    description,
)
from tinyhil.device_farm.collection import CollectionFailed
from tinyhil.device_farm.inventory.hwmap import target_inventory
from tinyhil.device_farm.run import choose_targets, new_run, run_farm
from tinyhil.fixtures import SUITE_PACKAGE
from tinyhil.fixtures.options import ENV_TARGET
from tinyhil.registry import TargetRegistry

__all__ = ["DEFAULT_REPORT_DIR", "DEFAULT_WORKERS", "RUN_STATE_DIR", "add_run_command"]

DEFAULT_REPORT_DIR: Final = "tinyhil-report"
DEFAULT_WORKERS: Final = 2
RUN_STATE_DIR: Final = "farm-state"  # inside the report directory


def _run(args: argparse.Namespace, registry: TargetRegistry) -> int:
    choice = choose_targets(registry, args.target)
    report_dir = Path(args.report)
    unavailable = choice.unavailable()
    available = [t for t in choice.targets if t.name not in unavailable]
    run = new_run(lambda slots: target_inventory(available, slots=slots), args.suite or (), report_dir,
                  report_dir.resolve() / RUN_STATE_DIR, args.workers, pytest_args=args.pytest_args,
                  targets=choice.names, allow_unavailable=True, test_timeout_s=args.test_timeout)  # fmt: skip
    choice.check_here(allow_unavailable=args.allow_unavailable)
    print(f"tinyhil {tinyhil.__version__}: running the portable suite on {', '.join(choice.names)} ({choice.source})",
          flush=True)  # fmt: skip
    try:
        return run_farm(run)
    except CollectionFailed as exc:
        print(f"tinyhil run: {exc}; no report written", file=sys.stderr)
        return exc.exitstatus


def add_run_command(commands: Any) -> None:
    """Add ``run`` to the ``tinyhil`` parser's subcommands."""
    run = add_subcommand(
        commands,
        "run",
        "run the portable HIL suite on targets and write reports",
        EXIT_OK,
        EXIT_FAILED,
        EXIT_USAGE,
        EXIT_UNAVAILABLE,
        EXIT_INTERRUPTED,
        EXIT_OUTPUT_CLOSED,
        details=description(__doc__),
    )
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
    run.add_argument("--workers", type=int, default=DEFAULT_WORKERS, metavar="N",
                     help=f"test processes at once (default {DEFAULT_WORKERS})")  # fmt: skip
    run.add_argument("--test-timeout", type=float, default=0.0, metavar="S",
                     help="stop a test after S seconds with a stack dump, reported as its failure "
                          "(@pytest.mark.hil(timeout=S) overrides it per test; default: no limit)")  # fmt: skip
    run.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS", help="extra arguments passed to pytest")
    run.set_defaults(handler=_run)
