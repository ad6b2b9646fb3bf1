"""The device farm: running the portable suite on targets, reports, and the ``tinyhil`` command line."""

from __future__ import annotations

from tinyhil.device_farm.runner import RunOutcome, run_suite

__all__ = ["RunOutcome", "run_suite"]
