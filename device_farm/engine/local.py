"""The engine on this host: shards are ``pytest`` processes of this host (:class:`LocalRunner`), and
:class:`LocalEngine` is the :class:`~tinyhil.device_farm.engine.FarmEngine` that runs them."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from tinyhil.device_farm.engine import DEFAULT_MAX_ATTEMPTS, FarmEngine
from tinyhil.device_farm.health.states import HealthBook, ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board
from tinyhil.device_farm.leases import DEFAULT_LEASE_TIMEOUT_S
from tinyhil.device_farm.shard.parent import Event, ShardExit, ShardJob, run_shard_process

__all__ = ["LocalEngine", "LocalRunner"]


class LocalRunner:
    """Shards as ``pytest`` processes of this host (``command`` is the start of their command line), each fed its
    lane's tests over a pipe (:mod:`~tinyhil.device_farm.shard.feed`): one start-up per lane."""

    feeds = True

    def __init__(self, command: Sequence[str], cwd: Path, lease_dir: Path, env: Mapping[str, str]) -> None:
        self.command, self.cwd, self.lease_dir, self.env = list(command), cwd, lease_dir, dict(env)
        self.host = socket.gethostname()

    def run(self, job: ShardJob, on_event: Callable[[Event], None],
            next_arg: Callable[[], str | None] | None = None) -> ShardExit:  # fmt: skip
        command = [*self.command, *job.pytest_args]
        done = run_shard_process(job, command=command, cwd=self.cwd, lease_dir=self.lease_dir, env=self.env,
                                 on_event=on_event, feed=next_arg)  # fmt: skip
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
        lease_timeout_s: float = DEFAULT_LEASE_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        pytest_args: Sequence[str] = (),
        test_timeout_s: float = 0.0,
    ) -> None:
        runner = LocalRunner(command, cwd, lease_dir, os.environ if env is None else env)
        self.command, self.cwd, self.lease_dir, self.env = runner.command, cwd, lease_dir, runner.env
        super().__init__(boards, runner, run_id=run_id, workers=workers, health=health, probe=probe,
                         max_attempts=max_attempts, lease_timeout_s=lease_timeout_s,
                         pytest_args=pytest_args, test_timeout_s=test_timeout_s)  # fmt: skip
