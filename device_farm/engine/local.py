"""The engine on this host: shards are ``pytest`` processes of this host (:class:`LocalRunner`), and
:class:`LocalEngine` is the :class:`~tinyhil.device_farm.engine.FarmEngine` that runs them."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from tinyhil.device_farm.engine import DEFAULT_MAX_ATTEMPTS, FarmEngine
from tinyhil.device_farm.health.states import HealthBook, ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board
from tinyhil.device_farm.shard.parent import Event, ShardExit, ShardJob, run_shard_process

__all__ = ["LocalEngine", "LocalRunner"]


class LocalRunner:
    """Shards as ``pytest`` processes of this host (``command`` is the start of their command line)."""

    def __init__(self, command: Sequence[str], cwd: Path, lease_dir: Path, env: Mapping[str, str]) -> None:
        self.command, self.cwd, self.lease_dir, self.env = list(command), cwd, lease_dir, dict(env)
        self.host = socket.gethostname()
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[bytes]] = set()
        self._cancelled = False

    def _started(self, process: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._running.add(process)
            cancelled = self._cancelled
        if cancelled:
            process.terminate()

    def cancel(self) -> None:
        """End every running shard (SIGTERM), and any started after, at once."""
        with self._lock:
            self._cancelled = True
            running = list(self._running)
        for process in running:
            process.terminate()

    def run(self, job: ShardJob, on_event: Callable[[Event], None]) -> ShardExit:
        command = [*self.command, *job.pytest_args]
        try:
            done = run_shard_process(job, command=command, cwd=self.cwd, lease_dir=self.lease_dir, env=self.env,
                                     on_event=on_event, on_process=self._started)  # fmt: skip
        finally:
            with self._lock:
                self._running = {p for p in self._running if p.returncode is None}
        return replace(done, host=self.host)


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
        health: HealthBook | None = None,
        probe: Callable[[Board], ProbeResult] | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        lease_timeout_s: float | None = None,
        env: Mapping[str, str] | None = None,
        pytest_args: Sequence[str] = (),
        reruns: int = 0,
    ) -> None:
        runner = LocalRunner(command, cwd, lease_dir, os.environ if env is None else env)
        self.command, self.cwd, self.lease_dir, self.env = runner.command, cwd, lease_dir, runner.env
        super().__init__(boards, runner, run_id=run_id, workers=workers, health=health, probe=probe,
                         max_attempts=max_attempts, lease_timeout_s=lease_timeout_s,
                         pytest_args=pytest_args, reruns=reruns)  # fmt: skip
