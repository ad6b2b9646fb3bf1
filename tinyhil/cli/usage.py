"""What the ``tinyhil`` command line tells its user: its exit statuses, each with its one meaning, and the help
text (a command's description from its module's docstring, the exit statuses as an epilog).

The farm's own statuses come from their home (:mod:`tinyhil.device_farm.run`, :mod:`tinyhil.device_farm.collection`,
:mod:`tinyhil.pipes`); this module names them for the command line and adds the ones only the command line gives.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from typing import Any, Final

from tinyhil.device_farm.collection import NO_TESTS_COLLECTED
from tinyhil.device_farm.run import EXIT_DEADLINE, EXIT_ENGINE_LOST, EXIT_INTERRUPTED, EXIT_UNAVAILABLE
from tinyhil.pipes import OUTPUT_CLOSED_EXIT_STATUS

__all__ = [
    "EXIT_DEADLINE",
    "EXIT_ENGINE_LOST",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NO_TESTS",
    "EXIT_OK",
    "EXIT_OUTPUT_CLOSED",
    "EXIT_STATUSES",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "add_command_group",
    "add_subcommand",
    "description",
    "exit_status_epilog",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_OUTPUT_CLOSED: Final = OUTPUT_CLOSED_EXIT_STATUS
EXIT_NO_TESTS: Final = NO_TESTS_COLLECTED  # pytest's own status for it, so scripts that know pytest's know this one
_ROLE: Final = re.compile(r":\w+:`~?([^`]+)`")  # a Sphinx role in a docstring, :func:`~a.b`
_WIDTH: Final = 100  # the epilog's lines, wrapped here: argparse keeps them as they are

EXIT_STATUSES: Final[dict[int, str]] = {
    EXIT_OK: "success (a command whose output closed after its work was done, `tinyhil targets | head`, too)",
    EXIT_FAILED: "tests failed, a benchmark is out of tolerance, a trace or hardware map drifts, or a repro bundle's "
    "failure does not reproduce",
    EXIT_USAGE: "a usage error, reported in one line naming the bad value",
    EXIT_UNAVAILABLE: "a target named explicitly cannot run here, or no GOOD board serves it "
    "(--allow-unavailable runs anyway, counting its skips); `farm worker`: no scheduler answered",
    EXIT_ENGINE_LOST: "the Dask scheduler went away mid-run (finish it with `farm run --resume DIR`)",
    EXIT_DEADLINE: "the run's --deadline passed before every test ran (as timeout(1) exits): reports marked "
    "incomplete; `--resume DIR` finishes the run",
    EXIT_NO_TESTS: "a run collected no test (an empty suite, or pytest options after -- that select none); no report "
    "is written",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C; a run prints the command that finishes it)",
    EXIT_OUTPUT_CLOSED: "a run whose output closed (`tinyhil run | head -1`): no further test started, reports "
    "marked incomplete where pairs are missing",
}


def exit_status_epilog(*statuses: int) -> str:
    """The ``--help`` epilog that lists ``statuses`` (default: all) with their meanings; other statuses are
    pytest's own."""
    chosen = statuses or tuple(EXIT_STATUSES)
    lines = [textwrap.fill(EXIT_STATUSES[status], _WIDTH, initial_indent=f"  {status:>3}  ", subsequent_indent=" " * 7)
             for status in chosen]  # fmt: skip
    pytest_own = ["  other: pytest's own status"] if EXIT_OUTPUT_CLOSED in chosen else []  # the commands that run tests
    return "\n".join(["exit status:", *lines, *pytest_own])


def description(doc: str | None, *, paragraphs: int | None = None) -> str | None:
    """A command's ``--help`` description: its module's docstring (the first ``paragraphs``, default all), with the
    docstring's markup (double backquotes, ``:func:`~name``` roles) dropped."""
    if doc is None:
        return None
    kept = doc.strip().split("\n\n")[:paragraphs]
    return _ROLE.sub(r"\1", "\n\n".join(kept)).replace("``", "")


def add_subcommand(commands: Any, name: str, summary: str, *statuses: int, details: str | None = None) -> Any:
    """Add subcommand ``name`` to ``commands`` (an argparse subparsers action): its ``--help`` opens with ``details``
    (default: ``summary``, what its parent's ``--help`` lists) and ends with ``statuses`` (:func:`exit_status_epilog`).
    """
    return commands.add_parser(name, help=summary, description=details or summary,
                               epilog=exit_status_epilog(*statuses),
                               formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip


def add_command_group(
    commands: Any, name: str, summary: str, *statuses: int, details: str | None, dest: str, metavar: str
) -> Any:
    """Add command ``name`` whose work is in its subcommands (:func:`add_subcommand`, then one subcommand required,
    its name in ``args.<dest>``); returns the subcommands' argparse subparsers action."""
    group = add_subcommand(commands, name, summary, *statuses, details=details)
    return group.add_subparsers(dest=dest, required=True, metavar=metavar)
