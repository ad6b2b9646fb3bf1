"""The engine on this host: shards are ``pytest`` processes of this host (:class:`LocalRunner`), and
:class:`LocalEngine` is the :class:`~tinyhil.device_farm.engine.FarmEngine` that runs them."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from tinyhil.device_farm.engine import DEFAULT_MAX_ATTEMPTS, FarmEngine, Result
from tinyhil.device_farm.engine.records import no_start, no_wait
from tinyhil.device_farm.health.states import HealthBook, ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board, BoardKind
from tinyhil.device_farm.planning import Plan
from tinyhil.device_farm.shard.parent import Event, ShardExit, ShardJob, ShardProcess

__all__ = ["LocalEngine", "LocalRunner"]


class LocalRunner:
    """Shards as ``pytest`` processes of this host (``command`` is the start of their command line), fed their
    lanes' tests over a pipe (:mod:`~tinyhil.device_farm.shard.feed`). A shard process for emulated boards
    collects the files of every emulated board's lanes once and, between lanes, waits for the next: at most
    ``workers`` are kept, so a run pays about ``workers`` start-ups, as pytest-xdist does. A real board's shard
    runs its lane only (its environment, such as ``CUDA_VISIBLE_DEVICES``, is fixed when a process starts)."""

    feeds = True

    def __init__(self, command: Sequence[str], cwd: Path, lease_dir: Path, env: Mapping[str, str],
                 workers: int = 1) -> None:  # fmt: skip
        self.command, self.cwd, self.lease_dir, self.env = list(command), cwd, lease_dir, dict(env)
        self.host = socket.gethostname()
        self.workers = workers
        self.started = 0  # shard processes started
        self._idle: list[tuple[tuple[object, ...], ShardProcess]] = []  # waiting for a lane, by what they collected
        self._busy = 0
        self._lock = threading.Lock()
        self._cancelled = False  # cancel(): every shard process ends, and any started after
        self._running: list[ShardProcess] = []  # started and not yet ended
        self._pool: ShardJob | None = None  # what the emulated boards' shards collect, when :meth:`collect` set it

    def _start(self, job: ShardJob) -> ShardProcess:
        process = ShardProcess(job, command=[*self.command, *job.pytest_args], cwd=self.cwd, lease_dir=self.lease_dir,
                               env=self.env, fed=True)  # fmt: skip
        with self._lock:
            self._running = [p for p in self._running if p.ended is None]
            self._running.append(process)
            cancelled = self._cancelled
        if cancelled:
            process.process.terminate()
        return process

    def cancel(self) -> None:
        """End every shard process (SIGTERM), running or waiting for a lane, and any started after, at once."""
        with self._lock:
            self._cancelled = True
            running = [p for p in self._running if p.ended is None]
        for process in running:
            process.process.terminate()

    def collect(self, job: ShardJob, pairs_path: Path, count: int) -> bool:
        """Start ``count`` (at most ``workers``) shards for the emulated boards at once, each collecting
        ``job.nodes`` (the suite's arguments) on ``job.targets``, the first also writing the pairs to ``pairs_path``
        (``--hil-collect``), so the run's collection is their start-up: True once it wrote them; False when it
        failed (nothing is kept: collect the usual way to report why)."""
        count = max(1, min(count, self.workers))
        first = self._start(replace(job, pytest_args=(*job.pytest_args, "--hil-collect", str(pairs_path))))
        others = [self._start(job) for _ in range(count - 1)]
        self.started += count
        if not first.wait_ready():
            for process in others:
                process.close()
            return False
        with self._lock:
            self._pool = job
            self._idle.extend((self._key(job), process) for process in [first, *others])
        return True

    def collect_suite(self, run_id: str, boards: Sequence[Board], suite: Sequence[str], targets: Sequence[str],
                      pytest_args: Sequence[str], test_timeout_s: float, pairs_path: Path) -> bool:  # fmt: skip
        """Collect ``suite`` on ``targets`` in the emulated boards' first shards (:meth:`collect`), when there are
        any: the run then pays one process start-up before its first test, as pytest-xdist does. False: collect
        apart (nothing is kept)."""
        emulated = [board for board in boards if board.kind is BoardKind.EMULATED]
        if not emulated:
            return False
        job = ShardJob(run_id, emulated[0], emulated[0].targets[0], tuple(suite), tuple(pytest_args),
                       test_timeout_s=test_timeout_s, targets=tuple(targets))  # fmt: skip
        if self.collect(job, pairs_path, sum(min(board.slots, self.workers) for board in emulated)):
            return True
        self.close()
        return False

    def _key(self, job: ShardJob) -> tuple[object, ...]:
        emulated = job.board.kind is BoardKind.EMULATED
        if emulated and self._pool is not None:  # the pool collected the whole suite: any emulated lane
            return ("pool",)
        return (job.nodes, job.targets, job.pytest_args, emulated)

    def _process(self, job: ShardJob) -> tuple[tuple[object, ...], ShardProcess]:
        key = self._key(job)
        if key == ("pool",) and self._pool is not None:
            job = replace(self._pool, board=job.board, target=job.target)
        with self._lock:
            if key[-1]:
                for n, (held, process) in enumerate(self._idle):
                    if held == key:
                        del self._idle[n]
                        self._busy += 1
                        return key, process
            while self._idle and len(self._idle) + self._busy >= self.workers:  # room for a new one
                self._idle.pop(0)[1].close()
            self._busy += 1
            self.started += 1
        try:
            return key, self._start(job)
        except BaseException:
            with self._lock:
                self._busy -= 1
            raise

    def run(self, job: ShardJob, on_event: Callable[[Event], None], next_arg: Callable[[], str | None]) -> ShardExit:
        key, process = self._process(job)
        kept = False
        try:
            done = process.run_lane(job, on_event, next_arg)
        finally:
            with self._lock:
                self._busy -= 1
                kept = process.ended is None and (key == ("pool",) or bool(key[-1]))
                if kept:
                    self._idle.append((key, process))
        if not kept and process.ended is None:
            done = process.close()
        return replace(done, host=self.host)

    def close(self) -> None:
        """End the shard processes waiting for a lane."""
        with self._lock:
            idle, self._idle = self._idle, []
        for _, process in idle:
            process.close()


class LocalEngine(FarmEngine):
    """The engine on this host: shards are ``pytest`` processes started with ``command`` in ``cwd``."""

    def __init__(
        self,
        boards: Sequence[Board],
        *,
        command: Sequence[str],
        cwd: Path,
        lease_dir: Path,
        run_id: str,
        workers: int,
        runner: LocalRunner | None = None,
        health: HealthBook | None = None,
        probe: Callable[[Board], ProbeResult] | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        lease_timeout_s: float | None = None,
        env: Mapping[str, str] | None = None,
        pytest_args: Sequence[str] = (),
        reruns: int = 0,
        test_timeout_s: float = 0.0,
    ) -> None:
        runner = runner or LocalRunner(command, cwd, lease_dir, os.environ if env is None else env, workers)
        self.command, self.cwd, self.lease_dir, self.env = runner.command, cwd, lease_dir, runner.env
        self.local = runner
        super().__init__(boards, runner, run_id=run_id, workers=workers, health=health, probe=probe,
                         max_attempts=max_attempts, lease_timeout_s=lease_timeout_s,
                         pytest_args=pytest_args, reruns=reruns, test_timeout_s=test_timeout_s)  # fmt: skip

    def run(self, plan: Plan, on_result: Callable[[Result], None], on_start: Callable[[str, str], None] = no_start,
            on_wait: Callable[[str, str], None] = no_wait) -> None:  # fmt: skip
        """:meth:`FarmEngine.run`, then the shard processes still waiting for a lane end."""
        try:
            super().run(plan, on_result, on_start, on_wait)
        finally:
            self.local.close()
