"""What every benchmark script does when run from a shell: run ``main`` and exit quietly when stdout closes early.

    if __name__ == "__main__":
        from _cli import run_main  # benchmarks/ is a folder of scripts: the script's own folder is on sys.path

        run_main(main)

``python benchmarks/bench_usb_copy.py | head -1`` closes the pipe after one line; the next write (or the final
flush) raises ``BrokenPipeError``. That is the reader's choice, not an error of the benchmark, so it ends the
script quietly with status 0, as the ``tinyhil`` command line does for ``tinyhil targets --json | head``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Final, NoReturn

__all__ = ["BROKEN_PIPE_EXIT_STATUS", "run_main"]

BROKEN_PIPE_EXIT_STATUS: Final = 0  # the reader stopped on purpose; the same status as the tinyhil command line


def run_main(main: Callable[[], int | None]) -> NoReturn:
    """Exit with ``main()``'s status (``None`` counts as 0), or quietly with 0 once stdout's reader has gone.

    The standard recipe (Python docs, ``signal``, "Note on SIGPIPE"): flush inside the ``try`` so a broken pipe is
    seen here and not at interpreter shutdown, then point stdout's descriptor at ``os.devnull`` so the shutdown
    flush of what is still buffered writes nowhere instead of raising again.
    """
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(BROKEN_PIPE_EXIT_STATUS)
    sys.exit(status or 0)
