"""The one way MOCKKFD fails a request: ``OSError`` with the kernel's errno, a message, and a log line."""

from __future__ import annotations

import errno
import logging
import os
from typing import Final, NoReturn

__all__ = ["ENOTSUPP", "LOG", "fail"]

LOG: Final = logging.getLogger("tinyhil.mocks.kfd")
# The kernel-internal ENOTSUPP (524), which amdkfd lets reach userspace for an unknown queue type.
ENOTSUPP: Final = 524


def fail(code: int, message: str) -> NoReturn:
    """Raise ``OSError(code)`` whose message names the request and what was wrong, after logging it."""
    name = errno.errorcode.get(code, "ENOTSUPP" if code == ENOTSUPP else str(code))
    LOG.info("%s: %s", name, message)
    raise OSError(code, f"{os.strerror(code) if code != ENOTSUPP else 'Operation not supported'} ({name}): {message}")
