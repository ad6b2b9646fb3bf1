"""``tinyhil run``: the portable suite (or ``--suite``) on targets, as a farm run with one board per target.

The targets are ``--target``, else ``$DEV``, else every available emulated target; a target named with ``--target``
or ``$DEV`` that cannot run here stops the run (exit 3) unless ``--allow-unavailable``. The run is made by the
farm's one constructor (:func:`~tinyhil.device_farm.run.new_run`), so it checks what ``tinyhil farm run`` checks.
Reports (junit.xml, summary.json, report.html) go to ``--report``; the run's farm state (health of its per-target
boards, durations) stays beside them, so a rerun in one directory plans by its durations. Leases are host-wide
(docs/farm.md, "Leases"): an emulated target's board is the run's own (each run its own emulated instance, so runs
never wait on each other for one), while a hardware target's board is the one device the whole host shares. The run
is recorded in the run history (``--history``, docs/history.md).

``--resume DIR`` runs the run in DIR again as its journal's header says it was (its targets, suite and pytest
arguments; ``$DEV`` is not read), only what has no result; Ctrl-C, and ``--deadline``, leave a run that way, and the
command to finish it is printed. ``--reruns N`` runs a failing test up to N more times (flaky when one then passes).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final

import tinyhil
from tinyhil.cli.farm_boards import add_lease_options, lease_options
from tinyhil.cli.farm_history import add_history_options, history_options
from tinyhil.cli.run_options import add_run_options, given_options, parse_duration, resumed_header, resumed_suite
from tinyhil.cli.usage import (
    EXIT_DEADLINE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO_TESTS,
    EXIT_OK,
    EXIT_OUTPUT_CLOSED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    add_subcommand,
    description,
)
from tinyhil.device_farm.collection import CollectionFailed
from tinyhil.device_farm.inventory.hwmap import target_inventory
from tinyhil.device_farm.run import COMMANDS, FarmRun, choose_targets, new_run, run_farm
from tinyhil.device_farm.run_header import check_given
from tinyhil.fixtures import SUITE_PACKAGE
from tinyhil.fixtures.options import ENV_TARGET
from tinyhil.registry import TargetRegistry

__all__ = ["DEFAULT_REPORT_DIR", "DEFAULT_WORKERS", "RUN_STATE_DIR", "add_run_command"]

DEFAULT_REPORT_DIR: Final = "tinyhil-report"
DEFAULT_WORKERS: Final = 2
RUN_STATE_DIR: Final = "farm-state"  # inside the report directory


def _new_run(args: argparse.Namespace, registry: TargetRegistry, deadline_s: float | None) -> tuple[FarmRun, str]:
    """The run the command line asks for, and where its targets came from."""
    if args.resume:
        report_dir = Path(args.resume)
        header = resumed_header(report_dir, COMMANDS[1])
        check_given(header, given_options(args, header, registry))
        choice = choose_targets(registry, header.targets, environment=False)
        suite, pytest_args, reruns, source = resumed_suite(header), header.pytest_args, header.reruns, "resumed"
    else:
        report_dir = Path(args.report or DEFAULT_REPORT_DIR)
        choice = choose_targets(registry, args.target)
        suite, pytest_args, reruns, source = args.suite or (), args.pytest_args, args.reruns or 0, choice.source
    unavailable = choice.unavailable()
    available = [t for t in choice.targets if t.name not in unavailable]
    run = new_run(lambda slots: target_inventory(available, slots=slots), suite, report_dir,
                  report_dir.resolve() / RUN_STATE_DIR, args.workers, pytest_args=pytest_args, targets=choice.names,
                  allow_unavailable=True, resume=bool(args.resume), reruns=reruns, deadline_s=deadline_s,
                  command=COMMANDS[1], command_line=args.command_line, **history_options(args),
                  **lease_options(args), test_timeout_s=args.test_timeout)  # fmt: skip
    choice.check_here(allow_unavailable=args.allow_unavailable)
    return run, source


def _run(args: argparse.Namespace, registry: TargetRegistry) -> int:
    run, source = _new_run(args, registry, parse_duration(args.deadline) if args.deadline else None)
    print(f"tinyhil {tinyhil.__version__}: running the portable suite on {', '.join(run.targets)} ({source})",
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
        EXIT_DEADLINE,
        EXIT_NO_TESTS,
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
    where = run.add_mutually_exclusive_group()
    where.add_argument("--report", metavar="DIR",
                       help=f"where the reports go (default {DEFAULT_REPORT_DIR})")  # fmt: skip
    run.add_argument("--workers", type=int, default=DEFAULT_WORKERS, metavar="N",
                     help=f"test processes at once (default {DEFAULT_WORKERS})")  # fmt: skip
    add_run_options(run, where)
    add_history_options(run)
    add_lease_options(run)
    run.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS", help="extra arguments passed to pytest")
    run.set_defaults(handler=_run)
