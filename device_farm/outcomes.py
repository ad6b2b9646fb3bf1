"""Which failures are the infrastructure's, not the test's: the one rule the farm retries by.

**Infrastructure failures** (retried on another eligible board, counted against the board's health): the board
was lost (``usb1.USBErrorNoDevice``, an ``OSError`` with ``ENODEV``, a bridge that can no longer be found), a
lease that timed out, a worker that died by a signal, a failed health probe. **Test failures** (everything else:
an assertion, a wrong value, a ``DeviceError``) are never retried.
"""

from __future__ import annotations

import errno
import signal
from typing import Final

__all__ = ["infrastructure_cause", "killed_cause"]

_BOARD_LOST: Final = ("USBErrorNoDevice", "BridgeUnavailable")


def infrastructure_cause(exc: BaseException) -> str | None:
    """The infrastructure cause of ``exc`` (``"board lost: USBErrorNoDevice"``), or ``None`` for a test failure.

    Looks through ``__cause__`` / ``__context__``, so a driver error raised from a lost device still counts.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = {cls.__name__ for cls in type(current).__mro__}
        lost = next((name for name in _BOARD_LOST if name in names), None)
        if lost is not None:
            return f"board lost: {lost}"
        if isinstance(current, OSError) and current.errno == errno.ENODEV:
            return "board lost: ENODEV"
        if "LeaseTimeout" in names:
            return f"lease timeout: {current}"
        current = current.__cause__ or current.__context__
    return None


def killed_cause(returncode: int) -> str | None:
    """The cause for a shard process that ended with ``returncode`` (``"worker killed by SIGKILL"``), if a signal."""
    if returncode >= 0:
        return None
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"worker killed by {name}"
