"""The portable HIL suite, unchanged, on the NV target's runtime over the CUDA driver double."""

from __future__ import annotations

import pytest

CONFTEST = """
from support.scripts import TESTS, load_script

_plugin = load_script(TESTS / "nv" / "double_plugin.py", "tinyhil_tests_nv_double_plugin")
pytest_hil_select_targets = _plugin.pytest_hil_select_targets
pytest_hil_open_device = _plugin.pytest_hil_open_device
"""
# What NV does not claim: GPU memory faults naming the address (CUDA reports a sticky CUDA_ERROR_ILLEGAL_ADDRESS
# without one), a second GPU (the double has one), engines ordered by signals (one CUDA stream orders everything).
SKIPPED = {"test_kernels.py": ["memory-faults", "signals"], "test_multi_gpu.py": ["multi-gpu", "multi-gpu"]}


def test_the_portable_suite_passes_on_nv_over_the_double(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest("--pyargs", "tinyhil.fixtures.suite", "--hil-target", "NV", "-p", "no:randomly",
                                "-p", "no:cacheprovider", "-rs")  # fmt: skip
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) == 0, result.stdout.str()
    assert outcomes["passed"] >= 39 and outcomes["skipped"] == 5
    for module, capabilities in SKIPPED.items():
        for capability in capabilities:
            result.stdout.fnmatch_lines([f"SKIPPED*{module}*target NV lacks capability '{capability}'"])
    result.stdout.fnmatch_lines(["SKIPPED*test_device.py*target NV has every runtime capability; nothing to refuse"])
