"""The loopback cluster of :mod:`tinyhil.device_farm.loopback` for tests, and ``tinyhil farm run`` to completion."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from tinyhil.device_farm.loopback import TINYHIL, LoopbackCluster, emulated_board, loopback_cluster

__all__ = ["LoopbackCluster", "emulated_board", "farm_run", "loopback_cluster", "needs_dask"]

needs_dask = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None, reason="needs Dask distributed (pip install 'tinyhil[farm]')"
)


def farm_run(*args: str, cwd: Path, env: Mapping[str, str] | None = None,
             timeout_s: float = 300) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``tinyhil farm run ARGS`` to completion."""
    return subprocess.run([*TINYHIL, "farm", "run", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout_s, env={**os.environ, **(env or {})}, check=False)  # fmt: skip
