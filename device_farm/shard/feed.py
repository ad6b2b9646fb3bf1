"""A lane's shard fed its tests over a pipe, as pytest-xdist feeds its workers: one process, one start-up, per lane.

The shard collects the test files of its lane's pairs once. The parent then writes one JSON line per command to the
shard's command pipe: ``{"run": ARG}`` (a test, by the argument that selects it, :attr:`Pair.node_id`) or
``{"end": true}``. The shard runs a test once it knows the next one (pytest tears fixtures down by the next item, as
pytest-xdist's workers do), so the parent keeps :data:`FEED_AHEAD` tests in the pipe beyond the running one and the
shard never waits for its next test. An argument the shard did not collect comes back as
``{"event": "unknown", "nodeid": ARG}``. After a test that stops the session (an infrastructure failure, ``-x``) the
shard reads no further command and ends; the tests fed but not started go back to the lane.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, Final

import pytest

__all__ = ["FEED_AHEAD", "Feeder", "run_fed"]

FEED_AHEAD: Final = 2  # tests in the pipe beyond the running one: its next item, and the one after


def run_fed(session: pytest.Session, commands: BinaryIO, items: Mapping[str, pytest.Item],
            send: Callable[[dict[str, Any]], None]) -> None:  # fmt: skip
    """Run the tests ``commands`` names (``items`` by the argument that selects each) until ``{"end": true}``, the
    pipe's end, or a test that stops the session."""

    def next_arg() -> str | None:
        line = commands.readline()
        command = json.loads(line) if line else {}
        return str(command["run"]) if "run" in command else None

    pending = next_arg()
    while pending is not None:
        following = next_arg()
        item = items.get(pending)
        if item is None:
            send({"event": "unknown", "nodeid": pending})
        else:
            nextitem = items.get(following) if following is not None else None
            item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.shouldfail or session.shouldstop:
                return
        pending = following


class Feeder:
    """The parent's end of a shard's command pipe: ``next_arg`` gives the next test to run (``None``: no more)."""

    def __init__(self, fd: int, next_arg: Callable[[], str | None]) -> None:
        self._pipe: BinaryIO | None = os.fdopen(fd, "wb", buffering=0)
        self._next_arg = next_arg

    def prime(self) -> None:
        """Fill the pipe: the first test and :data:`FEED_AHEAD` - 1 behind it."""
        for _ in range(FEED_AHEAD):
            self.advance()

    def advance(self) -> None:
        """Send one more test, or the end once there is none (a test started, or one was unknown)."""
        pipe = self._pipe
        if pipe is None:
            return
        arg = self._next_arg()
        try:
            pipe.write((json.dumps({"end": True} if arg is None else {"run": arg}) + "\n").encode())
        except BrokenPipeError:  # the shard ended (its session stopped, or it was killed): it reads no more
            arg = None
        if arg is None:
            self.close()

    def close(self) -> None:
        if self._pipe is not None:
            with contextlib.suppress(BrokenPipeError):
                self._pipe.close()
            self._pipe = None
