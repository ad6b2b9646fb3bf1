"""One shard as one ``pytest`` process on the host that holds its board: what it is, how it ran, and how it runs.

Both engines run shards this way: the local engine on its own host, fed lane after lane (:class:`ShardProcess`,
:mod:`~tinyhil.device_farm.shard.feed`), the Dask engine inside the farm worker of the board's host, given its node
ids (:func:`run_shard_process`, :mod:`~tinyhil.device_farm.cluster.dask_worker`). The process loads
:mod:`~tinyhil.device_farm.shard.plugin`, which takes the board's lease and writes a JSON line per event (``start``,
``waiting``, ``result``, ``lease-timeout``) to a pipe; each line goes to ``on_event`` as it arrives.
"""

from __future__ import annotations

import contextlib
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
from tinyhil.device_farm.leases import lock_key
from tinyhil.device_farm.shard.feed import Feeder
from tinyhil.device_farm.shard.infrastructure import killed_cause
from tinyhil.device_farm.shard.plugin import SHARD_ENV, ShardSpec
from tinyhil.device_farm.shard.served import served_shard
from tinyhil.device_farm.shard.watchdog import Backstop
from tinyhil.errors import InvalidArgument

__all__ = [
    "ShardExit",
    "ShardJob",
    "ShardProcess",
    "board_environment",
    "lane_board",
    "run_shard_process",
    "shard_command",
]

Event = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ShardJob:
    """What to run: these node ids of one target on one board, for one run (plain data: it crosses hosts)."""

    run_id: str
    board: Board
    target: str
    nodes: tuple[str, ...]
    pytest_args: tuple[str, ...] = ()
    lease_timeout_s: float | None = None  # how long the shard waits for its board (None: as long as it takes)
    test_timeout_s: float = 0.0  # the run's per-test limit (--test-timeout); 0: none
    targets: tuple[str, ...] = ()  # a fed shard's: every target of the lanes it may run (``nodes`` are test files)


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


def lane_board(job: ShardJob) -> dict[str, Any]:
    """The ``board`` command that moves a fed shard to ``job``'s board for a lane of its target, with how long to
    wait for the board's lease (:mod:`~tinyhil.device_farm.shard.feed`)."""
    board = job.board
    options = board.locator.options_json if isinstance(board.locator, EmulatedLocator) else "{}"
    return {"board": board.id, "slots": board.slots, "target": job.target, "options_json": options,
            "env": board_environment(board, job.target), "lock_key": lock_key(board, job.run_id),
            "lease_timeout_s": job.lease_timeout_s}  # fmt: skip


