"""Runs across hosts on a Dask cluster: the farm's scheduler and worker settings
(:mod:`~tinyhil.device_farm.cluster.dask_cluster`), Dask's server classes with the farm's defaults
(:mod:`~tinyhil.device_farm.cluster.dask_servers`), the farm worker's preload
(:mod:`~tinyhil.device_farm.cluster.dask_worker`), the resources a worker offers
(:mod:`~tinyhil.device_farm.cluster.resources`), mutual TLS (:mod:`~tinyhil.device_farm.cluster.security`,
:mod:`~tinyhil.device_farm.cluster.certs`) and a cluster on this host for tests and benchmarks
(:mod:`~tinyhil.device_farm.cluster.loopback`).

Only what needs no farm extra is imported here: the modules that import Dask or ``cryptography`` are imported by
name where they are used.
"""

from __future__ import annotations

from tinyhil.device_farm.cluster.dask_cluster import SchedulerSettings, WorkerSettings, reach_scheduler
from tinyhil.device_farm.cluster.resources import worker_resources
from tinyhil.device_farm.cluster.security import FarmTLS

__all__ = ["FarmTLS", "SchedulerSettings", "WorkerSettings", "reach_scheduler", "worker_resources"]
