"""A suite with a test of every outcome, and the outcome and reason each must be reported with, by the plugin's
``--hil-summary`` and by a farm run alike (``tests/fixtures/test_outcomes.py``, ``tests/device_farm/
test_shard_outcomes.py``). Every test takes ``hil_device``, so each runs once per selected target."""

from __future__ import annotations

from typing import Final

__all__ = ["EXPECTED", "SUITE"]

SUITE: Final = """
import pytest


@pytest.fixture
def broken_setup():
    raise RuntimeError("setup broke")


@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown broke")


def test_passes(hil_device):
    pass


def test_fails(hil_device):
    assert hil_device is None, "wrong device"


def test_skips(hil_device):
    pytest.skip("not today")


@pytest.mark.xfail(reason="known bug")
def test_xfails(hil_device):
    raise ValueError("the known bug")


@pytest.mark.xfail(reason="fixed since", run=False)
def test_xfails_without_running(hil_device):
    raise AssertionError("must not run")


@pytest.mark.xfail(reason="fixed since")
def test_xpasses(hil_device):
    pass


@pytest.mark.xfail(reason="must fail", strict=True)
def test_xpasses_strictly(hil_device):
    pass


def test_errors_in_setup(hil_device, broken_setup):
    pass


def test_errors_in_teardown(hil_device, broken_teardown):
    pass


def test_fails_then_errors_in_teardown(hil_device, broken_teardown):
    assert hil_device is None, "call failed"


def test_skips_then_errors_in_teardown(hil_device, broken_teardown):
    pytest.skip("skipped first")
"""

# test name -> (outcome, reason): the rule of docs/farm.md ("The run summary") applied to each test above.
EXPECTED: Final = {
    "test_passes": ("passed", ""),
    "test_fails": ("failed", "AssertionError: wrong device"),
    "test_skips": ("skipped", "not today"),
    "test_xfails": ("xfailed", "known bug"),
    "test_xfails_without_running": ("xfailed", "[NOTRUN] fixed since"),
    "test_xpasses": ("xpassed", "fixed since"),
    "test_xpasses_strictly": ("failed", "[XPASS(strict)] must fail"),
    "test_errors_in_setup": ("error", "RuntimeError: setup broke"),
    "test_errors_in_teardown": ("error", "RuntimeError: teardown broke"),
    "test_fails_then_errors_in_teardown": ("failed", "AssertionError: call failed"),
    "test_skips_then_errors_in_teardown": ("error", "RuntimeError: teardown broke"),
}
