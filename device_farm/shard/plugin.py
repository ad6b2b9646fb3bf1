"""The pytest plugin a farm shard runs under: its board pinned and leased, each result sent to the scheduler.

A shard is ``pytest -p tinyhil.device_farm.shard.plugin ARG ...`` with the shard's description in
``$TINYHIL_FARM_SHARD`` (JSON: run id, board id and slots, target, lease directory and timeout, the file descriptor
of the pipe results go to, the per-test time limit and where its watchdog dumps stacks). Two kinds:

- **A shard of node ids** (the Dask engine's): at configure the plugin takes the board's lease, held by this process
  until it exits (a killed shard frees the board at once, see :mod:`tinyhil.device_farm.leases`), pins the session
  to the shard's target (``pytest_hil_select_targets``) and runs the node ids of its command line.
- **A fed shard** (the local engine's, ``commands_fd`` set): it collects its test files on its targets once and then
  runs lane after lane as the engine sends them over its command pipe (:mod:`~tinyhil.device_farm.shard.feed`),
  taking each lane's board lease and giving it back at the lane's end.

For each test the plugin writes two JSON lines to the pipe: ``{"event": "start", "nodeid": ..., "timeout": ...}``
before it runs and ``{"event": "result", ...}`` after, with ``reports``, the
reports of its phases as pytest serializes them (``pytest_report_to_serializable``, which the engine classifies with
:mod:`tinyhil.fixtures.outcomes`, as pytest-xdist's controller does with its workers' reports), ``started`` and
``finished``, for a failure the farm retries its infrastructure cause
(:func:`~tinyhil.device_farm.shard.infrastructure.infrastructure_cause`), and ``bundle``, the directory of the test's
repro bundle when ``--hil-repro-dir`` wrote one (the board's map entry goes into it), and ``trace``, the USB trace
that bundle keeps, when it keeps one. While a test runs, its time limit is watched
(:mod:`~tinyhil.device_farm.shard.watchdog`). The environment also names the
board for tests that drive it with their own stack: ``TINYHIL_BOARD`` and ``DEV``, and ``CUDA_VISIBLE_DEVICES`` on NV
boards, the KFD GPU on AMD boards (:func:`~tinyhil.device_farm.shard.parent.board_environment`).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import pytest

from tinyhil.device import Device
from tinyhil.device_farm.inventory.board_options import target_options
from tinyhil.device_farm.leases import Holder, Lease, LeaseTimeout, acquire, describe_holders
from tinyhil.device_farm.shard.feed import run_fed
from tinyhil.device_farm.shard.infrastructure import infrastructure_cause
from tinyhil.device_farm.shard.watchdog import Watchdog
from tinyhil.fixtures.collect import item_arg
from tinyhil.fixtures.fixtures import HIL_OPEN_OPTIONS
from tinyhil.fixtures.hooks import HIL_BOARD_ENTRY, REPRO_BUNDLE_PROPERTY
from tinyhil.fixtures.outcomes import serialize
from tinyhil.registry import Target, default_registry
from tinyhil.trace.bundle import BUNDLE_TRACE

__all__ = ["SHARD_ENV", "ShardSpec", "pytest_configure"]

SHARD_ENV: Final = "TINYHIL_FARM_SHARD"
_PR_SET_PDEATHSIG: Final = 1  # linux/prctl.h


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """What a shard process needs to know; serialised into ``$TINYHIL_FARM_SHARD``."""

    run_id: str
    board: str
    slots: int
    target: str
    lease_dir: str
    lease_timeout_s: float | None  # how long to wait for the board (None: as long as it takes)
    results_fd: int
    parent_pid: int = 0
    options_json: str = "{}"  # the board's target options as its map entry gives them
    commands_fd: int = -1  # the pipe the lane feeds tests over (shard.feed); -1: run the node ids of the command line
    test_timeout_s: float = 0.0  # the run's per-test limit (--test-timeout); 0: none (shard.watchdog)
    dump_path: str = ""  # where the watchdog writes every thread's stack when a test runs over its limit
    targets: tuple[str, ...] = ()  # a fed shard's targets (the boards it may be sent serve them); empty: ``target``
    lock_key: str = ""  # the board's lock key (tinyhil.device_farm.leases.lock_key)

    @property
    def id(self) -> str:  # the lease API's view of a board: an id and a slot count
        return self.board

    def to_json(self) -> str:
        return json.dumps({name: getattr(self, name) for name in self.__slots__})

    @classmethod
    def from_json(cls, text: str) -> ShardSpec:
        fields = json.loads(text)
        return cls(**{**fields, "targets": tuple(fields.get("targets", ()))})

    def board_entry(self) -> dict[str, Any]:
        """The board's map entry as the shard knows it, for repro bundles (``--hil-repro-dir``)."""
        return {"board": self.board, "slots": self.slots, "target": self.target,
                "options": json.loads(self.options_json), "run_id": self.run_id}  # fmt: skip


