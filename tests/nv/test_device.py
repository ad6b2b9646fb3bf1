"""The NV device runtime over the CUDA driver double: every runtime method, the launch limits, sticky errors."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tinyhil.errors import InvalidArgument, StateError
from tinyhil.fixtures.suite.test_kernels import LOAD_WORD, VECTOR_ADD
from tinyhil.fixtures.suite.test_multi_gpu import SCALE
from tinyhil.nv import CudaError, CUresult, NvDevice
from tinyhil.portable_kernel import TH_ARGS_BYTES, TH_MAX_ARGS
from tinyhil.profile import ProfileRangeEvent


def test_open_reads_the_device_and_retains_its_primary_context(nv: NvDevice, double: Any) -> None:
    assert [name for name, _ in double.calls[:3]] == ["cuInit", "cuDeviceGetCount", "cuDeviceGet"]
    assert double.calls_to("cuInit") == [(0,)]
    assert nv.limits.arch == "sm_90" and nv.limits.max_block_dim == (1024, 1024, 64)
    assert nv.limits.max_grid_dim == (0x7FFF_FFFF, 65535, 65535) and nv.limits.max_threads_per_block == 1024
    assert double.calls_to("cuCtxSetCurrent") == [(nv.context,)] and double.retains == {0: 1}
    assert double.calls_to("cuStreamCreate") == [(0,)]
    assert "memory-faults" not in nv.capabilities and "exec" in nv.capabilities
    assert nv.device_name in repr(nv)


def test_copyin_and_copyout_pass_the_documented_arguments(nv: NvDevice, double: Any) -> None:
    data = np.arange(10_000, dtype=np.uint8)
    buf = nv.alloc(data.nbytes)
    assert double.calls_to("cuMemAlloc") == [(data.nbytes,)] and buf.addr in double.allocations
    nv.copyin(buf, data[:100], offset=50)
    [(dst, src, count, stream)] = double.calls_to("cuMemcpyHtoDAsync")
    assert (dst, count, stream) == (buf.addr + 50, 100, nv.stream)
    assert isinstance(src, memoryview) and src.nbytes == 100
    # copyin returns with the bytes on the GPU and its profile range resolved:
    names = [name for name, _ in double.calls]
    assert names[-5:] == ["cuMemcpyHtoDAsync", "cuEventRecord", "cuStreamSynchronize", "cuEventElapsedTime",
                          "cuEventElapsedTime"]  # fmt: skip
    out = np.zeros(100, np.uint8)
    nv.copyout_into(buf, out, offset=50)
    [(host, src_dev, count, stream)] = double.calls_to("cuMemcpyDtoHAsync")
    assert (src_dev, count, stream) == (buf.addr + 50, 100, nv.stream) and isinstance(host, memoryview)
    np.testing.assert_array_equal(out, data[:100])
    assert nv.copyout(buf, nbytes=4, offset=50) == bytearray(data[:4].tobytes())


def test_fill_and_copy_queue_on_the_stream_in_order(nv: NvDevice, double: Any) -> None:
    a, b = nv.alloc(4096), nv.alloc(4096)
    nv.fill(a, 0x5A)
    nv.fill(a, 0x11, nbytes=16, offset=8)
    nv.copy(b, a, nbytes=1024)
    assert double.calls_to("cuMemsetD8Async") == [(a.addr, 0x5A, 4096, nv.stream), (a.addr + 8, 0x11, 16, nv.stream)]
    assert double.calls_to("cuMemcpyDtoDAsync") == [(b.addr, a.addr, 1024, nv.stream)]
    assert double.streams[nv.stream].work  # asynchronous until something waits for the stream
    nv.synchronize()
    assert not double.streams[nv.stream].work
    assert nv.copyout(b, nbytes=32) == b"\x5a" * 8 + b"\x11" * 16 + b"\x5a" * 8
    assert nv.copyout(b, nbytes=8, offset=1024) == bytes([0xCD] * 8)  # past the copy: cuMemAlloc's undefined bytes


def test_a_zero_byte_buffer_is_a_real_allocation(nv: NvDevice, double: Any) -> None:
    empty = nv.alloc(0)
    assert double.calls_to("cuMemAlloc") == [(1,)]  # cuMemAlloc refuses 0 bytes
    nv.copyin(empty, b"")
    assert nv.copyout(empty) == bytearray() and not double.calls_to("cuMemcpyHtoDAsync")
    nv.free(empty)
    assert double.calls_to("cuMemFree") == [(empty.addr,)]


@pytest.mark.parametrize("n", [1, 1000, 65_537])
def test_the_suites_vector_add_matches_numpy_bit_for_bit(nv: NvDevice, double: Any, n: int) -> None:
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    bufs = [nv.alloc(a.nbytes) for _ in range(3)]
    nv.copyin(bufs[0], a)
    nv.copyin(bufs[1], b)
    program = nv.compile(VECTOR_ADD, "vector_add")
    groups = -(-n // 64)
    nv.exec(program, groups, 64, [*bufs, n])
    [launch] = double.calls_to("cuLaunchKernel")
    assert launch[1:10] == (groups, 1, 1, 64, 1, 1, 0, nv.stream, launch[9]) and launch[10] == 0  # extra: NULL
    np.testing.assert_array_equal(double.launched_words[-1][:4], [buf.addr for buf in bufs] + [n])
    assert not double.launched_words[-1][4:].any()
    np.testing.assert_array_equal(np.frombuffer(nv.copyout(bufs[2]), np.float32), a + b)


def test_a_program_is_loaded_once_and_its_function_looked_up_once(nv: NvDevice, double: Any) -> None:
    buf = nv.alloc(4 * 256)
    nv.copyin(buf, np.arange(256, dtype=np.uint32))
    program = nv.compile(SCALE, "scale")
    for _ in range(3):
        nv.exec(program, 4, 64, [buf, 2])
    assert len(double.calls_to("cuModuleLoadData")) == 1 and double.calls_to("cuModuleGetFunction")[0][1] == "scale"
    assert len(double.calls_to("cuModuleGetFunction")) == 1
    np.testing.assert_array_equal(np.frombuffer(nv.copyout(buf), np.uint32), np.arange(256, dtype=np.uint32) * 8)


def test_negative_int_arguments_pass_as_twos_complement_words(nv: NvDevice, double: Any) -> None:
    src, dst = nv.alloc(4), nv.alloc(4)
    nv.exec(nv.compile(LOAD_WORD, "load_word"), 1, 1, [src, dst, -1])
    assert double.launched_words[-1][2] == (1 << 64) - 1


def test_an_entry_point_missing_from_the_module_is_cuda_error_not_found(nv: NvDevice) -> None:
    program = nv.compile(SCALE, "scale_typo")
    with pytest.raises(CudaError, match="cuModuleGetFunction returned CUDA_ERROR_NOT_FOUND") as caught:
        nv.exec(program, 1, 1, [])
    assert caught.value.result == "CUDA_ERROR_NOT_FOUND" and caught.value.target == "NV"
    nv.synchronize()  # not sticky: the device is still usable


@pytest.mark.parametrize(
    ("grid", "local", "message"),
    [
        (1, (1, 1, 128), r"local=\(1, 1, 128\) has 128 along z, expected at most 64 \(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_D"),
        ((1, 65536), 1, r"grid=\(1, 65536, 1\) has 65536 along y, expected at most 65535 \(CU_DEVICE_ATTRIBUTE_MAX_"),
        ((1, 1, 70000), 1, r"has 70000 along z, expected at most 65535 \(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z\)"),
        (0x8000_0000, 1, r"has 2147483648 along x, expected at most 2147483647 \(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X\)"),
        (1, 2048, r"local=2048, expected each dimension <= 0x400 \(WORKGROUP_MAX_DIM\)"),
        (1, (32, 32, 2), r"2048 threads per workgroup, expected at most 1024"),
    ],
)  # fmt: skip
def test_launches_past_cudas_limits_are_refused_before_any_driver_call(
    nv: NvDevice, double: Any, grid: Any, local: Any, message: str
) -> None:
    program = nv.compile(SCALE, "scale")
    before = len(double.calls)
    with pytest.raises(InvalidArgument, match=message):
        nv.exec(program, grid, local, [nv.alloc(4), 1])
    assert [name for name, _ in double.calls[before:]] == ["cuCtxGetCurrent", "cuMemAlloc"]  # nothing launched


def test_a_device_reporting_smaller_limits_is_held_to_them(cuda: ModuleType, tmp_path: Path) -> None:
    attributes = {**cuda.H200_ATTRIBUTES, cuda.A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 512}
    double = cuda.CudaDouble(attributes=attributes)
    with NvDevice("NV", double, compiler=cuda.DoubleCompiler(double, tmp_path)) as device:
        program = device.compile(SCALE, "scale")
        with pytest.raises(InvalidArgument, match="1024 threads per block, expected at most 512"):
            device.exec(program, 1, 1024, [device.alloc(4096), 1])
        device.exec(program, 2, 512, [buf := device.alloc(4096), 1])
        device.synchronize()
        assert buf.nbytes == 4096


def test_more_arguments_than_the_kernel_parameter_holds_are_refused(nv: NvDevice) -> None:
    program = nv.compile(SCALE, "scale")
    with pytest.raises(InvalidArgument, match=f"args has {TH_MAX_ARGS + 1} items, expected at most {TH_MAX_ARGS}"):
        nv.exec(program, 1, 1, [0] * (TH_MAX_ARGS + 1))
    assert TH_ARGS_BYTES == 8 * TH_MAX_ARGS


def test_timestamps_and_profile_ranges_come_from_events(nv: NvDevice, double: Any, cuda: ModuleType) -> None:
    first = nv.timestamp()
    buf = nv.alloc(1 << 20)
    nv.copyin(buf, bytes(1 << 20))
    program = nv.compile(SCALE, "scale")
    nv.exec(program, 4, 64, [buf, 3])
    nv.fill(buf, 1, nbytes=4096)
    nv.synchronize()
    last = nv.timestamp()
    assert first == 0 and last == double.clock_ns > first
    events = [e for e in nv.profile_events if isinstance(e, ProfileRangeEvent)]
    assert [(e.name, e.queue, e.key) for e in events] == [
        ("copyin", "copy", None),
        ("scale", "compute", program.key),
        ("fill", "copy", None),
    ]
    assert all(e.start_ns <= e.end_ns for e in events) and events[0].end_ns <= events[1].start_ns
    assert dict(events[1].args) == {"grid": [4, 1, 1], "local": [64, 1, 1]}
    assert events[1].end_ns - events[1].start_ns == cuda.LAUNCH_NS  # the double's virtual launch time, exactly
    assert len(double.events) <= 6  # events are reused, not created per operation forever


def test_timestamps_never_run_backwards(nv: NvDevice) -> None:
    stamps = [nv.timestamp() for _ in range(5)]
    assert stamps == sorted(stamps)


def test_a_sticky_error_loses_the_context_and_the_next_call_names_it(cuda: ModuleType, tmp_path: Path) -> None:
    fault = cuda.CudaFault("cuStreamSynchronize", 2, CUresult.CUDA_ERROR_ILLEGAL_ADDRESS)
    double = cuda.CudaDouble(faults=[fault])
    device = NvDevice("NV", double, compiler=cuda.DoubleCompiler(double, tmp_path))
    buf = device.alloc(4096)
    device.copyin(buf, bytes(4096))  # the first stream synchronisation
    device.exec(device.compile(SCALE, "scale"), 1, 1, [buf, 1])
    with pytest.raises(CudaError, match="cuStreamSynchronize returned CUDA_ERROR_ILLEGAL_ADDRESS") as caught:
        device.synchronize()
    assert caught.value.result == "CUDA_ERROR_ILLEGAL_ADDRESS" and caught.value.code == 700
    calls = len(double.calls)
    with pytest.raises(StateError, match=r"earlier error \(cuStreamSynchronize returned CUDA_ERROR_ILLEGAL_ADDRESS"):
        device.copyout(buf)
    with pytest.raises(StateError, match="earlier error"):
        device.alloc(16)
    assert len(double.calls) == calls  # refused before reaching the driver
    device.close()  # still closes: the primary context is released, taking its memory with it
    assert double.live()["retains"] == 0 and double.freed_by_reset == 1 and device.closed


def test_a_non_sticky_error_leaves_the_device_usable(cuda: ModuleType, tmp_path: Path) -> None:
    double = cuda.CudaDouble(faults=[cuda.CudaFault("cuMemAlloc", 1, CUresult.CUDA_ERROR_OUT_OF_MEMORY)])
    with NvDevice("NV", double, compiler=cuda.DoubleCompiler(double, tmp_path)) as device:
        with pytest.raises(CudaError, match="cuMemAlloc returned CUDA_ERROR_OUT_OF_MEMORY") as caught:
            device.alloc(1 << 40)
        assert isinstance(caught.value, RuntimeError) and device.failure is None
        buf = device.alloc(64)
        device.fill(buf, 7)
        assert device.copyout(buf) == b"\x07" * 64


def test_close_releases_everything_it_created(cuda: ModuleType, tmp_path: Path) -> None:
    double = cuda.CudaDouble()
    with NvDevice("NV", double, compiler=cuda.DoubleCompiler(double, tmp_path)) as device:
        buf = device.alloc(4096)
        device.exec(device.compile(SCALE, "scale"), 1, 64, [buf, 2])
        device.fill(buf, 0)  # still pending at close
        device.timestamp()
    assert double.live() == {"allocations": 0, "modules": 0, "events": 0, "streams": 0, "retains": 0}
    assert double.freed_by_reset == 0 and double.calls[-1] == ("cuDevicePrimaryCtxRelease", (0,))
    with pytest.raises(StateError, match="closed"):
        device.alloc(1)


def test_an_ordinal_past_the_gpus_is_an_error_naming_the_count(cuda: ModuleType, tmp_path: Path) -> None:
    double = cuda.CudaDouble(gpus=2)
    with pytest.raises(InvalidArgument, match=r"NV:2: GPU 2, expected 0..1 \(CUDA sees 2 GPUs here\)"):
        NvDevice("NV", double, ordinal=2)
    with NvDevice("NV", double, ordinal=1, compiler=cuda.DoubleCompiler(double, tmp_path)) as second:
        assert second.cu_device == 1 and double.retains == {1: 1}


def test_a_failure_while_opening_releases_what_was_taken(cuda: ModuleType) -> None:
    double = cuda.CudaDouble(faults=[cuda.CudaFault("cuEventCreate", 1, CUresult.CUDA_ERROR_OUT_OF_MEMORY)])
    with pytest.raises(CudaError, match="cuEventCreate returned CUDA_ERROR_OUT_OF_MEMORY"):
        NvDevice("NV", double)
    assert double.live() == {"allocations": 0, "modules": 0, "events": 0, "streams": 0, "retains": 0}


def test_the_default_compiler_is_nvrtc_for_the_devices_compute_capability(cuda: ModuleType) -> None:
    attributes = {**cuda.H200_ATTRIBUTES, cuda.A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: 9,
                  cuda.A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: 8}  # fmt: skip
    with NvDevice("NV", cuda.CudaDouble(attributes=attributes)) as device:
        assert device.compiler.name == "NVRTC:sm_89"


def test_two_gpus_open_side_by_side_each_run_in_their_own_context(cuda: ModuleType, tmp_path: Path) -> None:
    double = cuda.CudaDouble(gpus=2)
    first = NvDevice("NV", double, ordinal=0, compiler=cuda.DoubleCompiler(double, tmp_path))
    second = NvDevice("NV", double, ordinal=1, compiler=first.compiler)
    try:
        a, b = first.alloc(64), second.alloc(64)
        for _ in range(2):  # alternating: each call finds the other device's context current
            first.fill(a, 1)
            second.fill(b, 2)
        assert first.copyout(a) == b"\x01" * 64 and second.copyout(b) == b"\x02" * 64
        switches = double.calls_to("cuCtxSetCurrent")
        assert switches[:2] == [(first.context,), (second.context,)]
        assert len(switches) == 2 + 2 + 2 * 2 + 2  # the opens, the allocs, the fills, the copyouts
        switched = len(switches)
        first.copyout(a)
        first.copyout(a)
        assert len(double.calls_to("cuCtxSetCurrent")) == switched + 1  # once current, it stays so
        first.free(a)  # nothing left to free at close: close itself must make its context current
        second.copyout(b)
    finally:
        first.close()
        second.close()
    assert double.live() == {"allocations": 0, "modules": 0, "events": 0, "streams": 0, "retains": 0}
