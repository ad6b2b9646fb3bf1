"""The ``tinyhil`` command line: the roof of the project, one module per command.

=========================  ==========================================================================================
``tinyhil targets``        every registered target, available or why not (:mod:`tinyhil.cli.targets`)
``tinyhil run``            the portable suite on targets: a farm run with one board per target (:mod:`tinyhil.cli.run`)
``tinyhil farm ...``       the farm: discover, run, status, history, scheduler, worker, certs (:mod:`tinyhil.cli.farm`)
``tinyhil trace ...``      USB traces: convert, show, drift (:mod:`tinyhil.cli.trace`)
``tinyhil repro BUNDLE``   a failing test's repro bundle run again (:mod:`tinyhil.cli.repro`)
``tinyhil serve usb|kfd``  an emulated board served to a driver that never imports tinyhil (:mod:`tinyhil.cli.serve`)
``tinyhil bench copyin``   the copyin throughput a timing model predicts, per revision (:mod:`tinyhil.cli.bench`)
=========================  ==========================================================================================

Each command module has an ``add_*`` function that adds its parser; :func:`main` assembles them, runs the chosen
command's handler and maps what goes wrong to an exit status (:mod:`tinyhil.cli.usage`, listed by
``tinyhil --help``). The command line imports every floor below it; nothing imports it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import tinyhil
from tinyhil.cli.bench import add_bench_command
from tinyhil.cli.farm import add_farm_command
from tinyhil.cli.repro import add_repro_command
from tinyhil.cli.run import add_run_command
from tinyhil.cli.serve import add_serve_command
from tinyhil.cli.targets import add_targets_command
from tinyhil.cli.trace import add_trace_command
from tinyhil.cli.usage import (
    EXIT_DEADLINE,
    EXIT_ENGINE_LOST,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_OUTPUT_CLOSED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    exit_status_epilog,
)
from tinyhil.device_farm.run import MANAGED_PYTEST_OPTIONS, TargetsUnavailable
from tinyhil.errors import TinyHilError
from tinyhil.pipes import silence_stdout
from tinyhil.registry import default_registry

__all__ = [
    "EXIT_DEADLINE",
    "EXIT_ENGINE_LOST",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_OUTPUT_CLOSED",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "main",
    "parser",
]


def parser() -> argparse.ArgumentParser:
    """The ``tinyhil`` parser, assembled from each command module's ``add_*`` function."""
    top = argparse.ArgumentParser(
        prog="tinyhil",
        description="tinyhil: a hardware-in-the-loop test and emulation harness. Run the portable suite on emulated\n"
        "and real targets, drive the device farm, work with USB traces and repro bundles, benchmark the timing model.\n"
        "`tinyhil COMMAND --help` describes a command.",
        epilog=exit_status_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=f"tinyhil {tinyhil.__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (add_targets_command, add_run_command, add_farm_command, add_trace_command, add_repro_command,
                add_serve_command, add_bench_command):  # fmt: skip
        add(commands)
    return top


def _runs_tests(args: argparse.Namespace) -> bool:
    """Whether the command is a run (``tinyhil run``, ``tinyhil farm run``): its pytest arguments go after ``--``."""
    return bool(args.command == "run" or getattr(args, "farm_command", None) == "run")


def _unrecognized(unknown: Sequence[str], *, runs_tests: bool) -> str:
    """argparse's message for options the command does not know; for a run, the fix (the run's own option for one
    the run sets itself, else ``--`` before pytest's options)."""
    message = f"unrecognized arguments: {' '.join(unknown)}"
    if not runs_tests:
        return message
    options = [arg.split("=", 1)[0] for arg in unknown]
    managed = [option for option in options if option in MANAGED_PYTEST_OPTIONS]
    if managed:
        return f"{message}; {managed[0]} is the run's own: use {MANAGED_PYTEST_OPTIONS[managed[0]]}"
    return f"{message}; pytest's options go after --"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tinyhil`` command ``argv`` (default: ``sys.argv[1:]``); returns its exit status."""
    top = parser()
    args, unknown = top.parse_known_args(argv)
    if unknown:
        top.error(_unrecognized(unknown, runs_tests=_runs_tests(args)))
    args.command_line = ("tinyhil", *(sys.argv[1:] if argv is None else argv))  # what a run's reports say ran it
    try:
        status = int(args.handler(args, default_registry()))
        sys.stdout.flush()
        return status
    except BrokenPipeError:  # stdout's reader went away (`| head`): no traceback; a run it cut short says so
        status = silence_stdout()
        return EXIT_OUTPUT_CLOSED if _runs_tests(args) else status
    except TargetsUnavailable as exc:
        print(f"tinyhil {args.command}: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except TinyHilError as exc:
        print(f"tinyhil {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"tinyhil {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
