"""One shard as one ``pytest`` process on the host that holds its board: what it is, how it ran, and how it runs.

Both engines run shards this way: the local engine on its own host, the Dask engine inside the farm worker of
the board's host (:mod:`~tinyhil.device_farm.cluster.dask_worker`). The process loads
:mod:`~tinyhil.device_farm.shard.plugin`, which takes the board's lease and writes a JSON line per event (``start``,
``result``, ``lease-timeout``) to a pipe; each line goes to ``on_event`` as it arrives.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyhil.device_farm.collection import pytest_command
from tinyhil.device_farm.inventory.hwmap import Board, EmulatedLocator, KfdLocator, NvLocator
from tinyhil.device_farm.leases import DEFAULT_LEASE_TIMEOUT_S
from tinyhil.device_farm.shard.feed import Feeder
from tinyhil.device_farm.shard.infrastructure import killed_cause
from tinyhil.device_farm.shard.plugin import SHARD_ENV, ShardSpec
from tinyhil.device_farm.shard.watchdog import Backstop

__all__ = ["ShardExit", "ShardJob", "board_environment", "run_shard_process", "shard_command"]

Event = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ShardJob:
    """What to run: these node ids of one target on one board, for one run (plain data: it crosses hosts)."""

    run_id: str
    board: Board
    target: str
    nodes: tuple[str, ...]
    pytest_args: tuple[str, ...] = ()
    lease_timeout_s: float = DEFAULT_LEASE_TIMEOUT_S
    test_timeout_s: float = 0.0  # the run's per-test limit (--test-timeout); 0: none


@dataclass(frozen=True, slots=True)
class ShardExit:
    """How a shard ended: ``lost`` names the infrastructure cause when the shard did not end on its own (killed by
    a signal, its worker died, its board went away), ``board_gone`` says no worker offers the board any more, and
    ``timeout`` that its running test ran over its time limit (not the board's fault). ``host`` is where it ran."""

    returncode: int | None
    stderr: str = ""
    lost: str | None = None
    board_gone: bool = False
    host: str = ""
    timeout: str | None = None  # the running test was stopped at its time limit: its failure text, with the dump


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


def shard_command(run_dir: Path, pytest_args: Sequence[str]) -> list[str]:
    """The pytest command line of every shard of a run whose directory (rootdir, working directory) is
    ``run_dir``; the target and the node ids are appended to it. Failures keep pytest's long tracebacks
    (``--tb=long``) unless the run's pytest arguments, which come after, say another ``--tb``."""
    return [*pytest_command(run_dir), "-q", "-p", "no:xdist", "--tb=long", "-p", "tinyhil.device_farm.shard.plugin",
            *pytest_args]  # fmt: skip


def run_shard_process(
    job: ShardJob,
    *,
    command: Sequence[str],
    cwd: Path,
    lease_dir: Path,
    env: Mapping[str, str],
    on_event: Callable[[Event], None],
    feed: Callable[[], str | None] | None = None,
) -> ShardExit:
    """Run ``job`` as ``command --hil-target TARGET NODE...`` in ``cwd`` and return how it ended; every event the
    shard writes goes to ``on_event`` as it arrives (from this thread). With ``feed`` the shard collects ``job.nodes``
    (its lane's test files) and runs the tests ``feed`` gives, one call per test, until it gives ``None``
    (:mod:`~tinyhil.device_farm.shard.feed`); without it, it runs ``job.nodes``. A test over its time limit ends the
    shard (:mod:`~tinyhil.device_farm.shard.watchdog`): :attr:`ShardExit.timeout` then carries its failure text."""
    board = job.board
    read_fd, write_fd = os.pipe()
    commands_fd, feed_fd = os.pipe() if feed is not None else (-1, -1)
    dump_fd, dump_path = tempfile.mkstemp(prefix="tinyhil-shard-", suffix=".dump")
    os.close(dump_fd)
    options = board.locator.options_json if isinstance(board.locator, EmulatedLocator) else "{}"
    spec = ShardSpec(job.run_id, board.id, board.slots, job.target, str(lease_dir), job.lease_timeout_s, write_fd,
                     os.getpid(), options, commands_fd, job.test_timeout_s, dump_path)  # fmt: skip
    full_env = {**env, SHARD_ENV: spec.to_json(), **board_environment(board, job.target)}
    stderr_file = tempfile.TemporaryFile()  # noqa: SIM115  # closed below; a file never fills as a pipe can
    try:
        process = subprocess.Popen([*command, "--hil-target", job.target, *job.nodes], cwd=cwd, env=full_env,
                                   pass_fds=tuple(fd for fd in (write_fd, commands_fd) if fd >= 0),
                                   stdout=subprocess.DEVNULL, stderr=stderr_file)  # fmt: skip
    except BaseException:
        for fd in (read_fd, feed_fd):
            if fd >= 0:
                os.close(fd)
        stderr_file.close()
        Path(dump_path).unlink(missing_ok=True)
        raise
    finally:
        for fd in (write_fd, commands_fd):
            if fd >= 0:
                os.close(fd)
    feeder = Feeder(feed_fd, feed) if feed is not None else None
    backstop = Backstop(process)
    try:
        if feeder is not None:
            feeder.prime()
        with os.fdopen(read_fd, "rb") as events:
            for line in events:
                event = json.loads(line)
                backstop.see(event)
                on_event(event)
                if feeder is not None and event.get("event") in ("start", "unknown"):
                    feeder.advance()
        process.wait()
    finally:
        backstop.cancel()
        if feeder is not None:
            feeder.close()
        if process.poll() is None:  # on_event raised: the shard must not outlive its account
            process.kill()
            process.wait()
        stderr_file.seek(0)
        stderr = stderr_file.read().decode(errors="replace")
        stderr_file.close()
        dump = Path(dump_path).read_text(errors="replace")
        Path(dump_path).unlink(missing_ok=True)
    timeout = backstop.report(dump)
    return ShardExit(process.returncode, stderr, None if timeout else killed_cause(process.returncode),
                     timeout=timeout)  # fmt: skip
