"""A farm across "hosts" on one machine: ``tinyhil farm scheduler`` and ``tinyhil farm worker`` processes on
127.0.0.1, each worker with its own hardware map, host name and state directory, each process in its own process
group so that killing one host kills its nanny, its worker and the shards they run. For trying the Dask engine
without a lab, for its tests and for its benchmark (``benchmarks/bench_farm_dask.py``); needs the farm extra.
Given ``certs`` (a directory made by ``tinyhil farm certs DIR --host scheduler --host NAME ...``) every process
speaks mutual TLS with its own certificate: ``scheduler.pem`` for the scheduler, ``NAME.pem`` for the worker
``NAME``.

    with loopback_cluster(Path("/tmp/lab")) as cluster:
        cluster.start_worker("host-a", hwmap_text_a)
        cluster.start_worker("host-b", hwmap_text_b)
        # tinyhil farm run --engine dask --scheduler <cluster.address> ...
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tinyhil.device_farm.cluster.security import FarmTLS

__all__ = ["TINYHIL", "LoopbackCluster", "emulated_board", "loopback_cluster"]

TINYHIL: Final = [sys.executable, "-m", "tinyhil.cli"]
SCHEDULER_NAME: Final = "scheduler"  # the scheduler's certificate in ``certs``


def emulated_board(board_id: str, target: str, host: str, slots: int = 1) -> str:
    """One ``[[board]]`` entry of an emulated board on ``host``."""
    return (f'[[board]]\nid = "{board_id}"\nkind = "emulated"\nhost = "{host}"\n'
            f'emulated = {{ target = "{target}", slots = {slots} }}\n\n')  # fmt: skip


def _kill_group(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@dataclass
class LoopbackCluster:
    """A scheduler and its workers; ``address`` is the scheduler's."""

    root: Path
    scheduler: subprocess.Popen[str] | None = None
    address: str = ""
    workers: dict[str, subprocess.Popen[str]] = field(default_factory=dict)
    certs: Path | None = None

    def tls(self, name: str) -> FarmTLS | None:
        """The TLS files of ``name`` (the scheduler's: :data:`SCHEDULER_NAME`), or ``None`` without ``certs``."""
        if self.certs is None:
            return None
        return FarmTLS(self.certs / "ca.pem", self.certs / f"{name}.pem", self.certs / f"{name}.key")

    def tls_options(self, name: str) -> list[str]:
        """``--tls-ca/--tls-cert/--tls-key`` for ``name``, or nothing without ``certs``."""
        tls = self.tls(name)
        return [] if tls is None else ["--tls-ca", str(tls.ca), "--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]

    def start_scheduler(self, *options: str) -> str:
        """Start the scheduler on a free port of 127.0.0.1, with ``options`` added; returns its address once it
        listens."""
        self.root.mkdir(parents=True, exist_ok=True)
        log_path = self.root / "scheduler.log"
        command = [*TINYHIL, "farm", "scheduler", "--port", "0", "--no-workers-timeout", "5", *options,
                   *self.tls_options(SCHEDULER_NAME)]  # fmt: skip
        with log_path.open("w") as log:
            self.scheduler = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True,
                                              start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.scheduler.poll() is None:
            found = re.search(r"Scheduler at:\s+((?:tcp|tls)://127\.0\.0\.1:\d+)", log_path.read_text())
            if found:
                self.address = found.group(1)
                return self.address
            time.sleep(0.05)
        raise RuntimeError(f"the scheduler never said where it listens; see {log_path}")

    def start_worker(self, host: str, hwmap: str, env: Mapping[str, str] | None = None, *options: str) -> None:
        """A farm worker named ``host`` with the map text ``hwmap`` and ``options`` added; returns once the
        scheduler lists it."""
        path = self.root / f"{host}.toml"
        path.write_text(hwmap)
        command = [*TINYHIL, "farm", "worker", "--scheduler", self.address, "--hwmap", str(path), "--name", host,
                   "--state", str(self.root / f"state-{host}"), *options, *self.tls_options(host)]  # fmt: skip
        full_env = {**os.environ, **(env or {})}
        with (self.root / f"{host}.log").open("a") as log:
            self.workers[host] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True,
                                                  start_new_session=True, env=full_env)  # fmt: skip
        self.wait_for(lambda names: host in names, f"worker {host} to register")

    def wait_for(self, check: Callable[[dict[str, dict[str, float]]], bool], what: str,
                 timeout_s: float = 90.0) -> None:  # fmt: skip
        """Wait until ``check`` holds for the workers online (name -> resources)."""
        from distributed import Client

        make: Any = Client
        tls = self.tls(SCHEDULER_NAME)
        security = tls.security() if tls is not None else None
        with make(self.address, timeout=30, set_as_default=False, security=security) as client:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                workers = client.scheduler_info(n_workers=-1)["workers"].values()
                names = {str(w.get("name")): dict(w.get("resources") or {}) for w in workers}
                if check(names):
                    return
                time.sleep(0.2)
        raise TimeoutError(f"timed out waiting for {what}; see the logs in {self.root}")

    def kill_worker(self, host: str) -> None:
        """SIGKILL the host's whole process group: its nanny, its worker and the shards they run."""
        _kill_group(self.workers.pop(host))

    def kill_scheduler(self) -> None:
        assert self.scheduler is not None
        _kill_group(self.scheduler)

    def close(self) -> None:
        for process in self.workers.values():
            _kill_group(process)
        if self.scheduler is not None:
            _kill_group(self.scheduler)


@contextmanager
def loopback_cluster(root: Path, *options: str, certs: Path | None = None) -> Iterator[LoopbackCluster]:
    """A scheduler started on a free port (with ``options`` added, and TLS from ``certs``), closed (every process
    killed) on exit."""
    cluster = LoopbackCluster(root, certs=certs)
    try:
        cluster.start_scheduler(*options)
        yield cluster
    finally:
        cluster.close()
