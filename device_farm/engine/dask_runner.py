"""The Dask engine: the farm's scheduling (:class:`~tinyhil.device_farm.engine.FarmEngine`) with each shard run as a
Dask task on the worker that offers its board.

- **Routing.** A shard asks for one unit of its board's resource (``board:<id>``), which only the farm worker of the
  board's host offers (:mod:`~tinyhil.device_farm.cluster.dask_worker`); Dask runs it there and nowhere else.
- **Events.** The worker forwards each shard event through Dask's event log as it happens (a topic per run); the
  runner hands them to the engine in order, once each (by execution and sequence number), and the task's return
  value repeats them, so none is lost to a late message.
- **Losses.** A worker that dies mid-shard: Dask reruns the task, the rerun reports the death without running
  anything, and the engine counts the running test once and requeues the rest. A board no worker offers any more
  for ``board_grace_s`` (its host went away): the task is cancelled and the board leaves the run, its pairs going
  to other eligible boards. ``KilledWorker`` (a shard that killed its worker ``allowed-failures`` times) and
  ``NoValidWorkerError`` are infrastructure losses too.
- **The scheduler gone.** When the client has not been connected for ``scheduler_grace_s``, the runner raises
  :class:`~tinyhil.device_farm.engine.EngineLost`: the run stops, its journal keeps every result that arrived, and
  ``--resume`` on a new scheduler finishes it.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from distributed import Client
from distributed.client import FutureCancelledError
from distributed.scheduler import KilledWorker, NoValidWorkerError

from tinyhil.device_farm.cluster.dask_cluster import DEFAULT_BOARD_GRACE_S, DEFAULT_SCHEDULER_GRACE_S
from tinyhil.device_farm.cluster.dask_worker import describe_worker, execute_shard, probe_board_task
from tinyhil.device_farm.cluster.resources import board_resource, unservable
from tinyhil.device_farm.engine import EngineLost
from tinyhil.device_farm.health.states import ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board
from tinyhil.device_farm.leases import LeaseTimeout
from tinyhil.device_farm.planning import Pair, plan
from tinyhil.device_farm.shard.parent import Event, ShardExit, ShardJob

__all__ = [
    "DaskRunner",
    "DaskSession",
    "WorkerView",
    "connect",
    "offered_boards",
    "worker_resources_online",
    "workers_online",
]

_POLL_S: Final = 0.05
_CHECK_S: Final = 0.5


@dataclass(frozen=True, slots=True)
class WorkerView:
    """One online farm worker: its address, its host's name in the map, and the boards it offers."""

    address: str
    host: str
    boards: tuple[Board, ...]


