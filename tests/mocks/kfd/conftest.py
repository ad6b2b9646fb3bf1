"""Fixtures for MOCKKFD's tests: fake GPUs on one event kernel, a MockKFD over them, a KFD client on its seam."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tinyhil.emulators.kernel import EventKernel
from tinyhil.kfd import KFD
from tinyhil.mocks.kfd import MockKFD


def load_fake_gpu() -> ModuleType:
    """``fake_gpu.py`` as one shared module (test folders are not packages; tests/kfd loads it the same way)."""
    name = "tinyhil_tests_kfd_fake_gpu"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("fake_gpu.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def kernel() -> EventKernel:
    return EventKernel(seed=1)


@pytest.fixture
def make_mock(kernel: EventKernel) -> Iterator[Callable[..., MockKFD]]:
    """``make_mock(110000, 120001, vram_bytes=...)``: a MockKFD over one fake GPU per gfx_target_version."""
    made: list[MockKFD] = []
    fake_gpu = load_fake_gpu()

    def make(*versions: int, **options: Any) -> MockKFD:
        vram_bytes = options.pop("vram_bytes", 64 << 20)
        gpus = [fake_gpu.FakeGpu(kernel, gfx_target_version=v, vram_bytes=vram_bytes) for v in versions or (110000,)]
        mock = MockKFD(gpus, **options)
        made.append(mock)
        return mock

    yield make
    for mock in made:
        mock.close()


@pytest.fixture
def mock(make_mock: Callable[..., MockKFD]) -> MockKFD:
    return make_mock(110000, 120001)


@pytest.fixture
def kfd(mock: MockKFD) -> Iterator[KFD]:
    client = KFD(mock.fileio)
    yield client
    client.close()
