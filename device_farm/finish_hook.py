"""``--on-finish CMD``: a command run once when a run has written its reports, with the path of its
``summary.json`` as its last argument (for mail or chat; docs/history.md, "When a run finishes").

``CMD`` is split as a shell would split it (:func:`shlex.split`) but run without one, so nothing in it is
expanded. Its failure (it cannot start, exits non-zero, or outlives :data:`ON_FINISH_TIMEOUT_S`) is one warning
line on standard error; the run's exit status stays the tests'.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Final, TextIO

from tinyhil.errors import InvalidArgument
from tinyhil.printable import printable

__all__ = ["ON_FINISH_TIMEOUT_S", "on_finish_command", "run_on_finish"]

ON_FINISH_TIMEOUT_S: Final = 300.0


def on_finish_command(text: str) -> tuple[str, ...]:
    """``--on-finish``'s argument as the argv it runs (the summary's path is added when it runs).

    Raises:
        InvalidArgument: empty, or unbalanced quotes.
    """
    try:
        argv = tuple(shlex.split(text))
    except ValueError as exc:
        raise InvalidArgument(
            f"--on-finish {text!r}: {exc}, expected a command line such as 'notify-lab --to ops'"
        ) from None
    if not argv:
        raise InvalidArgument(f"--on-finish {text!r}: empty, expected a command to run with the summary's path")
    return argv


def run_on_finish(argv: tuple[str, ...], summary: Path, err: TextIO | None = None) -> None:
    """Run ``argv`` with ``summary`` appended, once, waiting for it; a failure is a warning on ``err``."""
    err = err or sys.stderr
    command = [*argv, str(summary)]
    shown = printable(shlex.join(command), newlines=False)
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, timeout=ON_FINISH_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = exc.strerror if isinstance(exc, OSError) else f"still running after {ON_FINISH_TIMEOUT_S:g} s"
        print(f"tinyhil: --on-finish {shown}: {why}; the run's status is the tests'", file=err, flush=True)
        return
    if done.returncode != 0:
        print(f"tinyhil: --on-finish {shown}: exit status {done.returncode}; the run's status is the tests'",
              file=err, flush=True)  # fmt: skip
