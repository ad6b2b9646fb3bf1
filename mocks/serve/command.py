"""The served command: run as a wrapper runs it, with what ``tinyhil serve`` inherited and the signals it receives.

COMMAND inherits ``tinyhil serve``'s environment (plus what serving adds) and every descriptor ``tinyhil serve``
itself inherited (its own are close-on-exec), so a pipe a caller passes on (a farm shard's event pipe) reaches
COMMAND. SIGTERM, SIGINT and SIGHUP that reach ``tinyhil serve`` while COMMAND runs go on to COMMAND, so whoever
ends ``tinyhil serve`` ends COMMAND with it, and the server stays up until COMMAND has exited.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any, Final

__all__ = ["FORWARDED_SIGNALS", "run_command"]

FORWARDED_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_SIGNAL_EXIT_BASE: Final = 128  # a shell's exit status for a command killed by signal N is 128 + N


def run_command(argv: Sequence[str], env: Mapping[str, str], **popen: Any) -> int:
    """Run ``argv`` until it exits and return its exit status (128 + N when signal N killed it).

    Raises:
        OSError: ``argv`` cannot be run.
    """
    process = subprocess.Popen(list(argv), env=dict(env), close_fds=False, **popen)

    def forward(signum: int, _frame: FrameType | None) -> None:
        process.send_signal(signum)

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():  # Python installs handlers from the main thread only
        previous = {signum: signal.signal(signum, forward) for signum in FORWARDED_SIGNALS}
    try:
        returncode = process.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return returncode if returncode >= 0 else _SIGNAL_EXIT_BASE - returncode
