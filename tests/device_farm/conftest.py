"""Fixtures of the farm tests."""

from __future__ import annotations

import pytest
from support.hosts import FakeHost


@pytest.fixture
def fake_host() -> FakeHost:
    """Builds fake host trees (two KFD GPUs, one NVIDIA GPU) under a directory."""
    return FakeHost()
