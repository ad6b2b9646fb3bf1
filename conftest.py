"""Repository-level pytest configuration: hypothesis profiles.

``ci`` (selected when ``CI`` is set) is derandomized and keeps no example database, so CI runs are reproducible;
``dev`` is the default for laptops.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
