"""Board health: the states a board goes through and the record of them
(:mod:`~tinyhil.device_farm.health.states`), and the probes that decide them
(:mod:`~tinyhil.device_farm.health.probes`)."""

from __future__ import annotations

from tinyhil.device_farm.health.probes import probe_board
from tinyhil.device_farm.health.states import HealthBook, HealthState, ProbeResult

__all__ = ["HealthBook", "HealthState", "ProbeResult", "probe_board"]