def connect(address: str, *, timeout_s: float = 10.0) -> Any:
    """A client of the scheduler at ``address``.

    Raises:
        EngineLost: nothing answers there within ``timeout_s``.
    """
    try:
        client: Any = Client
        return client(address, timeout=timeout_s, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise EngineLost(f"no Dask scheduler answers at {address} ({type(exc).__name__}: {exc})") from None


def workers_online(client: Any) -> list[WorkerView]:
    """Every farm worker connected to ``client``'s scheduler, with what it offers now."""
    described = client.run(describe_worker, on_error="return")
    views = []
    for address, found in sorted(described.items()):
        if isinstance(found, dict):
            views.append(WorkerView(address, str(found["host"]), tuple(found["boards"])))
    return views


def worker_resources_online(client: Any) -> dict[str, dict[str, float]]:
    """What each online worker offers: address -> resources (only those with at least one unit)."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return {
        address: {name: value for name, value in dict(info.get("resources") or {}).items() if value >= 1}
        for address, info in workers.items()
    }


class DaskRunner:
    """Runs shards as Dask tasks on ``client``'s cluster (see the module docstring)."""

    def __init__(
        self,
        client: Any,
        *,
        run_id: str,
        board_grace_s: float = DEFAULT_BOARD_GRACE_S,
        scheduler_grace_s: float = DEFAULT_SCHEDULER_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client, self.run_id, self.clock = client, run_id, clock
        self.board_grace_s, self.scheduler_grace_s = board_grace_s, scheduler_grace_s
        self.host = "-"  # a shard's first event names its host
        self.topic = f"tinyhil-farm:{run_id}"
        self._queues: dict[str, queue.SimpleQueue[Mapping[str, Any]]] = {}
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)
        self.address = str(client.scheduler.address) if client.scheduler is not None else "?"
        client.subscribe_topic(self.topic, self._deliver)

    def _deliver(self, event: tuple[float, Mapping[str, Any]]) -> None:
        """The client's event-loop thread: hand one event to the shard it belongs to."""
        message = event[1]
        with self._lock:
            inbox = self._queues.get(str(message.get("shard")))
        if inbox is not None:
            inbox.put(message)

    def close(self) -> None:
        if self.client.status == "running":
            self.client.unsubscribe_topic(self.topic)

    # --- one shard ---
    def run(self, job: ShardJob, on_event: Callable[[Event], None]) -> ShardExit:
        key = f"tinyhil-shard-{self.run_id}-{next(self._numbers)}-{job.board.id}"
        inbox: queue.SimpleQueue[Mapping[str, Any]] = queue.SimpleQueue()
        with self._lock:
            self._queues[key] = inbox
        seen: set[tuple[str, int]] = set()

        def feed(message: Mapping[str, Any]) -> None:
            mark = (str(message["execution"]), int(message["seq"]))
            if mark not in seen:
                seen.add(mark)
                on_event(message)

        try:
            future = self.client.submit(execute_shard, job, self.topic, key=key, pure=False,
                                        resources={board_resource(job.board): 1})  # fmt: skip
            gone = self._wait(future, job.board, inbox, feed)
            while not inbox.empty():
                feed(inbox.get_nowait())
            if gone is not None:
                future.cancel()
                return ShardExit(None, lost=gone, board_gone=True)
            return self._ended(future, job.board, feed)
        finally:
            with self._lock:
                del self._queues[key]

    def _wait(self, future: Any, board: Board, inbox: queue.SimpleQueue[Mapping[str, Any]],
              feed: Callable[[Mapping[str, Any]], None]) -> str | None:  # fmt: skip
        """Feed events until ``future`` is done; the cause when its board stayed unoffered past the grace."""
        next_check = self.clock() + _CHECK_S
        unoffered_since: float | None = None
        disconnected_since: float | None = None
        while not future.done():
            with contextlib.suppress(queue.Empty):
                feed(inbox.get(timeout=_POLL_S))
            now = self.clock()
            if now < next_check:
                continue
            next_check = now + _CHECK_S
            if self.client.status != "running":
                disconnected_since = disconnected_since or now
                if now - disconnected_since >= self.scheduler_grace_s:
                    raise EngineLost(f"the Dask scheduler at {self.address} went away mid-run "
                                     f"(client {self.client.status} for {now - disconnected_since:.0f} s)")  # fmt: skip
                continue
            disconnected_since = None
            offers = self._offers(board)
            if offers is None:
                unoffered_since = unoffered_since or now
                if now - unoffered_since >= self.board_grace_s:
                    return self._no_worker(board)
            else:
                unoffered_since = None
        return None

    def _offers(self, board: Board) -> str | None:
        """The address of a worker offering ``board``, or None."""
        try:
            online = worker_resources_online(self.client)
        except (OSError, TimeoutError):
            return "?"  # cannot tell now: the scheduler check decides
        resource = board_resource(board)
        return next((address for address, offered in online.items() if resource in offered), None)

    def _no_worker(self, board: Board) -> str:
        try:
            online = worker_resources_online(self.client)
        except (OSError, TimeoutError):
            online = {}
        offered = "; ".join(f"{a} offers {', '.join(sorted(r)) or 'nothing'}" for a, r in sorted(online.items()))
        return (f"no board with capabilities {sorted(board.capabilities)} on any worker: board {board.id} "
                f"is offered by none (workers: {offered or 'none online'})")  # fmt: skip

    def _ended(self, future: Any, board: Board, feed: Callable[[Mapping[str, Any]], None]) -> ShardExit:
        try:
            done: dict[str, Any] = future.result()
        except KilledWorker as exc:
            return ShardExit(None, lost=f"the shard killed every worker it ran on (Dask KilledWorker: {exc})")
        except NoValidWorkerError:
            return ShardExit(None, lost=self._no_worker(board), board_gone=True)
        except Exception as exc:
            self._check_connected(exc)
            if isinstance(exc, FutureCancelledError):
                return ShardExit(None, lost=f"the shard's Dask task was cancelled ({exc})")
            # the farm worker failed outside pytest: the board's host, not the test
            return ShardExit(None, lost=f"farm worker error: {type(exc).__name__}: {exc}")
        for message in done["events"]:
            feed(message)
        return ShardExit(done["returncode"], str(done["stderr"]), done.get("lost"),
                         board_gone=bool(done.get("board_bad")), host=str(done["host"]),
                         timeout=done.get("timeout"))  # fmt: skip

    # --- probes, on the board's host ---
    def probe(self, board: Board, *, timeout_s: float = 120.0) -> ProbeResult:
        """Probe ``board`` on the worker that offers it; not ok when none does."""
        if self._offers(board) is None:
            return ProbeResult(False, self._no_worker(board))
        future = self.client.submit(probe_board_task, board.id, pure=False, resources={board_resource(board): 1})
        try:
            result: ProbeResult = future.result(timeout=timeout_s)
        except LeaseTimeout:  # the board is busy: no probe ran, and waiting is not a fault
            raise
        except Exception as exc:  # any failure to probe, but losing the scheduler, is a failed probe
            self._check_connected(exc)
            return ProbeResult(False, f"probe on its worker failed: {type(exc).__name__}: {exc}")
        return result

    def _check_connected(self, cause: BaseException) -> None:
        """Raise :class:`EngineLost` when ``cause`` came from losing the scheduler (Dask cancels every future
        of a client whose connection drops)."""
        if self.client.status != "running" or isinstance(cause, OSError | TimeoutError):
            first = (str(cause).splitlines() or [""])[0]
            raise EngineLost(f"the Dask scheduler at {self.address} went away mid-run "
                             f"({type(cause).__name__}: {first})") from None  # fmt: skip


def offered_boards(views: Sequence[WorkerView]) -> list[Board]:
    """The boards the online workers offer, each once (the first worker's description wins)."""
    boards: dict[str, Board] = {}
    for view in views:
        for board in view.boards:
            boards.setdefault(board.id, board)
    return list(boards.values())


class DaskSession:
    """A farm run's connection to a Dask cluster: the client, the workers online at the start, and the runner."""

    def __init__(self, address: str, *, run_id: str, board_grace_s: float = DEFAULT_BOARD_GRACE_S,
                 scheduler_grace_s: float = DEFAULT_SCHEDULER_GRACE_S) -> None:  # fmt: skip
        self.address = address
        self.client = connect(address)
        try:
            self.workers = workers_online(self.client)
            self.runner = DaskRunner(self.client, run_id=run_id, board_grace_s=board_grace_s,
                                     scheduler_grace_s=scheduler_grace_s)  # fmt: skip
        except BaseException:
            self.client.close()
            raise

    def offered(self) -> list[Board]:
        return offered_boards(self.workers)

    def describe_workers(self) -> str:
        return "; ".join(f"{w.address} ({w.host}) offers {', '.join(b.id for b in w.boards) or 'no board'}"
                         for w in self.workers) or "none online"  # fmt: skip

    def unservable(self, pairs: Sequence[Pair], mapped: Sequence[Board], offered: Sequence[Board]) -> list[str]:
        """One message per shard of the map's plan holding pairs that no offered board can run but a board of
        the map could (its worker is not online): ``no board with capabilities [...] on any worker ...``."""
        stranded = {u.pair.key for u in plan(pairs, offered).unroutable}
        full = plan([p for p in pairs if p.key in stranded], mapped)
        needs: dict[str, tuple[Board, frozenset[str]]] = {}
        for lane, held in full.shards.items():
            board = next(b for b in mapped if b.id == lane.board)
            needs[str(lane)] = (board, frozenset().union(*(p.requires for p in held)))
        resources = worker_resources_online(self.client)
        return unservable(needs, resources)

    def close(self) -> None:
        try:
            self.runner.close()
        finally:
            self.client.close()
