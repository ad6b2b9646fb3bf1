"""The local engine: each lane of a plan runs its pairs as ``pytest`` subprocesses on this host, one at a time.

A shard is a ``pytest`` process over some pairs of one lane, with :mod:`~tinyhil.device_farm.shard_plugin`
loaded: it takes the board's lease, pins the target, and sends a start and a result line per test over a pipe, so
a crashing test takes down only its shard. At most ``workers`` shards run at once.

Outcomes follow :mod:`~tinyhil.device_farm.outcomes`. A test failure is final. An infrastructure failure (the
board lost, the lease timed out, the shard killed by a signal while a test ran) is recorded as a non-final attempt,
counted against the board's health (UNKNOWN: the lane probes it before its next shard, and a BAD board's lane
stops, handing its pairs to other lanes), and the pair is retried on another eligible board, up to
``max_attempts``; with no other board left, it is retried where it was, after the probe. Pairs a shard never
started go back to their lane without counting an attempt. Every result goes to ``on_result`` as it arrives.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tinyhil.device_farm.health import HealthBook, ProbeResult
from tinyhil.device_farm.hwmap import Board, EmulatedLocator, KfdLocator, NvLocator
from tinyhil.device_farm.outcomes import killed_cause
from tinyhil.device_farm.planner import Lane, Pair, Plan
from tinyhil.device_farm.shard_plugin import SHARD_ENV, ShardSpec
from tinyhil.errors import InvalidArgument

__all__ = ["DEFAULT_MAX_ATTEMPTS", "LocalEngine", "Result", "board_environment"]

DEFAULT_MAX_ATTEMPTS: Final = 3
DEFAULT_LEASE_TIMEOUT_S: Final = 60.0


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

    def record(self) -> dict[str, Any]:
        """The journal record of this result."""
        return {"kind": "result", **{name: getattr(self, name) for name in self.__slots__}}


def board_environment(board: Board, target: str) -> dict[str, str]:
    """What a shard's environment says about its board, for tests that drive it with their own stack:
    ``TINYHIL_BOARD`` and ``DEV`` always; on an NV board ``CUDA_VISIBLE_DEVICES`` (its UUID, else its PCI bus id);
    on a KFD board ``TINYHIL_KFD_GPU_ID`` (the topology's gpu_id) and ``ROCR_VISIBLE_DEVICES`` (ROCm's
    ``GPU-<unique_id in hex>`` form) where the map gives them."""
    env = {"TINYHIL_BOARD": board.id, "DEV": target}
    locator = board.locator
    if isinstance(locator, NvLocator):
        env["CUDA_VISIBLE_DEVICES"] = locator.uuid or locator.pci_bus_id or ""
    elif isinstance(locator, KfdLocator):
        if locator.gpu_id is not None:
            env["TINYHIL_KFD_GPU_ID"] = str(locator.gpu_id)
        if locator.unique_id is not None:
            env["ROCR_VISIBLE_DEVICES"] = f"GPU-{locator.unique_id:016x}"
    return env


@dataclass(frozen=True, slots=True)
class _Attempt:
    """What one attempt of a pair came to, as a shard reported it (or as the engine saw it end)."""

    outcome: str
    reason: str = ""
    infrastructure: str | None = None
    duration_s: float = 0.0
    started: float = 0.0
    finished: float = 0.0

    @classmethod
    def lost(cls, cause: str) -> _Attempt:
        """An attempt the infrastructure ended (``error``, with the cause as its reason)."""
        return cls("error", cause, cause)

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> _Attempt:
        return cls(event["outcome"], event.get("reason", ""), event.get("infrastructure"),
                   event.get("duration_s", 0.0), event.get("started", 0.0), event.get("finished", 0.0))  # fmt: skip


@dataclass(slots=True)
class _Retry:
    pair: Pair
    failed_on: str


@dataclass(slots=True)
class _State:
    queues: dict[Lane, deque[Pair]]
    retries: list[_Retry] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    outstanding: int = 0
    dead: set[str] = field(default_factory=set)
    inflight: dict[Lane, list[Pair]] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)  # keys with a final result


def _no_result(result: Result) -> None:
    """The result callback before :meth:`LocalEngine.run` sets one."""


def _no_start(board: str, nodeid: str) -> None:
    """The default start callback: nothing to show."""


class LocalEngine:
    """Runs plans on this host; ``command`` is the pytest command line the node ids are appended to."""

    def __init__(
        self,
        boards: Sequence[Board],
        *,
        command: Sequence[str],
        cwd: Path,
        lease_dir: Path,
        run_id: str,
        workers: int,
        health: HealthBook | None = None,
        probe: Callable[[Board], ProbeResult] | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        lease_timeout_s: float = DEFAULT_LEASE_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if type(workers) is not int or workers < 1:
            raise InvalidArgument(f"workers={workers!r}, expected an integer >= 1")
        if type(max_attempts) is not int or max_attempts < 1:
            raise InvalidArgument(f"max_attempts={max_attempts!r}, expected an integer >= 1")
        self.boards = {board.id: board for board in boards}
        self.command, self.cwd, self.lease_dir, self.run_id = list(command), cwd, lease_dir, run_id
        self.health, self.probe = health, probe
        self.max_attempts, self.lease_timeout_s = max_attempts, lease_timeout_s
        self.env = dict(os.environ if env is None else env)
        self.host = socket.gethostname()
        self._slots = threading.BoundedSemaphore(workers)
        self._cond = threading.Condition()
        self._plan = Plan()
        self._on_result: Callable[[Result], None] = _no_result
        self._on_start: Callable[[str, str], None] = _no_start

    # --- scheduling state: every method of this part runs under self._cond ---
    def _take(self, state: _State, lane: Lane) -> list[Pair] | None:
        """The next batch for ``lane``: its own pairs, else retries it may run; ``None`` when the run is over."""
        while True:
            if state.outstanding == 0 or lane.board in state.dead:
                return None
            own = state.queues[lane]
            batch = list(own) or [r.pair for r in state.retries if self._may_retry(state, r, lane.board)]
            if batch:
                own.clear()
                state.retries = [r for r in state.retries if r.pair not in batch]
                state.inflight[lane] = batch
                return batch
            self._cond.wait()

    def _alive(self, state: _State, pair: Pair) -> list[str]:
        return [b for b in self._plan.eligible[pair.key] if b not in state.dead]

    def _may_retry(self, state: _State, retry: _Retry, board: str) -> bool:
        eligible = self._alive(state, retry.pair)
        return board in eligible and (board != retry.failed_on or eligible == [board])

    def _report(self, state: _State, pair: Pair, board: str, attempt: int, done: _Attempt, final: bool) -> None:
        fields = (done.outcome, done.duration_s, done.reason, done.infrastructure, final, done.started, done.finished)
        self._on_result(Result(pair.key, pair.node_id, pair.target, board, self.host, attempt, *fields))
        if final:
            state.outstanding -= 1
            state.reported.add(pair.key)
        self._cond.notify_all()

    def _attempted(self, state: _State, pair: Pair, board: str, done: _Attempt) -> None:
        """Count an attempt; an infrastructure failure with attempts left is retried, anything else is final."""
        attempt = state.attempts[pair.key] = state.attempts.get(pair.key, 0) + 1
        retry = done.infrastructure is not None and attempt < self.max_attempts
        self._report(state, pair, board, attempt, done, final=not retry)
        if retry:
            state.retries.append(_Retry(pair, board))

    def _board_died(self, state: _State, board: str, why: str) -> None:
        """Take ``board`` out of the run: its pairs go to other lanes; pairs no board is left for end as errors."""
        state.dead.add(board)
        for lane, queue in state.queues.items():
            if lane.board == board:
                state.retries.extend(_Retry(pair, board) for pair in queue)
                queue.clear()
        for retry in [r for r in state.retries if not self._alive(state, r.pair)]:
            state.retries.remove(retry)
            done = _Attempt("error", f"no eligible board left ({board}: {why})", why)
            self._report(state, retry.pair, board, state.attempts.get(retry.pair.key, 1), done, final=True)
        self._cond.notify_all()

    # --- running ---
    def run(
        self, plan: Plan, on_result: Callable[[Result], None], on_start: Callable[[str, str], None] = _no_start
    ) -> None:
        """Run every routed pair of ``plan``, calling ``on_start(board, nodeid)`` as each test starts and
        ``on_result`` with each attempt as it ends (from the lanes' threads, one call at a time); returns when every
        pair has its final result."""
        self._plan, self._on_result, self._on_start = plan, on_result, on_start
        state = _State(queues={lane: deque(pairs) for lane, pairs in plan.shards.items()})
        state.outstanding = sum(len(pairs) for pairs in plan.shards.values())
        threads = [
            threading.Thread(target=self._lane, args=(state, lane), daemon=True, name=f"tinyhil-lane-{lane}")
            for lane in plan.shards
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _healthy(self, state: _State, board: Board) -> bool:
        """Probe ``board`` when its health says so; False (and the board out of the run) when it is not GOOD."""
        if self.health is None or self.probe is None:
            return True
        return self.health.ready(board, self.probe)

    def _lane(self, state: _State, lane: Lane) -> None:
        try:
            self._run_lane(state, lane)
        except BaseException as exc:  # never leave the other lanes waiting for pairs this one held
            with self._cond:
                held = [p for p in state.inflight.pop(lane, []) if p.key not in state.reported]
                state.retries.extend(_Retry(pair, lane.board) for pair in held)
                self._board_died(state, lane.board, f"engine error on this lane: {type(exc).__name__}: {exc}")
            raise

    def _run_lane(self, state: _State, lane: Lane) -> None:
        board = self.boards[lane.board]
        while True:
            with self._cond:
                batch = self._take(state, lane)
            if batch is None:
                return
            if not self._healthy(state, board):
                reason = self.health.record(board.id).reason if self.health is not None else "probe failed"
                with self._cond:
                    state.retries.extend(_Retry(pair, board.id) for pair in batch)
                    self._board_died(state, board.id, reason)
                return
            with self._slots:
                self._shard(state, lane, board, batch)

    def _shard(self, state: _State, lane: Lane, board: Board, batch: list[Pair]) -> None:
        """Run ``batch`` in one pytest process on ``board`` and account for every pair of it."""
        by_node = {pair.node_id: pair for pair in batch}
        target = batch[0].target
        read_fd, write_fd = os.pipe()
        options = board.locator.options_json if isinstance(board.locator, EmulatedLocator) else "{}"
        spec = ShardSpec(self.run_id, board.id, board.slots, target, str(self.lease_dir), self.lease_timeout_s,
                         write_fd, os.getpid(), options)  # fmt: skip
        env = {**self.env, SHARD_ENV: spec.to_json(), **board_environment(board, target)}
        command = [*self.command, "--hil-target", target, *by_node]
        process = subprocess.Popen(command, cwd=self.cwd, env=env, pass_fds=(write_fd,), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)  # fmt: skip
        os.close(write_fd)
        running: str | None = None
        done: set[str] = set()
        infrastructure: str | None = None
        with os.fdopen(read_fd, "rb") as events:
            for line in events:
                event = json.loads(line)
                with self._cond:
                    if event["event"] == "start" and event["nodeid"] in by_node:
                        running = event["nodeid"]
                        self._on_start(board.id, event["nodeid"])
                    elif event["event"] == "lease-timeout":  # every pair of the batch lost an attempt to it
                        infrastructure = f"lease timeout: {event['reason']}"
                        for pair in batch:
                            self._attempted(state, pair, board.id, _Attempt.lost(infrastructure))
                            done.add(pair.node_id)
                    elif event["event"] == "result" and event["nodeid"] in by_node:
                        running = None
                        done.add(event["nodeid"])
                        attempt = _Attempt.from_event(event)
                        self._attempted(state, by_node[event["nodeid"]], board.id, attempt)
                        infrastructure = attempt.infrastructure or infrastructure
        stderr = process.communicate()[1].decode(errors="replace")
        died = killed_cause(process.returncode)
        with self._cond:
            if running is not None:  # the shard ended inside a test
                cause = died or f"shard exited with status {process.returncode} during the test"
                self._attempted(state, by_node[running], board.id, _Attempt.lost(cause))
                done.add(running)
                infrastructure = infrastructure or cause
            left = [pair for pair in batch if pair.node_id not in done]
            if left and infrastructure is None and died is None:
                tail = stderr.strip().splitlines()[-1:] or [f"exit status {process.returncode}"]
                for pair in left:  # pytest refused them (a bad node id, a usage error): not the board's fault
                    self._attempted(state, pair, board.id, _Attempt("error", f"not run: {tail[0]}"))
                left = []
            state.queues[lane].extendleft(reversed(left))  # never started: back to the lane, no attempt counted
            self._cond.notify_all()
        if (infrastructure or died) and self.health is not None:
            self.health.record_infrastructure_failure(board.id, infrastructure or died or "")
