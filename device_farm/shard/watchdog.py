"""A shard's per-test time limit: the watchdog inside the shard, and the limit each test gets.

A test's limit is its closest ``@pytest.mark.hil(timeout=S)``, else the run's ``--test-timeout``, else none. While a
test runs (setup, call and teardown) :mod:`faulthandler`'s watchdog is armed: past the limit it writes the stack of
every thread of the shard to the run's dump file and ends the process (its own thread, so a test that holds the GIL
in a C call is stopped too). The engine then reports the test as failed with that dump (a timeout is the test's
fault, not the board's), probes the board, and the lane goes on in a fresh shard process. The parent's backstop
(:data:`WATCHDOG_GRACE_S` past the limit) kills a shard whose watchdog did not end it.
"""

from __future__ import annotations

import faulthandler
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Final

import pytest

from tinyhil.fixtures.selection import marker_timeout

__all__ = ["WATCHDOG_GRACE_S", "Backstop", "Watchdog", "timeout_report"]

WATCHDOG_GRACE_S: Final = 5.0  # how long past a test's limit the parent waits for the shard's own watchdog


def timeout_report(limit_s: float, dump: str) -> str:
    """The failure text of a test stopped at ``limit_s``: what happened, then every thread's stack (``dump``)."""
    said = dump.strip() or "(no stack dump: the shard did not answer its watchdog and was killed)"
    return f"timeout: the test ran over its limit of {limit_s:g} s; the shard's threads at that moment:\n{said}"


class Watchdog:
    """Arms :mod:`faulthandler`'s watchdog for each test of a shard; ``default_s`` 0 means no run-wide limit."""

    def __init__(self, dump_path: str, default_s: float) -> None:
        self.default_s = default_s
        self._file: IO[str] | None = Path(dump_path).open("w") if dump_path else None  # noqa: SIM115  # held till exit

    def limit_s(self, item: pytest.Item) -> float | None:
        """The test's limit: its closest ``hil`` marker's ``timeout``, else the run's, else ``None``."""
        return marker_timeout(item.iter_markers("hil"), item.nodeid) or (self.default_s or None)

    def arm(self, limit_s: float | None) -> None:
        """Stop the process with a dump of every thread once ``limit_s`` passes (``None``: no limit)."""
        if limit_s is not None and self._file is not None:
            faulthandler.dump_traceback_later(limit_s, exit=True, file=self._file)

    def disarm(self) -> None:
        faulthandler.cancel_dump_traceback_later()


class Backstop:
    """The parent's side: kills ``process`` when a test runs :data:`WATCHDOG_GRACE_S` past its limit (the shard's
    watchdog did not end it). :meth:`see` each event as it arrives; ``limit_s`` is the running test's limit."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.limit_s: float | None = None
        self.fired = False
        self._timer: threading.Timer | None = None

    def see(self, event: Mapping[str, Any]) -> None:
        kind = event.get("event")
        if kind not in ("start", "result"):
            return
        self.cancel()
        limit = event.get("timeout") if kind == "start" else None
        self.limit_s = float(limit) if isinstance(limit, int | float) and limit > 0 else None
        if self.limit_s is not None:
            self._timer = threading.Timer(self.limit_s + WATCHDOG_GRACE_S, self._kill)
            self._timer.daemon = True
            self._timer.start()

    def _kill(self) -> None:
        self.fired = True
        self.process.kill()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def report(self, dump: str) -> str | None:
        """The running test's failure text when it was stopped at its limit (the watchdog wrote ``dump``, or this
        backstop killed the shard), else ``None``."""
        if self.limit_s is None or not (dump.strip() or self.fired):
            return None
        return timeout_report(self.limit_s, dump)
