"""Fuzz NV launches: every launch the runtime accepts, the driver (the double, holding CUDA's documented limits)
accepts with exactly those dimensions, and every launch inside both CUDA's and the core's limits is accepted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from support.scripts import TESTS, load_script

from tinyhil._check import check_launch
from tinyhil.device import Buffer, Program
from tinyhil.errors import InvalidArgument
from tinyhil.fixtures.suite.test_multi_gpu import SCALE
from tinyhil.nv import NvDevice

pytestmark = pytest.mark.fuzz
cuda = load_script(TESTS / "nv" / "cuda_double.py", "tinyhil_tests_nv_cuda_double")
LIMITS = cuda.H200_ATTRIBUTES
A = cuda.A
BLOCK = tuple(A[f"CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_{axis}"] for axis in "XYZ")
GRID = tuple(A[f"CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_{axis}"] for axis in "XYZ")


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, NvDevice, Program, Buffer]]:
    double = cuda.CudaDouble(run_kernels=False)
    with NvDevice("NV", double, compiler=cuda.DoubleCompiler(double, tmp_path_factory.mktemp("nv"))) as device:
        yield double, device, device.compile(SCALE, "scale"), device.alloc(64)


def _sizes(edges: list[int]) -> st.SearchStrategy[int]:
    near = st.sampled_from(edges).flatmap(lambda edge: st.integers(max(1, edge - 2), edge + 2))
    return st.one_of(st.integers(1, 8), near, st.integers(1, 1 << 33))


dims = st.lists(_sizes([64, 1024, 65535, 0x7FFF_FFFF, 0xFFFF_FFFF]), min_size=1, max_size=3).map(tuple)


def _within_cuda(grid: tuple[int, ...], local: tuple[int, ...]) -> bool:
    grid3, local3 = (*grid, 1, 1)[:3], (*local, 1, 1)[:3]
    threads = local3[0] * local3[1] * local3[2]
    return (threads <= LIMITS[A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK]
            and all(n <= LIMITS[a] for n, a in zip(local3, BLOCK, strict=True))
            and all(n <= LIMITS[a] for n, a in zip(grid3, GRID, strict=True)))  # fmt: skip


def _within_core(grid: tuple[int, ...], local: tuple[int, ...]) -> bool:
    try:
        check_launch(grid, local, max_workgroups=NvDevice.max_workgroups)
    except InvalidArgument:
        return False
    return True


@given(grid=dims, local=dims)
def test_a_launch_runs_exactly_when_it_is_inside_every_limit(launcher: Any, grid: Any, local: Any) -> None:
    double, device, program, buf = launcher
    launches = len(double.calls_to("cuLaunchKernel"))
    try:
        device.exec(program, grid, local, [buf, 1])
    except InvalidArgument:
        accepted = False
    else:
        accepted = True
        [*_, launch] = double.calls_to("cuLaunchKernel")
        assert launch[1:7] == (*grid, 1, 1)[:3] + (*local, 1, 1)[:3]
    event("accepted" if accepted else "refused")
    assert accepted == (_within_cuda(grid, local) and _within_core(grid, local))
    assert len(double.calls_to("cuLaunchKernel")) == launches + accepted
