"""A served board's probe is the real target's probe, run under ``tinyhil serve``; without the tools it fails naming
the Debian package."""

from __future__ import annotations

import pytest

from tinyhil.device_farm.health.probes import probe_board
from tinyhil.device_farm.health.served_probe import probe_served
from tinyhil.device_farm.inventory.hwmap import parse_hwmap
from tinyhil.device_farm.inventory.served_boards import ServedLocator
from tinyhil.device_farm.shard.served import served_unavailable_reason
from tinyhil.mocks.serve.kfd.build import COMPILER_PACKAGE

MAP = """
[[board]]
id = "served-kfd"
kind = "served"
served = { serve = "kfd", target = "MOCKKFD+AMD", options = { gpus = 1 } }

[[board]]
id = "null"
kind = "emulated"
emulated = { target = "NULL" }
"""


def test_the_served_kfd_board_is_probed_over_dev_kfd_under_tinyhil_serve() -> None:
    board = parse_hwmap(MAP, "lab.toml").board("served-kfd")
    assert isinstance(board.locator, ServedLocator)
    reason = served_unavailable_reason(board.locator)
    if reason is not None:
        pytest.skip(reason)
    result = probe_board(board)
    assert result.ok, result.detail
    assert result.detail.startswith("served kfd: KFD+AMD opened, KFD ")


def test_without_a_compiler_the_probe_fails_naming_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    board = parse_hwmap(MAP, "lab.toml").board("served-kfd")
    result = probe_board(board)
    assert not result.ok
    assert result.detail.endswith(f"install the Debian package {COMPILER_PACKAGE}")


def test_probe_served_refuses_a_board_that_is_not_served() -> None:
    result = probe_served(parse_hwmap(MAP, "lab.toml").board("null"))
    assert not result.ok
    assert "expected a served one" in result.detail