class _Shard:
    def __init__(self, spec: ShardSpec, config: pytest.Config) -> None:
        self.spec, self.config = spec, config
        self.lease: Lease | None = None
        self.tests: dict[str, dict[str, Any]] = {}  # node id -> its serialized reports so far, and what else is sent
        self.args: dict[str, str] = {}  # node id -> the argument the engine selected the item by
        self.watchdog = Watchdog(spec.dump_path, spec.test_timeout_s)
        self.limits: dict[str, float | None] = {}  # node id -> the running test's time limit

    def send(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record, default=str) + "\n").encode()  # a user property may hold any object
        view = memoryview(data)
        while view:
            view = view[os.write(self.spec.results_fd, view) :]

    @pytest.hookimpl(tryfirst=True)
    def pytest_hil_select_targets(self, config: pytest.Config, selectors: Sequence[str]) -> list[Target] | None:
        return [default_registry().resolve(target) for target in self.spec.targets or (self.spec.target,)]

    @pytest.hookimpl(tryfirst=True)
    def pytest_hil_open_device(
        self, target: Target, request: pytest.FixtureRequest, options: dict[str, Any]
    ) -> Device | None:
        """Open the board's target with its map entry's options (a fault plan, a seed) merged with the plugin's
        (``record=``, ``trace=``: those win); none: the default."""
        data = json.loads(self.spec.options_json)
        if not data:
            return None
        opened = request.node.stash.get(HIL_OPEN_OPTIONS, {})
        request.node.stash[HIL_OPEN_OPTIONS] = {**data, **opened}  # what a repro bundle records
        return target.open(**{**target_options(self.spec.target, data), **options})

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.args = {item.nodeid: item_arg(item) for item in items}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        """A fed shard runs the tests its lane sends over the command pipe (:mod:`~tinyhil.device_farm.shard.feed`)."""
        if self.spec.commands_fd < 0 or session.config.option.collectonly:
            return None
        if session.testsfailed and not session.config.option.continue_on_collection_errors:
            raise session.Interrupted(f"{session.testsfailed} errors during collection")
        items = {self.args.get(item.nodeid, item.nodeid): item for item in session.items}
        self.send({"event": "ready", "collected": len(items)})  # collected (and --hil-collect written)
        with os.fdopen(self.spec.commands_fd, "rb") as commands:
            run_fed(session, commands, items, self)
        return True

    def switch(self, board: Mapping[str, Any]) -> bool:
        """Serve ``board`` (a fed shard's ``board`` command): its lease taken, the environment naming it; False
        (and a ``lease-timeout`` event) when its lease did not come free in time."""
        self.release()
        self.spec = replace(self.spec, board=str(board["board"]), slots=int(board["slots"]),
                            target=str(board["target"]), options_json=str(board["options_json"]),
                            lock_key=str(board["lock_key"]), lease_timeout_s=board["lease_timeout_s"])  # fmt: skip
        os.environ.update({str(k): str(v) for k, v in dict(board["env"]).items()})
        self.config.stash[HIL_BOARD_ENTRY] = self.spec.board_entry()
        try:
            self.lease = self.take_lease()
        except LeaseTimeout as exc:
            self.send({"event": "lease-timeout", "reason": str(exc)})
            return False
        return True

    def take_lease(self) -> Lease:
        """Take the board's lease, waiting as the run allows; when the board is busy, the engine hears it once
        (a ``waiting`` event: not a fault).

        Raises:
            LeaseTimeout: the board stayed busy past the run's wait bound.
        """

        def waiting(held: list[Holder | None]) -> None:
            self.send({"event": "waiting", "holders": describe_holders(held), "since": time.time()})

        return acquire(self.spec.lease_dir, self.spec, Holder.here(self.spec.run_id, board=self.spec.board),
                       timeout_s=self.spec.lease_timeout_s, on_wait=waiting)  # fmt: skip

    def release(self) -> None:
        """Give the board's lease back (a fed shard between lanes)."""
        if self.lease is not None:
            self.lease.release()
            self.lease = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
        self.limits[item.nodeid] = limit = self.watchdog.limit_s(item)
        self.watchdog.arm(limit)
        try:
            return (yield)
        finally:
            self.watchdog.disarm()

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        if self.lease is not None:
            self.lease.update(nodeid)
        started = time.time()
        self.tests[nodeid] = {"reports": [], "infrastructure": None, "started": started}
        self.send({"event": "start", "nodeid": self.args.get(nodeid, nodeid), "time": started,
                   "timeout": self.limits.get(nodeid)})  # fmt: skip

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
        report = yield
        if call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception):
            cause = infrastructure_cause(call.excinfo.value)
            if cause is not None:  # the board is suspect: stop here, the farm probes it and places the rest
                self.tests.setdefault(item.nodeid, {})["infrastructure"] = cause
                item.session.shouldstop = f"infrastructure failure on board {self.spec.board}: {cause}"
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = self.tests.setdefault(report.nodeid, {})
        test.setdefault("reports", []).append(serialize(self.config, report))
        bundle = dict(report.user_properties).get(REPRO_BUNDLE_PROPERTY)
        if bundle is not None:  # --hil-repro-dir wrote one: the farm's reports link it, and the trace it keeps
            test["bundle"] = str(bundle)
            if (Path(str(bundle)) / BUNDLE_TRACE).is_file():
                test["trace"] = str(Path(str(bundle)) / BUNDLE_TRACE)
        if report.when == "teardown":
            nodeid = self.args.get(report.nodeid, report.nodeid)
            self.send({"event": "result", "nodeid": nodeid, **self.tests.pop(report.nodeid), "finished": time.time()})


def _die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this shard when the engine that started it dies, so a killed ``tinyhil farm run``
    leaves no shard holding a lease; then check the engine did not die first."""
    if not sys.platform.startswith("linux") or not parent_pid:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)


def pytest_configure(config: pytest.Config) -> None:
    text = os.environ.get(SHARD_ENV)
    if not text:
        raise pytest.UsageError(f"tinyhil.device_farm.shard.plugin runs only in farm shards (${SHARD_ENV} is unset)")
    spec = ShardSpec.from_json(text)
    _die_with_parent(spec.parent_pid)
    shard = _Shard(spec, config)

    if spec.commands_fd < 0:  # a shard of node ids: its board's lease is held until this process exits
        try:
            shard.lease = shard.take_lease()
        except LeaseTimeout as exc:
            shard.send({"event": "lease-timeout", "reason": str(exc)})
            raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(shard, "tinyhil-farm-shard")
    config.stash[HIL_BOARD_ENTRY] = spec.board_entry()
