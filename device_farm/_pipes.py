"""stdout's reader went away (``tinyhil targets --json | head``, ``python benchmarks/... | head``): stop quietly.

The standard recipe (Python docs, ``signal``, "Note on SIGPIPE"): the caller flushes inside its ``try`` so a broken
pipe is seen there and not at interpreter shutdown; this points stdout's descriptor at ``os.devnull`` so the
shutdown flush of what is still buffered writes nowhere instead of raising again.
"""

from __future__ import annotations

import os
import sys
from typing import Final

__all__ = ["BROKEN_PIPE_EXIT_STATUS", "silence_stdout"]

BROKEN_PIPE_EXIT_STATUS: Final = 0  # the reader stopped on purpose, as with `cat file | head`


def silence_stdout() -> int:
    """Send the rest of stdout to ``os.devnull``; returns :data:`BROKEN_PIPE_EXIT_STATUS`."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return BROKEN_PIPE_EXIT_STATUS
