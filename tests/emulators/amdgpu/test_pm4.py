"""The PM4 engine: every packet of the spec table, waits, nested IBs, dispatches of compiled kernels, stops."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.host_kernels import VADD_C

from tinyhil.amdgpu import (
    pm4_acquire_mem,
    pm4_dispatch_direct,
    pm4_header,
    pm4_indirect_buffer,
    pm4_launch,
    pm4_nop,
    pm4_release_mem,
    pm4_set_sh_reg,
    pm4_set_uconfig_reg,
    pm4_wait_reg_mem,
    pm4_write_data,
)
from tinyhil.compiler import HostCCompiler
from tinyhil.emulators.amdgpu import AmdGpu, GpuQueueError, Interrupt, InterruptKind, QueueStatus
from tinyhil.emulators.amdgpu.model_choices import ErrorCode
from tinyhil.emulators.kernel import EventKernel, VirtualTimeout
from tinyhil.spec.amdgpu import CompareFunction
from tinyhil.spec.amdgpu_pm4 import UCONFIG_REG_BASE, Pm4Op, ReleaseMemDataSel, ReleaseMemIntSel, ShReg
from tinyhil.spec.code_object import ArgKind, CodeObject, pack_code_object

DATA = 0x400000
PROGRAM = 0x800000
ARGS = 0x7F0000

FILL = b"""
#include <stdint.h>
void fill(uint64_t *args, const uint32_t group_id[3], const uint32_t group_size[3]) {
    uint32_t *out = (uint32_t *)args[0];
    uint32_t value = (uint32_t)args[1];
    uint64_t base = (uint64_t)group_id[0] * group_size[0];
    for (uint32_t t = 0; t < group_size[0]; t++) out[base + t] = value + (uint32_t)(base + t);
}
"""
GROUPS = b"""
#include <stdint.h>
void groups(uint64_t *args, const uint32_t id[3], const uint32_t size[3]) {
    uint32_t *out = (uint32_t *)args[0];
    uint32_t gx = (uint32_t)args[1], gy = (uint32_t)args[2];
    out[(id[2] * gy + id[1]) * gx + id[0]] = id[0] | id[1] << 8 | id[2] << 16 | size[0] << 24 | size[1] << 28;
}
"""


def _u32(gpu: AmdGpu, va: int) -> int:
    return int.from_bytes(gpu.read(va, 4), "little")


def _u64(gpu: AmdGpu, va: int) -> int:
    return int.from_bytes(gpu.read(va, 8), "little")


@pytest.fixture(scope="module")
def shared_objects() -> dict[str, bytes]:
    compiler = HostCCompiler()
    reason = compiler.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    return {"vadd": compiler.compile(VADD_C), "fill": compiler.compile(FILL), "groups": compiler.compile(GROUPS)}


def _load(gpu: AmdGpu, shared_object: bytes, entry: str, signature: tuple[ArgKind, ...], args: list[int]) -> None:
    gpu.write(PROGRAM, pack_code_object(CodeObject(entry, signature, shared_object)))
    gpu.write(ARGS, np.array(args, "<u8"))


# --- register and memory packets ---
def test_nops_of_both_forms_are_skipped(gpu: AmdGpu, compute: Any) -> None:
    compute.run(pm4_nop(), pm4_nop(3), pm4_write_data(DATA, [5]))
    assert _u32(gpu, DATA) == 5 and compute.device.rptr == 1 + 4 + 5


def test_set_sh_reg_and_set_uconfig_reg_fill_the_register_file(compute: Any) -> None:
    compute.run(pm4_set_sh_reg(ShReg.COMPUTE_USER_DATA_0, [1, 2, 3]), pm4_set_uconfig_reg(UCONFIG_REG_BASE + 5, [9]))
    engine = compute.device.engine
    assert [engine.sh_reg(ShReg.COMPUTE_USER_DATA_0 + i) for i in range(4)] == [1, 2, 3, 0]
    assert engine.uconfig_regs[5] == 9


def test_a_register_write_past_the_block_is_a_packet_error(compute: Any) -> None:
    packet = np.array([pm4_header(Pm4Op.SET_SH_REG, 3), 0x3FF, 1, 2], "<u4")
    with pytest.raises(GpuQueueError, match=r"SET_SH_REG: registers 0x2fff..0x3000 leave the block 0x2c00..0x2fff"):
        compute.run(packet)


def test_acquire_mem_is_a_no_op(gpu: AmdGpu, compute: Any) -> None:
    compute.run(pm4_acquire_mem(), pm4_write_data(DATA, [1]))
    assert _u32(gpu, DATA) == 1


def test_write_data_places_its_dwords(gpu: AmdGpu, compute: Any) -> None:
    compute.run(pm4_write_data(DATA + 4, [1, 2, 3]))
    assert [_u32(gpu, DATA + 4 * i) for i in range(5)] == [0, 1, 2, 3, 0]


def test_release_mem_writes_32_bit_64_bit_and_timestamp_data(
    gpu: AmdGpu, kernel: EventKernel, compute: Any, interrupts: list[Interrupt]
) -> None:
    kernel.run_for(5_000)
    compute.run(
        pm4_release_mem(DATA, 0xAABBCCDD),
        pm4_release_mem(DATA + 8, 0x1122334455667788, data_sel=ReleaseMemDataSel.VALUE_64),
        pm4_release_mem(DATA + 16, data_sel=ReleaseMemDataSel.TIMESTAMP, int_sel=ReleaseMemIntSel.INTERRUPT, ctx_id=7),
    )
    assert (_u32(gpu, DATA), _u32(gpu, DATA + 4)) == (0xAABBCCDD, 0)
    assert _u64(gpu, DATA + 8) == 0x1122334455667788
    stamp = _u64(gpu, DATA + 16)
    assert stamp == (5_000 + 2 * gpu.timing.packet_ns) // 10
    assert [(i.kind, i.context, i.data) for i in interrupts] == [(InterruptKind.END_OF_PIPE, 7, stamp)]


def test_release_mem_without_data_only_fires_the_event(compute: Any, interrupts: list[Interrupt]) -> None:
    compute.run(pm4_release_mem(0, data_sel=ReleaseMemDataSel.NONE, int_sel=ReleaseMemIntSel.INTERRUPT, ctx_id=3))
    assert [(i.kind, i.context) for i in interrupts] == [(InterruptKind.END_OF_PIPE, 3)]


def test_wait_reg_mem_holds_the_queue_until_memory_satisfies_it(gpu: AmdGpu, kernel: EventKernel, compute: Any) -> None:
    compute.driver.submit(
        pm4_wait_reg_mem(DATA, 4, function=CompareFunction.GREATER_EQUAL), pm4_write_data(DATA + 4, [1])
    )
    with pytest.raises(VirtualTimeout, match=r"waiting: WAIT_REG_MEM at ring offset 0x0 for \(mem & 0xffffffff\)"):
        compute.driver.wait_idle()
    assert compute.device.rptr == 0 and compute.device.waiting, "an unsatisfied wait does not advance"
    gpu.vram[DATA : DATA + 4] = (3).to_bytes(4, "little")
    gpu.memory_written(DATA, 4)  # a host write through an mmap, reported to the GPU
    kernel.run_until_idle()
    assert compute.device.waiting, "3 >= 4 does not hold"
    gpu.vram[DATA : DATA + 4] = (4).to_bytes(4, "little")
    gpu.memory_written(DATA, 4)
    compute.driver.wait_idle()
    assert _u32(gpu, DATA + 4) == 1


def test_indirect_buffers_nest_two_deep(gpu: AmdGpu, compute: Any) -> None:
    ib2 = pm4_write_data(DATA + 8, [3])
    gpu.write(DATA + 0x2000, ib2)
    ib1 = np.concatenate([pm4_write_data(DATA + 4, [2]), pm4_indirect_buffer(DATA + 0x2000, ib2.size)])
    gpu.write(DATA + 0x1000, ib1)
    compute.run(pm4_write_data(DATA, [1]), pm4_indirect_buffer(DATA + 0x1000, ib1.size), pm4_write_data(DATA + 12, [4]))
    assert [_u32(gpu, DATA + 4 * i) for i in range(4)] == [1, 2, 3, 4]


def test_a_third_level_of_indirect_buffers_is_a_packet_error(gpu: AmdGpu, compute: Any) -> None:
    gpu.write(DATA + 0x3000, pm4_nop())
    gpu.write(DATA + 0x2000, pm4_indirect_buffer(DATA + 0x3000, 1))
    gpu.write(DATA + 0x1000, pm4_indirect_buffer(DATA + 0x2000, 4))
    with pytest.raises(GpuQueueError, match=r"INDIRECT_BUFFER: indirect buffers nest at most 2 deep at IB 0x402000"):
        compute.run(pm4_indirect_buffer(DATA + 0x1000, 4))


# --- dispatch ---
def test_vector_add_dispatched_through_pm4_gives_the_numpy_result(
    gpu: AmdGpu, compute: Any, shared_objects: dict[str, bytes]
) -> None:
    n = 10_000
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    out, a_va, b_va = DATA, DATA + 0x10000, DATA + 0x20000
    gpu.write(a_va, a)
    gpu.write(b_va, b)
    signature = (ArgKind.POINTER, ArgKind.POINTER, ArgKind.POINTER, ArgKind.VALUE)
    _load(gpu, shared_objects["vadd"], "vadd", signature, [out, a_va, b_va, n])
    compute.run(pm4_launch(PROGRAM, ARGS, (-(-n // 256), 1, 1), (256, 1, 1)), pm4_release_mem(DATA + 0xF000, 1))
    assert np.array_equal(np.frombuffer(gpu.read(out, 4 * n), np.float32), a + b)
    assert _u32(gpu, out + 4 * n) == 0, "the kernel stops at n"


def test_fill_kernel_and_one_load_per_distinct_program(
    gpu: AmdGpu, compute: Any, shared_objects: dict[str, bytes]
) -> None:
    _load(gpu, shared_objects["fill"], "fill", (ArgKind.POINTER, ArgKind.VALUE), [DATA, 1000])
    launch = pm4_launch(PROGRAM, ARGS, (4, 1, 1), (64, 1, 1))
    compute.run(launch, launch)
    assert np.array_equal(np.frombuffer(gpu.read(DATA, 4 * 256), "<u4"), 1000 + np.arange(256, dtype=np.uint32))
    assert gpu.executor.programs_loaded == 1 and gpu.executor.dispatches == 2  # type: ignore[attr-defined]


def test_every_workgroup_of_a_3d_grid_runs_once_with_its_id(
    gpu: AmdGpu, compute: Any, shared_objects: dict[str, bytes]
) -> None:
    grid = (3, 2, 4)
    _load(gpu, shared_objects["groups"], "groups", (ArgKind.POINTER, ArgKind.VALUE, ArgKind.VALUE), [DATA, 3, 2])
    compute.run(pm4_launch(PROGRAM, ARGS, grid, (5, 6, 1)))
    seen = np.frombuffer(gpu.read(DATA, 4 * 24), "<u4")
    expected = [x | y << 8 | z << 16 | 5 << 24 | 6 << 28 for z in range(4) for y in range(2) for x in range(3)]
    assert seen.tolist() == expected


def test_dispatch_time_is_charged_per_workgroup(gpu: AmdGpu, compute: Any, shared_objects: dict[str, bytes]) -> None:
    _load(gpu, shared_objects["fill"], "fill", (ArgKind.POINTER, ArgKind.VALUE), [DATA, 0])
    compute.run(
        pm4_release_mem(DATA + 0x10000, data_sel=ReleaseMemDataSel.TIMESTAMP),
        pm4_launch(PROGRAM, ARGS, (10, 1, 1), (1, 1, 1)),
        pm4_release_mem(DATA + 0x10008, data_sel=ReleaseMemDataSel.TIMESTAMP),
    )
    elapsed_ns = (_u64(gpu, DATA + 0x10008) - _u64(gpu, DATA + 0x10000)) * 10
    timing = gpu.timing
    assert elapsed_ns == 5 * timing.packet_ns + timing.dispatch_ns + 10 * timing.workgroup_ns


def test_a_pointer_argument_outside_every_mapping_is_a_memory_fault(
    gpu: AmdGpu, compute: Any, shared_objects: dict[str, bytes]
) -> None:
    _load(gpu, shared_objects["fill"], "fill", (ArgKind.POINTER, ArgKind.VALUE), [gpu.vram_bytes + 0x1000, 0])
    with pytest.raises(GpuQueueError, match=r"GPU memory fault at 0x1001000\+0x1: pointer outside every mapping"):
        compute.run(pm4_launch(PROGRAM, ARGS, (1, 1, 1), (1, 1, 1)))
    assert compute.device.status == QueueStatus.MEMORY_FAULT and compute.device.fault_va == gpu.vram_bytes + 0x1000


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (b"THILCODE" + b"\xff" * 24, r"program at 0x800000 is not a host-native code object"),
        (pack_code_object(CodeObject("f", (), b"\x7fELF garbage")), "shared object does not load"),
    ],
)
def test_a_program_that_is_not_a_loadable_code_object_stops_the_queue(
    gpu: AmdGpu, compute: Any, program: bytes, message: str
) -> None:
    gpu.write(PROGRAM, program)
    with pytest.raises(GpuQueueError, match=message):
        compute.run(pm4_launch(PROGRAM, ARGS, (1, 1, 1), (1, 1, 1)))
    assert compute.device.error_code == ErrorCode.KERNEL_ERROR and compute.device.error_opcode == Pm4Op.DISPATCH_DIRECT


def test_a_missing_entry_point_stops_the_queue(gpu: AmdGpu, compute: Any, shared_objects: dict[str, bytes]) -> None:
    _load(gpu, shared_objects["fill"], "nope", (), [])
    with pytest.raises(GpuQueueError, match="entry point 'nope' is not in its shared object"):
        compute.run(pm4_launch(PROGRAM, ARGS, (1, 1, 1), (1, 1, 1)))


def test_a_dispatch_of_more_workgroups_than_the_executor_runs_stops_the_queue_at_once(
    gpu: AmdGpu, kernel: EventKernel, compute: Any, shared_objects: dict[str, bytes]
) -> None:
    _load(gpu, shared_objects["fill"], "fill", (ArgKind.POINTER, ArgKind.VALUE), [DATA, 0])
    with pytest.raises(GpuQueueError, match=r"DISPATCH_DIRECT: grid \(4294967295, 4294967295, 4294967295\) is 0x"):
        compute.run(pm4_launch(PROGRAM, ARGS, (0xFFFF_FFFF,) * 3, (1, 1, 1)))
    assert compute.device.error_code == ErrorCode.KERNEL_ERROR and gpu.executor.dispatches == 0  # type: ignore[attr-defined]
    assert kernel.events_run < 10, "refused in one step, not run workgroup by workgroup"


def test_a_zero_workgroup_size_is_a_packet_error_and_an_empty_grid_runs_nothing(gpu: AmdGpu, compute: Any) -> None:
    gpu.write(PROGRAM, b"garbage that would fail to load")
    compute.run(pm4_launch(PROGRAM, ARGS, (0, 4, 4), (1, 1, 1)))  # nothing runs, so nothing is loaded
    with pytest.raises(GpuQueueError, match="DISPATCH_DIRECT: COMPUTE_NUM_THREAD_Y is 0"):
        compute.run(pm4_set_sh_reg(ShReg.COMPUTE_NUM_THREAD_Y, [0]), pm4_dispatch_direct((1, 1, 1)))


# --- stops ---
@pytest.mark.parametrize(
    ("dwords", "code", "message"),
    [
        ([pm4_header(Pm4Op.NOP, 1) & ~0xFF00 | 0x7E << 8, 0], ErrorCode.UNKNOWN_OPCODE, "unknown PM4 opcode 0x7e"),
        ([0x8000_0000], ErrorCode.UNKNOWN_OPCODE, "type-2 PM4 packet .header 0x80000000., expected type 3"),
        ([pm4_header(Pm4Op.RELEASE_MEM, 5), 0, 0, 0, 0, 0], ErrorCode.BAD_PACKET, "RELEASE_MEM: body of 5 dwords"),
        ([pm4_header(Pm4Op.WRITE_DATA, 3), 5 << 8, 0x400000, 0], ErrorCode.BAD_PACKET, "expected at least 4"),
        ([pm4_header(Pm4Op.WRITE_DATA, 4), 0, 0x400000, 0, 1], ErrorCode.BAD_PACKET, "dst_sel=0, expected 5"),
        ([pm4_header(Pm4Op.WAIT_REG_MEM, 6), 3, 0x400000, 0, 1, 1, 4], ErrorCode.BAD_PACKET, "only memory waits"),
        (
            [pm4_header(Pm4Op.RELEASE_MEM, 7), 0, 7 << 29, 0x400000, 0, 0, 0, 0],
            ErrorCode.BAD_PACKET,
            "data_sel/int_sel",
        ),
    ],
)
def test_bad_packets_stop_the_queue_with_a_reason(
    compute: Any, dwords: list[int], code: ErrorCode, message: str
) -> None:
    with pytest.raises(GpuQueueError, match=r"COMPUTE queue 0: .*" + message + r".* at ring offset 0x14"):
        compute.run(pm4_write_data(DATA, [1]), np.array(dwords, "<u4"))
    assert compute.device.error_code == code and compute.device.error_rptr == 5
