"""What every benchmark script does when run from a shell: run ``main`` and exit quietly when stdout closes early.

    if __name__ == "__main__":
        from _cli import run_main  # benchmarks/ is a folder of scripts: the script's own folder is on sys.path

        run_main(main)

``python benchmarks/bench_usb_copy.py | head -1`` closes the pipe after one line; the next write (or the final
flush) raises ``BrokenPipeError``. That is the reader's choice, not an error of the benchmark, so it ends the
script quietly with status 0, as the ``tinyhil`` command line does for ``tinyhil targets --json | head``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

from tinyhil.pipes import BROKEN_PIPE_EXIT_STATUS, silence_stdout

__all__ = ["BROKEN_PIPE_EXIT_STATUS", "run_main"]


def run_main(main: Callable[[], int | None]) -> NoReturn:
    """Exit with ``main()``'s status (``None`` counts as 0), or quietly once stdout's reader has gone (the recipe is
    :mod:`tinyhil.pipes`, shared with the ``tinyhil`` command line)."""
    try:
        status = main()
        sys.stdout.flush()  # inside the try: a broken pipe is seen here, not at interpreter shutdown
    except BrokenPipeError:
        sys.exit(silence_stdout())
    sys.exit(status or 0)
