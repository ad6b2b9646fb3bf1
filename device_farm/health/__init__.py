"""Board health: the states a board goes through and the record of them
(:mod:`~tinyhil.device_farm.health.states`, with its journal of changes, :mod:`~tinyhil.device_farm.health.log`),
the probes that decide them (:mod:`~tinyhil.device_farm.health.probes`), and probes under the board's lease
(:mod:`~tinyhil.device_farm.health.leased`)."""

from __future__ import annotations

from tinyhil.device_farm.health.leased import LeasedProbe, power_cycle
from tinyhil.device_farm.health.log import HealthChange, read_changes
from tinyhil.device_farm.health.probes import probe_board
from tinyhil.device_farm.health.states import HealthBook, HealthState, ProbeResult

__all__ = [
    "HealthBook",
    "HealthChange",
    "HealthState",
    "LeasedProbe",
    "ProbeResult",
    "power_cycle",
    "probe_board",
    "read_changes",
]
