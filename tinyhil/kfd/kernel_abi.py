"""The sysfs topology path under its old import, for ``device_farm/discovery.py`` alone.

The KFD ABI lives in ``tinyhil.spec`` (this path in :mod:`tinyhil.spec.kfd_topology`). This module goes when that one
import reads ``tinyhil.spec.kfd_topology``; nothing else may import it.
"""

from __future__ import annotations

from tinyhil.spec.kfd_topology import KFD_TOPOLOGY_PATH

__all__ = ["KFD_TOPOLOGY_PATH"]
