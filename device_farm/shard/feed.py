"""Shards fed their tests over a pipe, as pytest-xdist feeds its workers: a process starts once and runs lane after
lane.

A fed shard collects, once, the test files of every lane it may be sent, on all their targets. The parent then
writes one JSON line per command to the shard's command pipe. A lane is ``{"board": {...}}`` (the board's id,
slots, target, map options and environment: the shard takes its lease), then ``{"run": ARG}`` per test (by the
argument that selects it, :attr:`Pair.node_id`), then ``{"end": true}``; the shard gives the lease back and answers
``{"event": "idle"}``, ready for the next lane. The pipe's end ends the process. The shard runs a test once it knows
the next one (pytest tears fixtures down by the next item, as pytest-xdist's workers do), so the parent keeps
:data:`FEED_AHEAD` tests in the pipe and the shard never waits for its next test. An argument the shard did not
collect comes back as ``{"event": "unknown", "nodeid": ARG}``. After a test that stops the session (an
infrastructure failure, ``-x``) the shard reads no further command and ends; the tests fed but not started go back
to the lane.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, Final, Protocol

import pytest

from tinyhil.device_farm.inventory.hwmap import Board, BoardKind
from tinyhil.device_farm.planning import Plan

__all__ = ["FEED_AHEAD", "FedShard", "Feeder", "fed_collection", "run_fed"]

FEED_AHEAD: Final = 2  # tests in the pipe beyond the running one: its next item, and the one after


class FedShard(Protocol):
    """What the fed loop needs of the shard: send an event, serve a board, give its lease back."""

    def send(self, record: dict[str, Any]) -> None: ...

    def switch(self, board: Mapping[str, Any]) -> bool: ...

    def release(self) -> None: ...


def _lane(session: pytest.Session, first: str | None, read: Callable[[], dict[str, Any] | None],
          items: Mapping[str, pytest.Item], shard: FedShard) -> bool:  # fmt: skip
    """Run one lane's tests, ``first`` then the pipe's, up to its end; False when a test stopped the session."""

    def next_arg() -> str | None:
        command = read()
        return str(command["run"]) if command is not None and "run" in command else None

    pending = first
    while pending is not None:
        following = next_arg()
        item = items.get(pending)
        if item is None:
            shard.send({"event": "unknown", "nodeid": pending})
        else:
            nextitem = items.get(following) if following is not None else None
            item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.shouldfail or session.shouldstop:
                return False
        pending = following
    return True


def run_fed(session: pytest.Session, commands: BinaryIO, items: Mapping[str, pytest.Item], shard: FedShard) -> None:
    """Serve the lanes ``commands`` sends (``items`` by the argument that selects each) until the pipe's end or a
    test that stops the session."""

    def read() -> dict[str, Any] | None:
        line = commands.readline()
        command: dict[str, Any] | None = json.loads(line) if line else None
        return command

    while (command := read()) is not None:
        if "board" in command and not shard.switch(command["board"]):
            while (command := read()) is not None and "end" not in command:  # the lane's tests: not run here
                pass
        else:
            first = read() if "board" in command else command
            if not _lane(session, str(first["run"]) if first and "run" in first else None, read, items, shard):
                return
        shard.release()
        shard.send({"event": "idle"})


def fed_collection(plan: Plan, boards: Mapping[str, Board]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Per board, what a fed shard serving it collects: the test files and targets of every pair it may run (the
    union over the emulated boards, whose shards run any of their lanes)."""
    files: dict[str, set[str]] = {}
    targets: dict[str, set[str]] = {}
    for pair in (pair for pairs in plan.shards.values() for pair in pairs):
        for board in plan.eligible.get(pair.key, ()):
            files.setdefault(board, set()).add(pair.node_id.split("::")[0])
            targets.setdefault(board, set()).add(pair.target)
    emulated = [b for b in files if b in boards and boards[b].kind is BoardKind.EMULATED]
    pooled = (tuple(sorted(set().union(*(files[b] for b in emulated)))),
              tuple(sorted(set().union(*(targets[b] for b in emulated)))))  # fmt: skip
    return {b: pooled if b in emulated else (tuple(sorted(files[b])), tuple(sorted(targets[b]))) for b in files}


class Feeder:
    """The parent's end of one lane on a shard's command pipe: ``next_arg`` gives the next test (``None``: no more)."""

    def __init__(self, pipe: BinaryIO, next_arg: Callable[[], str | None]) -> None:
        self._pipe, self._next_arg = pipe, next_arg
        self.done = False  # the lane's end was sent, or the shard reads no more

    def send(self, command: Mapping[str, Any]) -> None:
        if self.done:
            return
        try:
            self._pipe.write((json.dumps(command) + "\n").encode())
        except BrokenPipeError:  # the shard ended (its session stopped, or it was killed): it reads no more
            self.done = True

    def start(self, board: Mapping[str, Any]) -> None:
        """Send the lane's board and fill the pipe: the first test and :data:`FEED_AHEAD` - 1 behind it."""
        self.send({"board": dict(board)})
        for _ in range(FEED_AHEAD):
            self.advance()

    def advance(self) -> None:
        """Send one more test, or the lane's end once there is none (a test started, or one was unknown)."""
        if self.done:
            return
        arg = self._next_arg()
        self.send({"end": True} if arg is None else {"run": arg})
        self.done = self.done or arg is None
