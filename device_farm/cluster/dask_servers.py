"""Dask's scheduler and worker as the farm runs them: their HTTP server listens only when a dashboard is asked for.

Dask's own classes always open an HTTP server (the scheduler on port 8787 of every interface, even with
``--no-dashboard``), serving the cluster's layout (``/json/identity.json``) and its logs to anyone who reaches it.
These subclasses change that one thing: with ``dashboard=False`` (the farm's default) no HTTP server is started at
all; with ``dashboard=True`` Dask's own starts, at the ``dashboard_address`` the farm gives (on loopback,
:mod:`~tinyhil.device_farm.cluster.dask_cluster`). Everything else is Dask's.
"""

from __future__ import annotations

from typing import Any

from distributed import Scheduler, Worker

__all__ = ["FarmScheduler", "FarmWorker"]


class _HTTPWhenAsked:
    """Start Dask's HTTP server only when the constructor's ``dashboard`` is true (Dask calls
    ``start_http_server`` from the scheduler's ``__init__`` and the worker's start)."""

    def __init__(self, *args: Any, dashboard: bool = False, **kwargs: Any) -> None:
        self.farm_http = bool(dashboard)
        super().__init__(*args, dashboard=dashboard, **kwargs)  # type: ignore[call-arg]  # Dask's, next in the MRO

    def start_http_server(self, *args: Any, **kwargs: Any) -> None:
        if self.farm_http:
            super().start_http_server(*args, **kwargs)  # type: ignore[misc]


class FarmScheduler(_HTTPWhenAsked, Scheduler):
    """Dask's scheduler, with an HTTP server only when ``dashboard`` is true."""


class FarmWorker(_HTTPWhenAsked, Worker):
    """Dask's worker (the nanny starts it through ``--worker-class``), with an HTTP server only when ``dashboard``."""
