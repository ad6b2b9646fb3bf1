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

import usb1  # type: ignore[import-untyped]  # libusb1 ships no type information

from tinyhil.device_farm.leases import LeaseTimeout
from tinyhil.usb.errors import BridgeUnavailable

__all__ = ["infrastructure_cause", "killed_cause"]

# The exception types that mean the board itself is gone (a subclass counts, as for any except clause).
_BOARD_LOST: Final[tuple[type[BaseException], ...]] = (usb1.USBErrorNoDevice, BridgeUnavailable)


def infrastructure_cause(exc: BaseException) -> str | None:
    """The infrastructure cause of ``exc`` (``"board lost: USBErrorNoDevice"``), or ``None`` for a test failure.

    Looks through ``__cause__`` / ``__context__``, so a driver error raised from a lost device still counts.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        lost = next((kind for kind in _BOARD_LOST if isinstance(current, kind)), None)
        if lost is not None:
            return f"board lost: {lost.__name__}"
        if isinstance(current, OSError) and current.errno == errno.ENODEV:
            return "board lost: ENODEV"
        if isinstance(current, LeaseTimeout):
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
