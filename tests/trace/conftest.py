"""Recordings shared by the trace tests: a small MOCKUSB+AMD session (bring-up, a two-chunk copyin, a copyout)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import tinyhil
from tinyhil.spec.copyin import CHUNK_BYTES

SIZE = CHUNK_BYTES + 4096  # two chunks: a full window and a short one


def session_data() -> np.ndarray:
    return np.random.default_rng(7).integers(0, 256, SIZE, dtype=np.uint8)


def run_session(device: tinyhil.Device) -> bytes:
    """What the recorded session does (the replay tests run it again)."""
    data = session_data()
    buf = device.alloc(data.nbytes)
    device.copyin(buf, data)
    out = bytes(device.copyout(buf))
    assert out == data.tobytes()
    return out


@pytest.fixture(name="run_session")
def _run_session() -> Callable[[tinyhil.Device], bytes]:
    """:func:`run_session`, for the tests (a conftest is no module they import)."""
    return run_session


@pytest.fixture(name="session_bytes")
def _session_bytes() -> bytes:
    return session_data().tobytes()


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``.hiltrace.jsonl`` of :func:`run_session` on MOCKUSB+AMD (read-only: copy it before editing)."""
    path = tmp_path_factory.mktemp("recorded") / "session.hiltrace.jsonl"
    with tinyhil.open_target("MOCKUSB+AMD", record=str(path)) as device:
        run_session(device)
    return path
