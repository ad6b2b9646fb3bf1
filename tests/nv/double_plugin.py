"""A pytest plugin that runs the portable suite's ``NV`` tests on the NV runtime over the CUDA driver double.

It provides the two tinyhil hooks: ``NV`` is selected as registered, except that its probe says it can run, and
each test's device is an :class:`~tinyhil.nv.NvDevice` over a fresh double (so every Python path of the target
runs here, and nothing of the suite changes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from support.scripts import TESTS, load_script

from tinyhil.device import Device
from tinyhil.nv import NvDevice
from tinyhil.registry import Target, default_registry

_double = load_script(TESTS / "nv" / "cuda_double.py", "tinyhil_tests_nv_cuda_double")


def _can_run() -> str | None:
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_hil_select_targets(config: pytest.Config, selectors: Sequence[str]) -> list[Target] | None:
    if list(selectors) != ["NV"]:
        return None
    resolved = default_registry().resolve("NV")
    return [dataclasses.replace(resolved, definition=dataclasses.replace(resolved.definition, probe=_can_run))]


@pytest.hookimpl(tryfirst=True)
def pytest_hil_open_device(target: Target, request: pytest.FixtureRequest) -> Device | None:
    if target.name != "NV":
        return None
    double = _double.CudaDouble()
    compiler = _double.DoubleCompiler(double, request.getfixturevalue("tmp_path"))
    return NvDevice(target.name, double, compiler=compiler, capabilities={"real-hardware"})
