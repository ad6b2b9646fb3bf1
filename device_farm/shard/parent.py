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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyhil.device_farm.collection import pytest_command
from tinyhil.device_farm.inventory.hwmap import Board, EmulatedLocator, KfdLocator, NvLocator
from tinyhil.device_farm.leases import DEFAULT_LEASE_TIMEOUT_S
from tinyhil.device_farm.shard.infrastructure import killed_cause
from tinyhil.device_farm.shard.plugin import SHARD_ENV, ShardSpec
from tinyhil.device_farm.shard.served import served_shard

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


@dataclass(frozen=True, slots=True)
class ShardExit:
    """How a shard ended: ``lost`` names the infrastructure cause when the shard did not end on its own (killed by
    a signal, its worker died, its board went away), and ``board_gone`` says no worker offers the board any more.
    ``host`` is where it ran."""

    returncode: int | None
    stderr: str = ""
    lost: str | None = None
    board_gone: bool = False
    host: str = ""


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
    on_process: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> ShardExit:
    """Run ``job`` as ``command --hil-target TARGET NODE...`` (under ``tinyhil serve`` on a served board,
    :func:`~tinyhil.device_farm.shard.served.served_shard`) in ``cwd`` and return how it ended; every event the
    shard writes goes to ``on_event`` as it arrives (from this thread), and ``on_process`` gets the process once it
    started (to end it early: the run's deadline, Ctrl-C)."""
    board = job.board
    read_fd, write_fd = os.pipe()
    options = board.locator.options_json if isinstance(board.locator, EmulatedLocator) else "{}"
    argv, parent_pid = served_shard(board, [*command, "--hil-target", job.target, *job.nodes], os.getpid())
    spec = ShardSpec(job.run_id, board.id, board.slots, job.target, str(lease_dir), job.lease_timeout_s, write_fd,
                     parent_pid, options)  # fmt: skip
    full_env = {**env, SHARD_ENV: spec.to_json(), **board_environment(board, job.target)}
    try:
        # A session of its own: a terminal's Ctrl-C reaches the run, which ends its shards itself (on_process).
        process = subprocess.Popen(argv, cwd=cwd, env=full_env, pass_fds=(write_fd,), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    if on_process is not None:
        on_process(process)
    with os.fdopen(read_fd, "rb") as events:
        for line in events:
            on_event(json.loads(line))
    stderr = process.communicate()[1].decode(errors="replace")
    return ShardExit(process.returncode, stderr, killed_cause(process.returncode))
