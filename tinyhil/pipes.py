"""stdout's reader went away (``tinyhil targets --json | head``, ``tinyhil run | head -1``): stop quietly.

The standard recipe (Python docs, ``signal``, "Note on SIGPIPE"): the caller flushes inside its ``try`` so a broken
pipe is seen there and not at interpreter shutdown; this points the stream's descriptor at ``os.devnull`` so the
shutdown flush of what is still buffered writes nowhere instead of raising again.

A command whose work was done exits :data:`BROKEN_PIPE_EXIT_STATUS` (0, as ``cat file | head`` does). A farm run
whose output closes while tests run starts no further test and exits :data:`OUTPUT_CLOSED_EXIT_STATUS` (141, the
status a shell reports for ``git log | head``'s git, killed by SIGPIPE): its work was cut short.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
from typing import Final, TextIO

__all__ = ["BROKEN_PIPE_EXIT_STATUS", "OUTPUT_CLOSED", "OUTPUT_CLOSED_EXIT_STATUS", "silence", "silence_stdout"]

BROKEN_PIPE_EXIT_STATUS: Final = 0  # the reader stopped on purpose, as with `cat file | head`
OUTPUT_CLOSED_EXIT_STATUS: Final = 128 + signal.SIGPIPE  # 141: a run the closed output cut short
OUTPUT_CLOSED: Final = "the run's output closed (its reader went away)"


def silence(stream: TextIO) -> None:
    """Send the rest of ``stream`` to ``os.devnull`` (nothing to do for a stream with no descriptor)."""
    with contextlib.suppress(io.UnsupportedOperation, AttributeError, ValueError):
        fileno = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fileno)
        os.close(devnull)


def silence_stdout() -> int:
    """Send the rest of stdout to ``os.devnull``; returns :data:`BROKEN_PIPE_EXIT_STATUS`."""
    silence(sys.stdout)
    return BROKEN_PIPE_EXIT_STATUS
