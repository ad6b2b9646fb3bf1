"""The farm's Dask cluster: ``tinyhil farm scheduler`` (Dask's scheduler with the farm's settings) and
``tinyhil farm worker`` (Dask's worker advertising this host's GOOD boards as resources).

- ``distributed.scheduler.no-workers-timeout``: a task whose resources no worker offers fails after this long
  instead of waiting forever (the farm also checks before it submits:
  :func:`~tinyhil.device_farm.cluster.resources.unservable`).
- ``distributed.scheduler.allowed-failures``: how many worker deaths a task may cause before it stops with
  ``KilledWorker``.

The scheduler is Dask's own, run by Dask's ``dask spec`` runner (``distributed.cli.dask_spec``) as
:class:`~tinyhil.device_farm.cluster.dask_servers.FarmScheduler`, the worker Dask's ``dask worker`` with a nanny and
:class:`~tinyhil.device_farm.cluster.dask_servers.FarmWorker`: Dask's classes with no HTTP server unless a dashboard is
asked for, and then on loopback. Both listen where :func:`~tinyhil.device_farm.cluster.security.listen_host` allows
(loopback by default) and take the farm's settings and its TLS (:class:`~tinyhil.device_farm.cluster.security.FarmTLS`)
from their environment (``DASK_DISTRIBUTED__...``), so everything Dask documents about them holds. It needs the ``farm``
extra.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from tinyhil.device_farm.cluster.resources import BOARD_PREFIX
from tinyhil.device_farm.cluster.security import LOOPBACK, FarmTLS, check_scheme
from tinyhil.errors import InvalidArgument, TargetUnavailable, TinyHilError
from tinyhil.printable import printable

__all__ = [
    "DEFAULT_ALLOWED_FAILURES",
    "DEFAULT_BOARD_GRACE_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_DASHBOARD_PORT",
    "DEFAULT_NO_WORKERS_TIMEOUT_S",
    "DEFAULT_REFRESH_S",
    "DEFAULT_SCHEDULER_GRACE_S",
    "WORKER_ENV",
    "WORKER_PRELOAD",
    "Listening",
    "SchedulerSettings",
    "SchedulerUnreachable",
    "WorkerSettings",
    "reach_scheduler",
    "scheduler_command",
    "worker_command",
]

DEFAULT_NO_WORKERS_TIMEOUT_S: Final = 10.0
DEFAULT_ALLOWED_FAILURES: Final = 3
DEFAULT_REFRESH_S: Final = 30.0
WORKER_ENV: Final = "TINYHIL_FARM_WORKER"  # the farm worker preload's settings, as WorkerSettings JSON
WORKER_PRELOAD: Final = "tinyhil.device_farm.cluster.dask_worker"
DEFAULT_CONNECT_TIMEOUT_S: Final = 10.0
DEFAULT_DASHBOARD_PORT: Final = 8787
# How long a board may go unoffered by every worker, or the scheduler be unreachable, before a run counts it lost.
DEFAULT_BOARD_GRACE_S: Final = 15.0
DEFAULT_SCHEDULER_GRACE_S: Final = 5.0
SCHEDULER_CLASS: Final = "tinyhil.device_farm.cluster.dask_servers.FarmScheduler"
WORKER_CLASS: Final = "tinyhil.device_farm.cluster.dask_servers.FarmWorker"
_DASK_TIMED_OUT: Final = "Timed out trying to connect to "  # how distributed.comm.connect words its timeout
DASK_MISSING: Final = "the farm's Dask engine needs the farm extra: pip install 'tinyhil[farm]' (Dask distributed)"


def _check_port(name: str, port: int | None) -> None:
    if port is not None and (type(port) is not int or not 0 <= port <= 65535):
        raise InvalidArgument(f"{name}={port!r}, expected 0..65535 (0: any free port)")


@dataclass(frozen=True, slots=True)
class Listening:
    """Where a farm process listens: its Dask comm on ``host``:``port`` (0: any free port), and its HTTP dashboard,
    on loopback, at ``dashboard_port`` (``None``: no HTTP server at all). Check ``host`` with
    :func:`~tinyhil.device_farm.cluster.security.listen_host` first."""

    host: str = LOOPBACK
    port: int = 0
    dashboard_port: int | None = None

    def __post_init__(self) -> None:
        _check_port("port", self.port)
        _check_port("dashboard_port", self.dashboard_port)

    def dask_host(self) -> str:
        """``host`` as Dask parses it (an IPv6 address bracketed)."""
        return f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host

    def dashboard_address(self) -> str | None:
        return None if self.dashboard_port is None else f"{LOOPBACK}:{self.dashboard_port}"


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    """Where the scheduler listens, the farm's two settings, and its TLS (``None``: plain TCP)."""

    host: str = LOOPBACK
    port: int = 8786
    no_workers_timeout_s: float = DEFAULT_NO_WORKERS_TIMEOUT_S
    allowed_failures: int = DEFAULT_ALLOWED_FAILURES
    dashboard_port: int | None = None
    tls: FarmTLS | None = None

    def __post_init__(self) -> None:
        Listening(self.host, self.port, self.dashboard_port)  # checks the ports
        if not self.no_workers_timeout_s > 0:
            raise InvalidArgument(f"no_workers_timeout_s={self.no_workers_timeout_s!r}, expected seconds > 0")
        if type(self.allowed_failures) is not int or self.allowed_failures < 0:
            raise InvalidArgument(f"allowed_failures={self.allowed_failures!r}, expected an integer >= 0")

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the farm's settings for Dask's config."""
        env = dict(os.environ if base is None else base)
        env["DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT"] = f"{self.no_workers_timeout_s:g}s"
        env["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = str(self.allowed_failures)
        return {**env, **(self.tls.environment() if self.tls else {})}

    @property
    def listening(self) -> Listening:
        return Listening(self.host, self.port, self.dashboard_port)


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


def _protocol(tls: FarmTLS | None) -> str:
    return "tls" if tls is not None else "tcp"


def worker_command(scheduler: str, resources: Mapping[str, float], *, name: str, preload: str = "",
                   listening: Listening | None = None, nanny_port: int = 0, contact_address: str | None = None,
                   tls: FarmTLS | None = None) -> list[str]:  # fmt: skip
    """The command that runs Dask's worker (a nanny and :class:`~tinyhil.device_farm.cluster.dask_servers.FarmWorker`)
    for ``scheduler``, advertising ``resources`` (board ids and kind counts,
    :func:`~tinyhil.device_farm.cluster.resources.worker_resources`), with one thread per board slot and ``preload``
    (a module) loaded into it. The worker listens at ``listening`` (default: loopback, any free port, no HTTP),
    the nanny on the same host at ``nanny_port``; ``contact_address`` is the address the others reach the worker
    at, when not that one. Run it with ``tls.environment()`` in its environment when ``tls`` is given.

    Raises:
        InvalidArgument: ``scheduler`` is not a ``tcp://HOST:PORT`` address (``tls://`` with ``tls``), or a port
            is out of range.
        TargetUnavailable: Dask distributed is not installed.
    """
    if not isinstance(scheduler, str):
        raise InvalidArgument(f"scheduler={scheduler!r}, expected an address such as tcp://127.0.0.1:8786")
    check_scheme(scheduler, tls)
    _check_port("nanny_port", nanny_port)
    _require_dask()
    where = listening or Listening()
    slots = max(1, int(sum(v for k, v in resources.items() if k.startswith(BOARD_PREFIX))))
    offered = " ".join(f"{key}={value:g}" for key, value in sorted(resources.items()))
    if contact_address is None:
        listen = ["--host", where.dask_host(), "--worker-port", str(where.port)]
    else:  # Dask takes the two together, the port inside the listen address
        check_scheme(contact_address, tls, option="--contact-address")
        listen = ["--listen-address", f"{_protocol(tls)}://{where.dask_host()}:{where.port}", "--contact-address",
                  contact_address]  # fmt: skip
    http = ["--no-dashboard"] if where.dashboard_port is None else ["--dashboard", "--dashboard-address",
                                                                     str(where.dashboard_address())]  # fmt: skip
    return [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--name", name, "--nthreads",
            str(slots), "--worker-class", WORKER_CLASS, "--protocol", _protocol(tls), *listen, "--nanny-port",
            str(nanny_port), *http, *(["--resources", offered] if offered else []),
            *(["--preload", preload] if preload else [])]  # fmt: skip


def scheduler_command(settings: SchedulerSettings) -> list[str]:
    """The command that runs Dask's scheduler (:class:`~tinyhil.device_farm.cluster.dask_servers.FarmScheduler`) for
    ``settings``; run it with ``settings.environment()``.

    Raises:
        TargetUnavailable: Dask distributed is not installed (the message names the extra).
    """
    _require_dask()
    where = settings.listening
    options = {
        "host": where.dask_host(),
        "port": where.port,
        "protocol": _protocol(settings.tls),
        "dashboard": where.dashboard_port is not None,
        "dashboard_address": where.dashboard_address(),
    }
    spec = {"cls": SCHEDULER_CLASS, "opts": options}
    return [sys.executable, "-m", "distributed.cli.dask_spec", "--spec", json.dumps(spec)]


class SchedulerUnreachable(TinyHilError, ConnectionError):
    """No Dask scheduler answered at an address within the timeout."""


def reach_scheduler(address: str, *, timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S, tls: FarmTLS | None) -> None:
    """Connect to the scheduler at ``address`` once (a Dask handshake, with ``tls`` when given), then hang up.

    Raises:
        SchedulerUnreachable: nothing answered, or the handshake failed, within ``timeout_s`` seconds.
        TargetUnavailable: Dask distributed is not installed.
    """
    _require_dask()
    import asyncio

    from distributed.comm.core import connect
    from distributed.security import Security

    make_security: Any = Security  # distributed is untyped
    open_comm: Any = connect
    arguments = (tls.security() if tls is not None else make_security()).get_connection_args("worker")

    async def handshake() -> None:
        comm = await open_comm(address, timeout=timeout_s, **arguments)
        await comm.close()

    try:
        asyncio.run(handshake())
    except (OSError, TimeoutError) as exc:
        detail = printable(str(exc) or type(exc).__name__, newlines=False)
        cause = "" if detail.startswith(_DASK_TIMED_OUT) else f": {detail}"  # Dask's own says what ours does
        raise SchedulerUnreachable(f"no Dask scheduler answers at {address} within {timeout_s:g} s "
                                   f"(--connect-timeout){cause}") from None  # fmt: skip
