"""The farm's side of a Dask worker: this host's boards as resources, kept current, and the tasks shards run as.

``tinyhil farm worker`` starts Dask's worker with this module as a preload (``--preload``) and its settings in
``$TINYHIL_FARM_WORKER`` (JSON: hardware map, state directory, host name, refresh interval). :func:`dask_setup`
adds :class:`FarmWorkerPlugin`, which holds the host's boards and their health book (the same ``health.json`` and lease
directory a local run on this host uses), offers the GOOD ones as resources
(:func:`~tinyhil.device_farm.cluster.resources.worker_resources`), and every ``refresh_s`` probes the boards that are
due and offers the board set anew when it changed: a board that turns BAD stops being offered (its resource drops to 0),
one that recovers is offered again.

The tasks the Dask engine submits run here:

- :func:`execute_shard` runs one shard as a ``pytest`` process of this host
  (:func:`~tinyhil.device_farm.shard.parent.run_shard_process`), forwarding every event to the engine live through
  Dask's event log. Dask runs a task again when its worker dies; the shard's first act is to log that it started
  (a topic of its own), so a rerun knows: it runs nothing, and returns the death as an infrastructure loss. The
  engine then counts the test that was running once and puts the rest back on the board's lane, exactly as for a
  shard killed on the local engine. A rerun on a real board probes it first and reports it BAD if the probe fails.
- :func:`probe_board_task` probes one board here on the engine's behalf.
- :func:`describe_worker` says what this worker offers (``client.run``).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from distributed import WorkerPlugin, get_client, get_worker

from tinyhil.device_farm.cluster.dask_cluster import WORKER_ENV, WorkerSettings
from tinyhil.device_farm.cluster.resources import worker_resources
from tinyhil.device_farm.health.leased import LeasedProbe
from tinyhil.device_farm.health.states import HealthBook, ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board, BoardKind, emulated_inventory, load_hwmap
from tinyhil.device_farm.leases import LeaseTimeout
from tinyhil.device_farm.shard.parent import Event, ShardJob, run_shard_process, shard_command
from tinyhil.device_farm.state import lock_dir

__all__ = [
    "PLUGIN_NAME",
    "FarmWorkerPlugin",
    "dask_setup",
    "describe_worker",
    "execute_shard",
    "probe_board_task",
]

PLUGIN_NAME: Final = "tinyhil-farm"


def _load_boards(settings: WorkerSettings) -> list[Board]:
    """This host's boards in its map (``settings.host`` is the map's name for it)."""
    hwmap = load_hwmap(settings.hwmap, host=settings.host) if settings.hwmap else emulated_inventory(host=settings.host)
    return [board for board in hwmap.boards if board.host == settings.host]


class FarmWorkerPlugin(WorkerPlugin):
    """This host's boards, their health, and the resources offering the GOOD ones."""

    name = PLUGIN_NAME

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self.state_dir = Path(settings.state_dir)
        self.lease_dir = lock_dir()
        self.boards = {board.id: board for board in _load_boards(settings)}
        self.book = HealthBook(tuple(self.boards.values()), clock=time.time, state_dir=self.state_dir)
        self._leased = LeasedProbe(self.lease_dir, f"worker-{settings.host}", book=self.book, state_dir=self.state_dir)
        self.offered: frozenset[str] = frozenset()
        self._worker: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- health and resources ---
    def probe(self, board: Board) -> ProbeResult:
        """Probe ``board`` under its lease, without waiting (a busy board raises ``LeaseTimeout``: no probe ran)."""
        return self._leased(board)

    def probe_now(self, board: Board) -> ProbeResult:
        """Probe ``board`` now, record what it saw, and offer the board set anew.

        Raises:
            LeaseTimeout: the board is busy; nothing was probed or recorded.
        """
        result = self.probe(board)
        self.book.record_probe(board.id, result)
        self.refresh()
        return result

    def good(self) -> frozenset[str]:
        """The boards to offer now: probed when due (:meth:`HealthBook.ready`)."""
        return frozenset(board.id for board in self.boards.values() if self.book.ready_unless_busy(board, self.probe))

    def resources(self, offered: frozenset[str]) -> dict[str, float]:
        """Every resource this worker has ever offered, with the boards not in ``offered`` at 0."""
        now = worker_resources([self.boards[i] for i in sorted(offered)])
        everything = worker_resources(self.boards.values())
        return {name: now.get(name, 0.0) for name in everything}

    def refresh(self) -> bool:
        """Probe what is due and offer the board set anew if it changed; True when it changed."""
        with self._lock:
            offered = self.good()
            if offered == self.offered:
                return False
            self.offered = offered
            if self._worker is not None:
                worker = self._worker
                worker.loop.add_callback(worker.set_resources, **self.resources(offered))
            return True

    def record_failure(self, board_id: str, cause: str) -> None:
        self.book.record_infrastructure_failure(board_id, cause)

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self.settings.refresh_s):
            self.refresh()

    # --- Dask's plugin interface ---
    def setup(self, worker: Any) -> None:
        self._worker = worker
        self.refresh()
        self._thread = threading.Thread(target=self._refresh_loop, daemon=True, name="tinyhil-farm-health")
        self._thread.start()

    def teardown(self, worker: Any) -> None:
        self._stop.set()


