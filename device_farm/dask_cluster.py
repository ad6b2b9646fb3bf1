"""The farm's Dask cluster: ``tinyhil farm scheduler`` (Dask's scheduler with the farm's settings) and
``tinyhil farm worker`` (Dask's worker advertising this host's GOOD boards as resources).

- ``distributed.scheduler.no-workers-timeout``: a task whose resources no worker offers fails after this long
  instead of waiting forever (the farm also checks before it submits:
  :func:`~tinyhil.device_farm.resources.unservable`).
- ``distributed.scheduler.allowed-failures``: how many worker deaths a task may cause before it stops with
  ``KilledWorker``.

The scheduler is Dask's own (``distributed.cli.dask_scheduler``), run with those settings in its environment
(``DASK_DISTRIBUTED__SCHEDULER__...``), so everything Dask documents about it holds. It needs the ``farm`` extra.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tinyhil.device_farm.resources import BOARD_PREFIX
from tinyhil.errors import InvalidArgument, TargetUnavailable

__all__ = [
    "DEFAULT_ALLOWED_FAILURES",
    "DEFAULT_NO_WORKERS_TIMEOUT_S",
    "DEFAULT_REFRESH_S",
    "WORKER_ENV",
    "WORKER_PRELOAD",
    "SchedulerSettings",
    "WorkerSettings",
    "scheduler_command",
    "worker_command",
]

DEFAULT_NO_WORKERS_TIMEOUT_S: Final = 10.0
DEFAULT_ALLOWED_FAILURES: Final = 3
DEFAULT_REFRESH_S: Final = 30.0
WORKER_ENV: Final = "TINYHIL_FARM_WORKER"  # the farm worker preload's settings, as WorkerSettings JSON
WORKER_PRELOAD: Final = "tinyhil.device_farm.dask_worker"
DASK_MISSING: Final = "the farm's Dask engine needs the farm extra: pip install 'tinyhil[farm]' (Dask distributed)"


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    """Where the scheduler listens and the farm's two settings."""

    host: str = "127.0.0.1"
    port: int = 8786
    no_workers_timeout_s: float = DEFAULT_NO_WORKERS_TIMEOUT_S
    allowed_failures: int = DEFAULT_ALLOWED_FAILURES

    def __post_init__(self) -> None:
        if type(self.port) is not int or not 0 <= self.port <= 65535:
            raise InvalidArgument(f"port={self.port!r}, expected 0..65535 (0: any free port)")
        if not self.no_workers_timeout_s > 0:
            raise InvalidArgument(f"no_workers_timeout_s={self.no_workers_timeout_s!r}, expected seconds > 0")
        if type(self.allowed_failures) is not int or self.allowed_failures < 0:
            raise InvalidArgument(f"allowed_failures={self.allowed_failures!r}, expected an integer >= 0")

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the farm's settings for Dask's config."""
        env = dict(os.environ if base is None else base)
        env["DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT"] = f"{self.no_workers_timeout_s:g}s"
        env["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = str(self.allowed_failures)
        return env


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """What ``tinyhil farm worker`` tells the preload: the map (``None``: every available emulated target), the
    farm state directory, the name this host has in the map, and how often to refresh health."""

    hwmap: str | None
    state_dir: str
    host: str
    refresh_s: float = DEFAULT_REFRESH_S

    def to_json(self) -> str:
        return json.dumps({name: getattr(self, name) for name in self.__slots__})

    @classmethod
    def from_json(cls, text: str) -> WorkerSettings:
        return cls(**json.loads(text))


def _require_dask() -> None:
    if importlib.util.find_spec("distributed") is None:
        raise TargetUnavailable("dask", DASK_MISSING)


def worker_command(scheduler: str, resources: Mapping[str, float], *, name: str, preload: str = "") -> list[str]:
    """The command that runs Dask's worker for ``scheduler``, advertising ``resources`` (board ids and kind counts,
    :func:`~tinyhil.device_farm.resources.worker_resources`), with one thread per board slot and ``preload``
    (a module) loaded into it.

    Raises:
        InvalidArgument: ``scheduler`` is not a ``tcp://HOST:PORT`` address.
        TargetUnavailable: Dask distributed is not installed.
    """
    if not isinstance(scheduler, str) or not scheduler.startswith(("tcp://", "tls://")):
        raise InvalidArgument(f"scheduler={scheduler!r}, expected an address such as tcp://127.0.0.1:8786")
    _require_dask()
    slots = max(1, int(sum(v for k, v in resources.items() if k.startswith(BOARD_PREFIX))))
    offered = " ".join(f"{key}={value:g}" for key, value in sorted(resources.items()))
    return [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--name", name, "--nthreads",
            str(slots), "--no-dashboard", *(["--resources", offered] if offered else []),
            *(["--preload", preload] if preload else [])]  # fmt: skip


def scheduler_command(settings: SchedulerSettings) -> list[str]:
    """The command that runs Dask's scheduler for ``settings`` (run it with ``settings.environment()``).

    Raises:
        TargetUnavailable: Dask distributed is not installed (the message names the extra).
    """
    _require_dask()
    return [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", settings.host, "--port",
            str(settings.port), "--no-dashboard"]  # fmt: skip
