"""The device farm and the ``tinyhil`` command line: inventory, health, leases, planning, the local engine, reports."""

from __future__ import annotations

from tinyhil.device_farm.farm_run import FarmRun, run_farm

__all__ = ["FarmRun", "run_farm"]
