"""The device farm: inventory, health, leases, planning, the engine and its shards, reports, and the Dask cluster
for runs across hosts.

- :mod:`~tinyhil.device_farm.inventory`: the hardware map, discovery, the map's drift against a host;
- :mod:`~tinyhil.device_farm.health`: board health states and the probes that decide them;
- :mod:`~tinyhil.device_farm.leases`, :mod:`~tinyhil.device_farm.state`: one test process per board slot, and the
  directory the farm keeps its state in;
- :mod:`~tinyhil.device_farm.collection`, :mod:`~tinyhil.device_farm.planning`: the pairs a run collects, the
  share it runs and the plan that routes them;
- :mod:`~tinyhil.device_farm.engine`: one :class:`~tinyhil.device_farm.engine.FarmEngine`, with its local and Dask
  runners; :mod:`~tinyhil.device_farm.shard`: a shard's parent side and its pytest-plugin side;
- :mod:`~tinyhil.device_farm.journal`, :mod:`~tinyhil.device_farm.quarantine`,
  :mod:`~tinyhil.device_farm.reports`: what a run records, what it tolerates, what it writes;
- :mod:`~tinyhil.device_farm.cluster`: the Dask scheduler and workers, TLS;
- :mod:`~tinyhil.device_farm.run`: a run, made by one constructor and run by :func:`run_farm`.

The ``tinyhil`` command line that drives it lives in :mod:`tinyhil.cli`.
"""

from __future__ import annotations

from tinyhil.device_farm.run import FarmRun, new_run, run_farm

__all__ = ["FarmRun", "new_run", "run_farm"]
