"""The NV runtime's tests run over the CUDA driver double of ``cuda_double.py`` (no GPU, no driver)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from support.scripts import TESTS, load_script

from tinyhil.nv import NvDevice


def double_module() -> ModuleType:
    return load_script(TESTS / "nv" / "cuda_double.py", "tinyhil_tests_nv_cuda_double")


@pytest.fixture
def cuda() -> ModuleType:
    """The double's module: ``cuda.CudaDouble``, ``cuda.CudaFault``, ``cuda.DoubleCompiler``."""
    return double_module()


@pytest.fixture
def double(cuda: ModuleType) -> object:
    return cuda.CudaDouble()


@pytest.fixture
def nv(cuda: ModuleType, double: object, tmp_path: Path) -> Iterator[NvDevice]:
    """An NV device over the double, compiling with NVRTC (where installed) and the host C compiler."""
    device = NvDevice("NV", double, compiler=cuda.DoubleCompiler(double, tmp_path))  # type: ignore[arg-type]
    yield device
    device.close()
