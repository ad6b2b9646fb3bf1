"""Kernel executors: the host-native code-object executor, and the executor seam DISPATCH_DIRECT plugs into."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tinyhil.amdgpu import pm4_launch
from tinyhil.compiler import HostCCompiler
from tinyhil.emulators.amdgpu import (
    AddressSpace,
    AmdGpu,
    GpuMemoryFault,
    HostNativeExecutor,
    KernelError,
    KernelExecutor,
    KernelMemory,
    Launch,
    QueueKind,
)
from tinyhil.emulators.kernel import EventKernel
from tinyhil.spec.code_object import CODE_OBJECT_MAGIC, ArgKind, CodeObject, pack_code_object

SCALE = b"""
#include <stdint.h>
void scale(uint64_t *args, const uint32_t group_id[3], const uint32_t group_size[3]) {
    int32_t *data = (int32_t *)args[0];
    for (uint32_t t = 0; t < group_size[0]; t++) data[group_id[0] * group_size[0] + t] *= (int32_t)args[1];
}
"""


@pytest.fixture(scope="module")
def compile_scale() -> Callable[[str], bytes]:
    compiler = HostCCompiler()
    if compiler.unavailable_reason():
        pytest.skip(str(compiler.unavailable_reason()))

    def compile_tagged(tag: str) -> bytes:
        # A tagged constant makes each shared object distinct, so the process-wide library cache starts cold for it.
        return compiler.compile(SCALE + f"int tinyhil_executor_test_{tag}_{os.getpid()} = 1;".encode())

    return compile_tagged


@pytest.fixture(scope="module")
def scale_so(compile_scale: Callable[[str], bytes]) -> bytes:
    return compile_scale("shared")


def _memory() -> AddressSpace:
    return AmdGpu(EventKernel(), vram_bytes=1 << 20, vram_at_zero=True).memory


def _memfds() -> list[str]:
    fds = Path("/proc/self/fd")
    names = []
    for fd in fds.iterdir() if fds.is_dir() else []:
        try:
            names.append(os.readlink(fd))
        except OSError:
            continue
    return [n for n in names if "tinyhil-kernel" in n]


def test_the_host_native_executor_satisfies_the_protocol() -> None:
    assert isinstance(HostNativeExecutor(), KernelExecutor)


def test_a_launch_runs_each_workgroup_and_reports_what_it_may_have_written(scale_so: bytes) -> None:
    memory = _memory()
    memory.write(0x1000, np.arange(64, dtype="<i4"))
    memory.write(0x10000, pack_code_object(CodeObject("scale", (ArgKind.POINTER, ArgKind.VALUE), scale_so)))
    memory.write(0x80, np.array([0x1000, 3], "<u8"))
    executor = HostNativeExecutor()
    written = executor.dispatch(memory, Launch(0x10000, (4, 1, 1), (16, 1, 1), 0x80))
    assert np.array_equal(np.frombuffer(memory.read(0x1000, 256), "<i4"), 3 * np.arange(64))
    assert written == [(0x1000, memory.vram_bytes - 0x1000)], "from the pointer to the end of its mapping"


def test_the_shared_object_loads_once_from_memory_leaving_no_file_behind(
    compile_scale: Callable[[str], bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scale_so = compile_scale("once")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # a private temp dir: other processes cannot disturb it
    before_tmp = set(Path(tempfile.gettempdir()).iterdir())
    before_fds = _memfds()
    memory = _memory()
    memory.write(0x80, np.array([0x1000, 1], "<u8"))
    # Two containers with the same shared object (different signatures) and two executors: one library load.
    memory.write(0x10000, pack_code_object(CodeObject("scale", (ArgKind.POINTER, ArgKind.VALUE), scale_so)))
    memory.write(
        0x20000, pack_code_object(CodeObject("scale", (ArgKind.POINTER, ArgKind.VALUE, ArgKind.VALUE), scale_so))
    )
    first, second = HostNativeExecutor(), HostNativeExecutor()
    for executor in (first, second):
        for _ in range(3):
            executor.dispatch(memory, Launch(0x10000, (1, 1, 1), (1, 1, 1), 0x80))
        executor.dispatch(memory, Launch(0x20000, (1, 1, 1), (1, 1, 1), 0x80))
    assert (first.programs_loaded, second.programs_loaded) == (2, 2)
    assert set(Path(tempfile.gettempdir()).iterdir()) <= before_tmp, "no temporary file is left behind"
    if Path("/proc/self/fd").is_dir():
        assert len(_memfds()) == len(before_fds) + 1, "one in-memory file for the one distinct shared object"


@pytest.mark.parametrize(
    ("setup", "error", "message"),
    [
        ("unmapped-program", GpuMemoryFault, r"GPU memory fault at 0x200000\+0x18"),
        ("unmapped-args", GpuMemoryFault, r"GPU memory fault at 0x200000\+0x10"),
        ("bad-pointer", GpuMemoryFault, "pointer outside every mapping"),
        ("bad-magic", KernelError, "is not a host-native code object: code object magic"),
        ("truncated", KernelError, "GPU memory fault"),
    ],
)
def test_bad_launches_raise_typed_errors(scale_so: bytes, setup: str, error: type[Exception], message: str) -> None:
    memory = _memory()
    code = pack_code_object(CodeObject("scale", (ArgKind.POINTER, ArgKind.VALUE), scale_so))
    program, args = 0x10000, 0x80
    memory.write(args, np.array([0x1000, 2], "<u8"))
    memory.write(program, code)
    if setup == "unmapped-program":
        program = 0x200000
    elif setup == "unmapped-args":
        args = 0x200000
    elif setup == "bad-pointer":
        memory.write(args, np.array([0x900000_0000, 2], "<u8"))
    elif setup == "bad-magic":
        memory.write(program, b"NOTCODE!")
    elif setup == "truncated":
        program = memory.vram_bytes - 0x40  # the header fits, the body runs past VRAM
        memory.write(program, code[:0x40])
    with pytest.raises((error, GpuMemoryFault), match=message):
        HostNativeExecutor().dispatch(memory, Launch(program, (1, 1, 1), (1, 1, 1), args))


class RecordingExecutor:
    """A stand-in executor: records the launches DISPATCH_DIRECT hands it."""

    def __init__(self) -> None:
        self.launches: list[Launch] = []

    def dispatch(self, memory: KernelMemory, launch: Launch) -> list[tuple[int, int]]:
        self.launches.append(launch)
        return [(launch.args_va, 8)]


def test_another_executor_plugs_in_behind_the_protocol() -> None:
    kernel = EventKernel()
    executor = RecordingExecutor()
    gpu = AmdGpu(kernel, vram_bytes=16 << 20, vram_at_zero=True, executor=executor)
    queue = gpu.create_queue(
        QueueKind.COMPUTE, ring_va=0x10000, ring_bytes=4096, rptr_va=0x100, wptr_va=0x108, doorbell_index=3
    )
    packets = pm4_launch(0x12_3400, 0xABC_0000, (2, 3, 4), (8, 4, 2))
    gpu.write(0x12_3400, CODE_OBJECT_MAGIC)  # a host-native program: GPU machine code goes to the RDNA3 executor
    gpu.write(0x10000, packets)
    gpu.write(0x108, packets.size.to_bytes(8, "little"))
    gpu.ring_doorbell(3, packets.size)
    gpu.wait(lambda: queue.rptr == packets.size, 10**9, what="dispatch")
    assert executor.launches == [Launch(0x12_3400, (2, 3, 4), (8, 4, 2), 0xABC_0000)]
    assert executor.launches[0].workgroups == 24


@pytest.mark.parametrize(
    ("grid", "group_size", "message"),
    [
        ((1 << 16, 1 << 16, 1), (1, 1, 1), r"grid \(65536, 65536, 1\) is 0x100000000 workgroups, more than the host-"),
        ((0xFFFF_FFFF,) * 3, (1, 1, 1), r"more than the host-native executor runs \(0x400000, HOST_NATIVE_MAX_WORKGR"),
        ((1, 1, 1), (1024, 2, 1), r"workgroup size \(1024, 2, 1\) is 2048 threads, expected at most 1024"),
    ],
)
def test_a_launch_past_the_executor_limits_is_refused_before_it_runs(
    scale_so: bytes, grid: tuple[int, int, int], group_size: tuple[int, int, int], message: str
) -> None:
    memory = _memory()
    memory.write(0x1000, np.arange(64, dtype="<i4"))
    memory.write(0x10000, pack_code_object(CodeObject("scale", (ArgKind.POINTER, ArgKind.VALUE), scale_so)))
    memory.write(0x80, np.array([0x1000, 3], "<u8"))
    executor = HostNativeExecutor()
    with pytest.raises(KernelError, match=message):
        executor.dispatch(memory, Launch(0x10000, grid, group_size, 0x80))
    assert (executor.dispatches, executor.programs_loaded) == (0, 0)
    assert np.array_equal(np.frombuffer(memory.read(0x1000, 256), "<i4"), np.arange(64)), "nothing ran"
    executor.dispatch(memory, Launch(0x10000, (4, 1, 1), (16, 1, 1), 0x80))  # a valid launch still runs
    assert np.array_equal(np.frombuffer(memory.read(0x1000, 256), "<i4"), 3 * np.arange(64))
