"""What the farm engine and its runners exchange: a pair's :class:`Result` (one attempt, as the journal keeps it),
an :class:`Attempt` as a shard reported it, the runner protocols (:class:`ShardRunner`, :class:`FeedingRunner`,
:class:`CancellingRunner`), :class:`EngineLost`, and the callbacks a run starts with."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tinyhil.device_farm.planning import Lane, Pair
from tinyhil.device_farm.shard.parent import Event, ShardExit, ShardJob
from tinyhil.errors import TinyHilError
from tinyhil.fixtures.outcomes import classify

__all__ = [
    "Attempt",
    "CancellingRunner",
    "EngineLost",
    "FeedingRunner",
    "Result",
    "Retry",
    "RunState",
    "ShardRunner",
    "no_result",
    "no_start",
    "no_wait",
]


@dataclass(frozen=True, slots=True)
class Result:
    """One attempt of one pair; ``final`` is False for an infrastructure failure that is retried."""

    key: str
    nodeid: str
    target: str
    board: str
    host: str
    attempt: int
    outcome: str
    duration_s: float
    reason: str = ""
    infrastructure: str | None = None
    final: bool = True
    started: float = 0.0
    finished: float = 0.0
    bundle: str | None = None  # the failing test's reproduction bundle (--hil-repro-dir), when its shard wrote one
    trace: str | None = None  # the USB trace that bundle keeps, when it keeps one
    longrepr: str = ""  # a failure's traceback and captured output (capped: tinyhil.fixtures.outcomes)
    stdout: str = ""
    stderr: str = ""
    log: str = ""

    def record(self) -> dict[str, Any]:
        """The journal record of this result."""
        return {"kind": "result", **{name: getattr(self, name) for name in self.__slots__}}


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one attempt of a pair came to, as a shard reported it (or as the engine saw it end)."""

    outcome: str
    reason: str = ""
    infrastructure: str | None = None
    duration_s: float = 0.0
    started: float = 0.0
    finished: float = 0.0
    bundle: str | None = None
    trace: str | None = None
    details: Mapping[str, str] = field(default_factory=dict)  # a failure's longrepr, stdout, stderr and log

    @classmethod
    def lost(cls, cause: str, started: float, finished: float) -> Attempt:
        """An attempt the infrastructure ended (``error``, with the cause as its reason) that ran from ``started``
        (when its test started; when it was lost, for a test that never started) to ``finished``, Unix times."""
        return cls("error", cause, cause, max(finished - started, 0.0), started, finished)

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> Attempt:
        """A shard's ``result`` event: its phases' serialized reports, classified by the one rule."""
        test = classify(event.get("reports", ()))
        return cls(test.outcome, test.reason, event.get("infrastructure"), test.duration_s, event.get("started", 0.0),
                   event.get("finished", 0.0), event.get("bundle"), event.get("trace"),
                   test.details())  # fmt: skip


class EngineLost(TinyHilError, RuntimeError):
    """The engine itself went away mid-run (the Dask scheduler): the run stops; its journal keeps what arrived."""


class ShardRunner(Protocol):
    """Where shards run: ``run`` runs one and returns how it ended, passing each of its events to ``on_event`` as
    it arrives; ``host`` is where shards run when no event says otherwise. A runner whose ``feeds`` attribute is
    true is called ``run(job, on_event, next_arg)`` instead (:class:`FeedingRunner`): its shard, which collected
    ``job.nodes`` (test files) on ``job.targets``, runs the tests ``next_arg`` gives until it gives ``None``, and
    may serve other lanes before and after (:mod:`~tinyhil.device_farm.shard.feed`)."""

    host: str

    def run(self, job: ShardJob, on_event: Callable[[Event], None]) -> ShardExit:
        """Run ``job``; raises :class:`EngineLost` when the run cannot go on at all."""


class CancellingRunner(ShardRunner, Protocol):
    """A runner that can end its running shards: ``cancel`` kills them, and any it starts after."""

    def cancel(self) -> None:
        """End every running shard now (from any thread); shards started after end at once."""


class FeedingRunner(Protocol):
    """A :class:`ShardRunner` whose shards are fed their tests (``feeds`` is true)."""

    host: str
    feeds: bool

    def run(self, job: ShardJob, on_event: Callable[[Event], None], next_arg: Callable[[], str | None]) -> ShardExit:
        """Run ``job``'s shard over the tests ``next_arg`` gives until it gives ``None``."""


def no_result(result: Result) -> None:
    """The result callback before :meth:`FarmEngine.run` sets one."""


def no_start(board: str, nodeid: str) -> None:
    """The default start callback: nothing to show."""


def no_wait(board: str, holders: str) -> None:
    """The default wait callback: nothing to show."""


@dataclass(slots=True)
class Retry:
    """A pair to run again, and the board its last attempt failed on."""

    pair: Pair
    failed_on: str


@dataclass(slots=True)
class RunState:
    """A run's bookkeeping in the engine: the lanes' queues, the retries, attempts and reruns per pair."""

    queues: dict[Lane, deque[Pair]]
    retries: list[Retry] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    reruns: dict[str, int] = field(default_factory=dict)  # test failures rerun, per pair (--reruns)
    outstanding: int = 0
    dead: set[str] = field(default_factory=set)
    inflight: dict[Lane, list[Pair]] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)  # keys with a final result
    lost: EngineLost | None = None  # the run stopped: nothing more is reported
    failed: Exception | None = None  # what a caller's callback raised (the run stopped)
