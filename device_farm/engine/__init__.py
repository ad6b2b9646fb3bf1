"""The farm's engine: each lane of a plan runs its pairs as shards, one at a time; where a shard runs is the
engine's runner.

A shard is a ``pytest`` process over some pairs of one lane (:mod:`~tinyhil.device_farm.shard.parent`): it takes the
board's lease, pins the target, and sends a start and a result event per test, so a crashing test takes down only its
shard. The local runner (:mod:`~tinyhil.device_farm.engine.local`) starts it on this host; the Dask runner in the farm
worker of the board's host (:mod:`~tinyhil.device_farm.engine.dask_runner`). At most ``workers`` shards run at once
(:mod:`~tinyhil.device_farm.engine.slots`), the lane with the most planned work first. The local runner's shards are
fed: a lane's shard is sent its tests as it goes, its own and then retries it may run, and one process serves lane
after lane (:mod:`~tinyhil.device_farm.shard.feed`).

A test over its time limit (``test_timeout_s``, or its ``hil`` marker's ``timeout``) is stopped by its shard's
watchdog (:mod:`~tinyhil.device_farm.shard.watchdog`) and reported failed with every thread's stack: the test's fault,
never retried nor counted against the board; the board is probed before the lane goes on in a fresh shard.

Outcomes follow :mod:`~tinyhil.device_farm.shard.infrastructure`. A test failure is final, unless ``reruns`` allows
it more attempts: then it is a non-final attempt and the pair runs again, by the path an infrastructure failure takes
(the board's health untouched: a failing test is not the board's fault), up to ``reruns`` more times. An
infrastructure failure (the board lost, the shard or its worker killed while a test ran) is recorded as a non-final
attempt (a killed test's from when its start event says it started to when the engine learned of the loss),
counted against the board's health (UNKNOWN: the lane probes it before its next shard; the health book's
``bad_after``-th in a row makes it BAD at once; a BAD board's lane stops, handing its pairs to other lanes), and the
pair is retried on another eligible board, up to ``max_attempts``;
with no other board left, it is retried where it was, after the probe. Pairs a shard never started go back to their lane
without counting an attempt; a board no worker offers any more leaves the run like a BAD one. Every result goes to
``on_result`` as it arrives, at most one final result per pair. A runner that raises :class:`EngineLost` (the Dask
scheduler went away) stops the whole run: no further result is reported, and :meth:`FarmEngine.run` raises it once the
lanes have stopped. :meth:`FarmEngine.stop` (the run's output closed) starts no further shard and feeds no further
test: the running ones finish and report, and :meth:`FarmEngine.run` returns with the pairs no shard ran left without
a result (:attr:`FarmEngine.stopped` says why). :meth:`FarmEngine.stop` with ``kill`` (the run's deadline, Ctrl-C)
also ends the running shards through the runner's ``cancel`` (a runner without one lets them finish): the tests they
were running are left without a result, with no attempt counted and nothing charged to their boards, for
``--resume`` to run.

Waiting for a busy board is not a fault: a shard (or a probe) waits for the board's lease up to ``lease_timeout_s``
(``None``: as long as it takes), ``on_wait`` hears once that it waits, and nothing is charged to the board. A board
still busy when that bound runs out leaves the run like a BAD one, its health untouched.

The engine's state is updated before ``on_result`` is called, so a callback that raises never leaves a result
reported but uncounted, and a pair that no board is left for is reported on the board it was routed to or last
failed on, never on the lane that happened to notice.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final, cast

from tinyhil.device_farm.engine.records import (
    Attempt,
    CancellingRunner,
    EngineLost,
    FeedingRunner,
    Result,
    Retry,
    RunState,
    ShardRunner,
    no_result,
    no_start,
    no_wait,
)
from tinyhil.device_farm.engine.slots import SlotGate
from tinyhil.device_farm.health.states import HealthBook, HealthState, ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board
from tinyhil.device_farm.leases import LeaseTimeout, describe_holders
from tinyhil.device_farm.planning import Lane, Pair, Plan
from tinyhil.device_farm.shard.feed import fed_collection
from tinyhil.device_farm.shard.parent import Event, ShardExit, ShardJob
from tinyhil.errors import InvalidArgument
from tinyhil.fixtures.outcomes import FAILING, cap_text

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "CancellingRunner",
    "EngineLost",
    "FarmEngine",
    "FeedingRunner",
    "Result",
    "ShardRunner",
]

DEFAULT_MAX_ATTEMPTS: Final = 3
PROBE_RETRY_S: Final = 1.0  # how often a lane asks again to probe a busy board (a farm worker's probe does not wait)


def _check_count(name: str, value: object) -> None:
    if type(value) is not int or value < 1:
        raise InvalidArgument(f"{name}={value!r}, expected an integer >= 1")


class FarmEngine:
    """Runs plans through ``runner``: lanes, retries, health and one final result per pair."""

    def __init__(
        self,
        boards: Sequence[Board],
        runner: ShardRunner | FeedingRunner,
        *,
        run_id: str,
        workers: int,
        health: HealthBook | None = None,
        probe: Callable[[Board], ProbeResult] | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        lease_timeout_s: float | None = None,
        pytest_args: Sequence[str] = (),
        reruns: int = 0,
        test_timeout_s: float = 0.0,
    ) -> None:
        _check_count("workers", workers)
        _check_count("max_attempts", max_attempts)
        if type(reruns) is not int or reruns < 0:
            raise InvalidArgument(f"reruns={reruns!r}, expected an integer >= 0")
        self.boards = {board.id: board for board in boards}
        self.runner, self.run_id, self.pytest_args = runner, run_id, tuple(pytest_args)
        self.health, self.probe = health, probe
        self.max_attempts, self.lease_timeout_s, self.reruns = max_attempts, lease_timeout_s, reruns
        self.test_timeout_s = test_timeout_s  # every test's limit unless its hil marker says another; 0: none
        self.slots = SlotGate(workers)  # shard processes at once
        self.shards_started: dict[Lane, int] = {}  # shards each lane ran (a fed shard process may serve several)
        self._collect: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}  # board -> a fed shard's files, targets
        self._cond = threading.Condition()
        self._plan = Plan()
        self._on_result: Callable[[Result], None] = no_result
        self._on_start: Callable[[str, str], None] = no_start
        self._on_wait: Callable[[str, str], None] = no_wait
        self.stopped: str | None = None  # why stop() was called; no shard starts after it
        self.killed = False  # stop(kill=True): the running shards were ended; their tests count no attempt

    # --- scheduling state: every method of this part runs under self._cond ---
    def _take(self, state: RunState, lane: Lane) -> list[Pair] | None:
        """The next batch for ``lane``: its own pairs, else retries it may run; ``None`` when the run is over."""
        while True:
            if state.outstanding == 0 or lane.board in state.dead or state.lost is not None or self.stopped:
                return None
            own = state.queues[lane]
            batch = list(own) or [r.pair for r in state.retries if self._may_retry(state, r, lane.board)]
            if batch:
                own.clear()
                state.retries = [r for r in state.retries if r.pair not in batch]
                state.inflight[lane] = batch
                return batch
            self._cond.wait()

    def _take_more(self, state: RunState, lane: Lane, target: str) -> Pair | None:
        """The next pair of ``target`` for ``lane``'s running fed shard, without waiting: its own, else a retry it
        may run, else the last queued pair its board can run of the lane with the most queued, never one already
        attempted (a lane that runs out takes work from those behind it, as pytest-xdist's load scheduling does; a
        retry stays where the retry rule put it); ``None``: none."""
        if state.outstanding == 0 or lane.board in state.dead or state.lost is not None or self.stopped:
            return None
        own = state.queues[lane]
        pair = next((p for p in own if p.target == target), None)
        if pair is not None:
            own.remove(pair)
        elif (retry := next((r for r in state.retries if r.pair.target == target
                             and self._may_retry(state, r, lane.board)), None)) is not None:  # fmt: skip
            state.retries.remove(retry)
            pair = retry.pair
        else:
            for other in sorted(state.queues, key=lambda other: -len(state.queues[other])):
                queue = state.queues[other]
                pair = next((p for p in reversed(queue) if p.target == target and p.key not in state.attempts
                             and lane.board in self._plan.eligible.get(p.key, ())), None)  # fmt: skip
                if pair is not None:
                    queue.remove(pair)
                    break
        if pair is not None:
            state.inflight.setdefault(lane, []).append(pair)
        return pair

    def _alive(self, state: RunState, pair: Pair) -> list[str]:
        return [b for b in self._plan.eligible[pair.key] if b not in state.dead]

    def _may_retry(self, state: RunState, retry: Retry, board: str) -> bool:
        eligible = self._alive(state, retry.pair)
        return board in eligible and (board != retry.failed_on or eligible == [board])

    def _report(self, state: RunState, pair: Pair, where: tuple[str, str], attempt: int, done: Attempt,
                final: bool) -> None:  # fmt: skip
        if state.lost is not None or pair.key in state.reported:  # stopped, or a late duplicate: never twice
            return
        board, host = where
        if final:  # counted before the callback runs: a callback that raises cannot make a pair run twice
            state.outstanding -= 1
            state.reported.add(pair.key)
        self._cond.notify_all()
        result = Result(pair.key, pair.name, pair.target, board, host, attempt, done.outcome, done.duration_s,
                        done.reason, done.infrastructure, final, done.started, done.finished, done.bundle,
                        done.trace, **done.details)  # fmt: skip
        self._call(state, self._on_result, result)

    def _call(self, state: RunState, callback: Callable[..., None], *args: Any) -> None:
        """Call the caller's ``callback``; one that raises stops the run (:meth:`run` raises it at its end) instead
        of killing the lane in the middle of its accounting."""
        try:
            callback(*args)
        except Exception as exc:
            state.failed = state.failed or exc
            self.stopped = self.stopped or f"a result callback raised {type(exc).__name__}: {exc}"
            self._cond.notify_all()

    def _attempted(self, state: RunState, pair: Pair, where: tuple[str, str], done: Attempt) -> None:
        """Count an attempt; an infrastructure failure with attempts left is retried, anything else is final."""
        if state.lost is not None or pair.key in state.reported:
            return
        attempt = state.attempts[pair.key] = state.attempts.get(pair.key, 0) + 1
        retry = done.infrastructure is not None and attempt < self.max_attempts
        if done.infrastructure is None and done.outcome in FAILING and state.reruns.get(pair.key, 0) < self.reruns:
            state.reruns[pair.key] = state.reruns.get(pair.key, 0) + 1
            retry = True
        self._report(state, pair, where, attempt, done, final=not retry)
        if retry:
            state.retries.append(Retry(pair, where[0]))
        self._count_health(state, where[0], done.infrastructure)

    def _count_health(self, state: RunState, board: str, infrastructure: str | None) -> None:
        """Tell the health book how the board did; a board it finds BAD leaves the run at once."""
        if self.health is None or board not in self.boards:
            return
        if infrastructure is None:
            self.health.record_carried(board)
            return
        record = self.health.record_infrastructure_failure(board, infrastructure)
        if record.state is HealthState.BAD and board not in state.dead:
            self._board_died(state, board, record.reason)

    def _board_died(self, state: RunState, board: str, why: str) -> None:
        """Take ``board`` out of the run: its pairs go to other lanes; pairs no board is left for end as errors."""
        state.dead.add(board)
        for lane, queue in state.queues.items():
            if lane.board == board:
                state.retries.extend(Retry(pair, board) for pair in queue)
                queue.clear()
        for retry in [r for r in state.retries if not self._alive(state, r.pair)]:
            state.retries.remove(retry)
            done = Attempt("error", f"no eligible board left ({board}: {why})", why)
            where = (retry.failed_on, self.runner.host)  # where it was routed or last failed, not this board
            self._report(state, retry.pair, where, state.attempts.get(retry.pair.key, 1), done, final=True)
        self._cond.notify_all()

    def stop(self, reason: str, *, kill: bool = False) -> None:
        """Start no further shard (the run's output closed, say): running shards finish and report their results;
        :meth:`run` then returns, leaving the pairs no shard ran without a result. With ``kill`` (a deadline, Ctrl-C)
        the running shards are ended too, where the runner can (``cancel``), and the tests they were running are left
        without a result. Safe from any thread, and from an ``on_result`` or ``on_start`` callback."""
        with self._cond:
            self.stopped = self.stopped or reason
            cancel = getattr(self.runner, "cancel", None) if kill and not self.killed else None
            self.killed = self.killed or cancel is not None
            self._cond.notify_all()
        if cancel is not None:
            cancel()

    # --- running ---
    def run(
        self,
        plan: Plan,
        on_result: Callable[[Result], None],
        on_start: Callable[[str, str], None] = no_start,
        on_wait: Callable[[str, str], None] = no_wait,
    ) -> None:
        """Run every routed pair of ``plan``, calling ``on_start(board, nodeid)`` as each test starts,
        ``on_wait(board, holders)`` when a shard starts waiting for its busy board, and ``on_result`` with each
        attempt as it ends (from the lanes' threads, one call at a time); returns when every pair has its final
        result, or once the shards running at :meth:`stop` have ended.

        Raises:
            EngineLost: the runner lost its engine; the results reported before stand, nothing after.
        """
        self._plan, self._on_result, self._on_start, self._on_wait = plan, on_result, on_start, on_wait
        self._collect = fed_collection(plan, self.boards)
        state = RunState(queues={lane: deque(pairs) for lane, pairs in plan.shards.items()})
        state.outstanding = sum(len(pairs) for pairs in plan.shards.values())
        threads = [
            threading.Thread(target=self._lane, args=(state, lane), daemon=True, name=f"tinyhil-lane-{lane}")
            for lane in plan.shards
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join()
        except KeyboardInterrupt:  # Ctrl-C: end the shards, wait for the lanes to account for them, then say so
            self.stop("interrupted (Ctrl-C)", kill=True)
            for thread in threads:
                thread.join()
            raise
        if state.lost is not None:
            raise state.lost
        if state.failed is not None:
            raise state.failed

    def _healthy(self, state: RunState, board: Board) -> bool:
        """Probe ``board`` when its health says so; False (and the board out of the run) when it is not GOOD.

        A probe that found the board busy (it raised :class:`LeaseTimeout`: a farm worker's probe does not wait) is
        asked again every :data:`PROBE_RETRY_S`, the wait said once through ``on_wait``, until ``lease_timeout_s``;
        past that bound the ``LeaseTimeout`` propagates and the board leaves the run, its health untouched."""
        if self.health is None or self.probe is None:
            return True
        started, said = time.monotonic(), False
        while True:
            try:
                return self.health.ready(board, self.probe)
            except LeaseTimeout as exc:
                bound = self.lease_timeout_s
                if self.stopped or (bound is not None and time.monotonic() - started >= bound):
                    raise
                if not said:
                    with self._cond:
                        self._call(state, self._on_wait, board.id, describe_holders(exc.holders))
                    said = True
                time.sleep(PROBE_RETRY_S)

    def _lane(self, state: RunState, lane: Lane) -> None:
        try:
            self._run_lane(state, lane)
        except EngineLost as exc:
            with self._cond:
                state.lost = state.lost or exc
                self._cond.notify_all()
        except BaseException as exc:  # never leave the other lanes waiting for pairs this one held
            with self._cond:
                held = [p for p in state.inflight.pop(lane, []) if p.key not in state.reported]
                state.retries.extend(Retry(pair, lane.board) for pair in held)
                self._board_died(state, lane.board, f"engine error on this lane: {type(exc).__name__}: {exc}")
            raise

    def _run_lane(self, state: RunState, lane: Lane) -> None:
        board = self.boards[lane.board]
        load = self._plan.loads.get(lane, 0.0)
        feeds = bool(getattr(self.runner, "feeds", False))
        while True:
            with self._cond:
                batch = self._take(state, lane)
                if batch is not None and feeds:  # fed one at a time from the queue, where lanes that run out find them
                    state.queues[lane].extendleft(reversed(batch))
                    state.inflight[lane] = []
            if batch is None:
                return
            try:
                healthy = self._healthy(state, board)
            except LeaseTimeout as exc:  # busy past the wait bound: the run goes on without it, no fault counted
                with self._cond:
                    state.retries.extend(Retry(pair, board.id) for pair in batch)
                    self._board_died(state, board.id, f"busy: {exc}")
                return
            if not healthy:
                reason = self.health.record(board.id).reason if self.health is not None else "probe failed"
                with self._cond:
                    state.retries.extend(Retry(pair, board.id) for pair in batch)
                    self._board_died(state, board.id, reason)
                return
            with self.slots.held(load):
                if self.stopped:  # stopped while this lane waited for a slot: its batch stays without results
                    return
                timed_out = self._shard(state, lane, board, batch)
            if timed_out and self.health is not None and self.probe is not None:  # a hung test may wedge a board
                self.health.record_probe(board.id, self.probe(board))

    def _shard(self, state: RunState, lane: Lane, board: Board, batch: list[Pair]) -> bool:
        """Run the pairs of ``batch``'s first target as one shard on ``board`` (a runner that ``feeds`` is given
        more as the shard goes, :meth:`_take_more`) and account for every pair; the others go back to the lane.
        True when a test ran over its time limit."""
        target = batch[0].target
        feeds = bool(getattr(self.runner, "feeds", False))
        mine = [] if feeds else [pair for pair in batch if pair.target == target]  # a fed shard takes its own
        rest = [] if feeds else [pair for pair in batch if pair.target != target]
        account = _ShardAccount(self, state, lane, board, target, mine)
        nodes, targets = self._collect.get(board.id, ((), ())) if feeds else (tuple(account.by_node), ())
        job = ShardJob(self.run_id, board, target, nodes, self.pytest_args, self.lease_timeout_s,
                       self.test_timeout_s, targets)  # fmt: skip
        self.shards_started[lane] = self.shards_started.get(lane, 0) + 1
        if feeds:
            end = cast(FeedingRunner, self.runner).run(job, account.event, account.next_arg)
        else:
            end = cast(ShardRunner, self.runner).run(job, account.event)
        with self._cond:
            account.end(end)
            back = account.left + rest
            state.queues[lane].extendleft(reversed(back))  # never started: back to the lane, no attempt
            if end.board_gone:
                self._board_died(state, board.id, end.lost or "no worker offers it")
            elif account.busy is not None:  # the lease wait ran out: the board leaves the run, its health untouched
                self._board_died(state, board.id, f"busy: {account.busy}")
            elif board.id in state.dead and account.left:  # it went BAD mid-shard: what it never started moves on
                why = self.health.record(board.id).reason if self.health is not None else "left the run"
                self._board_died(state, board.id, why)
            elif end.lost is not None and account.infrastructure is None and not self.killed:  # killed between
                # tests (not by the run's own stop): still the board's
                self._count_health(state, board.id, end.lost)
            self._cond.notify_all()
        return end.timeout is not None


class _ShardAccount:
    """One shard's events as they arrive: which test runs, which are done, and what they came to."""

    def __init__(self, engine: FarmEngine, state: RunState, lane: Lane, board: Board, target: str,
                 batch: list[Pair]) -> None:  # fmt: skip
        self.engine, self.state, self.lane, self.board, self.target = engine, state, lane, board, target
        self.by_node = {pair.node_id: pair for pair in batch}  # a fed shard's grow as it is fed
        self.host = engine.runner.host
        self.running: str | None = None
        self.started: dict[str, float] = {}  # node id -> when its start event says it started (Unix time)
        self.done: set[str] = set()
        self.infrastructure: str | None = None
        self.busy: str | None = None  # the lease wait ran out (not a fault)
        self.left: list[Pair] = []
        self.closed = False  # feed no more (the lease timed out)

    def next_arg(self) -> str | None:
        """The next test for a fed shard (:meth:`FarmEngine._take_more`); ``None``: no more."""
        with self.engine._cond:
            if self.engine.stopped or self.closed:
                return None
            pair = self.engine._take_more(self.state, self.lane, self.target)
            if pair is None:
                return None
            self.by_node[pair.node_id] = pair
            return pair.node_id

    def _lost(self, nodeid: str, cause: str) -> None:
        if self.engine.killed:  # the run ended it (deadline, Ctrl-C): no attempt, nothing on the board
            return
        now = time.time()  # a killed test sends no result: its attempt ends when the engine learns of the loss
        attempt = Attempt.lost(cause, self.started.get(nodeid, now), now)
        self.engine._attempted(self.state, self.by_node[nodeid], (self.board.id, self.host), attempt)
        self.done.add(nodeid)
        self.infrastructure = self.infrastructure or cause

    def event(self, event: Event) -> None:
        with self.engine._cond:
            kind, nodeid = event["event"], event.get("nodeid")
            if kind == "host":  # where the shard runs (the Dask runner says so before anything else)
                self.host = str(event["host"])
            elif kind == "start" and nodeid in self.by_node and nodeid not in self.done:
                self.running = nodeid
                self.started[nodeid] = float(event.get("time") or time.time())
                self.engine._call(self.state, self.engine._on_start, self.board.id, self.by_node[nodeid].name)
            elif kind == "lost" and self.running is not None:  # the test's process died; the shard goes on
                self._lost(self.running, str(event["cause"]))
                self.running = None
            elif kind == "waiting":  # the board is busy: said once, never counted against it
                self.engine._call(self.state, self.engine._on_wait, self.board.id, str(event.get("holders", "")))
            elif kind == "lease-timeout":  # still busy at the wait bound: the pairs go elsewhere, no attempt counted
                self.busy = str(event["reason"])
                self.closed = True  # a fed shard gets no further test of this lane
            elif kind == "unknown" and nodeid in self.by_node and nodeid not in self.done:  # not collected there
                self.done.add(nodeid)
                done = Attempt("error", f"not run: the shard on {self.board.id} did not collect {nodeid}")
                self.engine._attempted(self.state, self.by_node[nodeid], (self.board.id, self.host), done)
            elif kind == "result" and nodeid in self.by_node and nodeid not in self.done:
                self.running = None
                self.done.add(nodeid)
                attempt = Attempt.from_event(event)
                self.engine._attempted(self.state, self.by_node[nodeid], (self.board.id, self.host), attempt)
                self.infrastructure = attempt.infrastructure or self.infrastructure

    def end(self, end: ShardExit) -> None:
        """Account for the pairs the events did not settle (under the engine's lock)."""
        self.host = end.host or self.host
        if self.engine.killed:  # ended by the run: every pair not done stays without a result, with no attempt
            self.left = [pair for node, pair in self.by_node.items() if node not in self.done]
            return
        if self.running is not None and end.timeout is not None:  # the watchdog stopped it: the test's failure
            finished = time.time()
            started = self.started.get(self.running, finished)
            done = Attempt("failed", end.timeout.splitlines()[0], None, finished - started, started, finished,
                            details={"longrepr": cap_text(end.timeout)})  # fmt: skip
            self.engine._attempted(self.state, self.by_node[self.running], (self.board.id, self.host), done)
            self.done.add(self.running)
        elif self.running is not None:  # the shard ended inside a test
            self._lost(self.running, end.lost or f"shard exited with status {end.returncode} during the test")
        left = [pair for node, pair in self.by_node.items() if node not in self.done]
        if left and self.infrastructure is None and end.lost is None and end.timeout is None and self.busy is None:
            tail = end.stderr.strip().splitlines()[-1:] or [f"exit status {end.returncode}"]
            for pair in left:  # pytest refused them (a bad node id, a usage error): not the board's fault
                where = (self.board.id, self.host)
                self.engine._attempted(self.state, pair, where, Attempt("error", f"not run: {tail[0]}"))
            left = []
        self.left = left