async def dask_setup(worker: Any) -> None:
    """Dask's preload hook: add the farm's plugin, configured from ``$TINYHIL_FARM_WORKER``."""
    settings = WorkerSettings.from_json(os.environ[WORKER_ENV])
    await worker.plugin_add(FarmWorkerPlugin(settings), name=PLUGIN_NAME)


def _plugin() -> FarmWorkerPlugin:
    plugin = get_worker().plugins[PLUGIN_NAME]
    assert isinstance(plugin, FarmWorkerPlugin)
    return plugin


def describe_worker(dask_worker: Any = None) -> dict[str, Any]:
    """What this worker offers: its host name in the map and its offered boards (for ``client.run``)."""
    plugin: FarmWorkerPlugin = dask_worker.plugins[PLUGIN_NAME]
    return {"host": plugin.settings.host, "boards": [plugin.boards[i] for i in sorted(plugin.offered)]}


def probe_board_task(board_id: str) -> ProbeResult:
    """Probe ``board_id`` on this host now, record it, and offer the board set anew."""
    plugin = _plugin()
    return plugin.probe_now(plugin.boards[board_id])


def _history_topic(topic: str, key: str) -> str:
    """The event topic where each execution of shard ``key`` logs that it started."""
    return f"{topic}:{key}"


def execute_shard(job: ShardJob, topic: str) -> dict[str, Any]:
    """Run ``job`` here, sending each event to ``topic`` as it happens; returns how it ended and every event."""
    worker, plugin = get_worker(), _plugin()
    key = str(worker.get_current_task())
    execution = uuid.uuid4().hex[:8]
    earlier = [msg for _, msg in get_client().get_events(_history_topic(topic, key))]
    worker.log_event(_history_topic(topic, key), {"execution": execution, "worker": worker.address})
    events: list[Mapping[str, Any]] = []

    def send(event: Event) -> None:
        message = {**event, "shard": key, "execution": execution, "seq": len(events)}
        events.append(message)
        worker.log_event(topic, message)

    send({"event": "host", "host": plugin.settings.host})
    base = {"host": plugin.settings.host, "events": events, "returncode": None, "stderr": ""}
    if earlier:  # Dask runs it again because a worker died running it: say so, and leave the rest to the engine
        cause = f"worker {earlier[-1]['worker']} died during the test"
        send({"event": "lost", "cause": cause})
        plugin.record_failure(job.board.id, cause)
        board = plugin.boards.get(job.board.id)
        if board is not None and board.kind is not BoardKind.EMULATED:
            try:
                probed = plugin.probe_now(board)
            except LeaseTimeout:  # another run's work holds it: never probed over that work
                return {**base, "lost": cause}
            if not probed.ok:
                return {**base, "lost": f"{cause}; then its probe failed: {probed.detail}", "board_bad": True}
        return {**base, "lost": cause}
    run_dir = plugin.state_dir / "dask-runs" / job.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    end = run_shard_process(job, command=shard_command(run_dir, job.pytest_args), cwd=run_dir,
                            lease_dir=plugin.lease_dir, env=os.environ, on_event=send)  # fmt: skip
    if end.lost is not None:
        plugin.record_failure(job.board.id, end.lost)
    return {**base, "returncode": end.returncode, "stderr": end.stderr[-4000:], "lost": end.lost,
            "timeout": end.timeout}  # fmt: skip