class ShardProcess:
    """One shard process: ``pytest`` with the shard plugin, started for ``job``. Without ``fed`` it runs
    ``job.nodes`` under ``job.board``'s lease (:meth:`finish`); with it, it collects ``job.nodes`` (test files) on
    ``job.targets`` and runs lane after lane (:meth:`run_lane`) until :meth:`close`."""

    def __init__(self, job: ShardJob, *, command: Sequence[str], cwd: Path, lease_dir: Path, env: Mapping[str, str],
                 fed: bool = False) -> None:  # fmt: skip
        board = job.board
        read_fd, write_fd = os.pipe()
        commands_fd, feed_fd = os.pipe() if fed else (-1, -1)
        dump_fd, self._dump_path = tempfile.mkstemp(prefix="tinyhil-shard-", suffix=".dump")
        os.close(dump_fd)
        options = board.locator.options_json if isinstance(board.locator, EmulatedLocator) else "{}"
        targets = (job.targets if fed else ()) or (job.target,)
        argv, parent_pid = served_shard(board, [*command, *(f"--hil-target={t}" for t in targets), *job.nodes],
                                        os.getpid())  # fmt: skip
        spec = ShardSpec(job.run_id, board.id, board.slots, job.target, str(lease_dir), job.lease_timeout_s, write_fd,
                         parent_pid, options, commands_fd, job.test_timeout_s, self._dump_path,
                         job.targets if fed else (), lock_key(board, job.run_id))  # fmt: skip
        full_env = {**env, SHARD_ENV: spec.to_json(), **board_environment(board, job.target)}
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  # closed in _ended; a file never fills as a pipe can
        try:
            self.process = subprocess.Popen(
                argv,
                cwd=cwd, env=full_env,
                pass_fds=tuple(fd for fd in (write_fd, commands_fd) if fd >= 0), stdout=subprocess.DEVNULL,
                stderr=self._stderr, start_new_session=True)  # fmt: skip  # Ctrl-C reaches the run, which ends it
        except BaseException:
            for fd in (read_fd, feed_fd):
                if fd >= 0:
                    os.close(fd)
            self._stderr.close()
            Path(self._dump_path).unlink(missing_ok=True)
            raise
        finally:
            for fd in (write_fd, commands_fd):
                if fd >= 0:
                    os.close(fd)
        self._events = os.fdopen(read_fd, "rb")
        self._commands = os.fdopen(feed_fd, "wb", buffering=0) if fed else None
        self._backstop = Backstop(self.process)
        self.ended: ShardExit | None = None  # set once the process has ended

    def _read(self, on_event: Callable[[Event], None], feeder: Feeder | None = None) -> bool:
        """Pass each event to ``on_event`` until the shard is idle (True) or has ended (False)."""
        try:
            for line in iter(self._events.readline, b""):
                event = json.loads(line)
                if event.get("event") == "idle":
                    return True
                if event.get("event") == "ready":  # a fed shard collected its tests
                    continue
                self._backstop.see(event)
                on_event(event)
                if feeder is not None and event.get("event") in ("start", "unknown", "lease-timeout"):  # next, or end
                    feeder.advance()
        except BaseException:  # on_event raised: the shard must not outlive its account
            self.process.kill()
            self._ended()
            raise
        return False

    def run_lane(self, job: ShardJob, on_event: Callable[[Event], None], next_arg: Callable[[], str | None]
                 ) -> ShardExit:  # fmt: skip
        """Run a lane of ``job.board`` (its target ``job.target``) on this fed shard: the tests ``next_arg`` gives,
        until it gives ``None``. Returns how the lane ended: still running (``returncode`` None) or how the
        process ended."""
        if self._commands is None or self.ended is not None:
            raise InvalidArgument(f"run_lane on a shard that is {'ended' if self.ended else 'not fed'}")
        feeder = Feeder(self._commands, next_arg)
        feeder.start(lane_board(job))
        if self._read(on_event, feeder):
            return ShardExit(None)
        return self._ended()

    def wait_ready(self) -> bool:
        """Wait until a fed shard has collected its tests (True), or has ended (False: :attr:`ended` says how)."""
        for line in iter(self._events.readline, b""):
            if json.loads(line).get("event") == "ready":
                return True
        self._ended()
        return False

    def finish(self, on_event: Callable[[Event], None]) -> ShardExit:
        """Pass every event of a shard of node ids to ``on_event`` as it arrives; how it ended."""
        self._read(on_event)
        return self._ended()

    def close(self) -> ShardExit:
        """End a fed shard between lanes (its pipe closes, so it ends) and say how it ended."""
        if self._commands is not None:
            self._commands.close()
        return self._ended()

    def _ended(self) -> ShardExit:
        if self.ended is not None:
            return self.ended
        self._backstop.cancel()
        self.process.wait()
        self._events.close()
        if self._commands is not None and not self._commands.closed:
            with contextlib.suppress(BrokenPipeError):
                self._commands.close()
        self._stderr.seek(0)
        stderr = self._stderr.read().decode(errors="replace")
        self._stderr.close()
        dump = Path(self._dump_path).read_text(errors="replace")
        Path(self._dump_path).unlink(missing_ok=True)
        timeout = self._backstop.report(dump)
        returncode = self.process.returncode
        self.ended = ShardExit(returncode, stderr, None if timeout else killed_cause(returncode), timeout=timeout)
        return self.ended


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
    :func:`~tinyhil.device_farm.shard.served.served_shard`) in ``cwd`` under the board's lease and return how it
    ended; every event the shard writes goes to ``on_event`` as it arrives (from this thread), and ``on_process`` gets
    the process once it started (to end it early: the run's deadline, Ctrl-C). A test over its time limit ends the
    shard (:mod:`~tinyhil.device_farm.shard.watchdog`): :attr:`ShardExit.timeout` then carries its failure text."""
    shard = ShardProcess(job, command=command, cwd=cwd, lease_dir=lease_dir, env=env)
    if on_process is not None:
        on_process(shard.process)
    return shard.finish(on_event)
