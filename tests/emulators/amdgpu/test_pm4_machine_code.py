"""DISPATCH_DIRECT of GPU machine code: the PM4 engine sets the RDNA3 executor up from its SH registers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.rdna3 import assemble, needs_llvm_mc

from tinyhil.amdgpu import pm4_launch_kernel
from tinyhil.emulators.amdgpu import AmdGpu, GpuQueueError
from tinyhil.emulators.amdgpu.model_choices import ErrorCode
from tinyhil.emulators.amdgpu.pm4 import Pm4Engine
from tinyhil.spec.amdhsa import Rsrc2

CODE = 0x800000
OUT = 0x700000
# rsrc2: 2 user SGPRs (s[0:1] = the output address), workgroup id x in s2
RSRC2 = (2 << 1) | (1 << 7)
STORE_IDS = """
v_lshl_add_u32 v1, s2, 6, v0
v_lshlrev_b32 v1, 2, v1
v_mov_b32 v2, s2
global_store_b32 v1, v2, s[0:1]
s_endpgm
"""


def _launch(gpu: AmdGpu, code: bytes, *, wave32: bool = True, grid: int = 1, group: int = 32) -> Any:
    gpu.write(CODE, code + bytes(64))
    return pm4_launch_kernel(CODE, (0, RSRC2, 0), [OUT, 0], (grid, 1, 1), (group, 1, 1), wave32=wave32)


@needs_llvm_mc
def test_machine_code_runs_with_the_user_sgprs_and_ids_the_registers_give(gpu: AmdGpu, compute: Any) -> None:
    gpu.write(OUT, np.full(3 * 64, 0xAB, np.uint32))
    compute.run(_launch(gpu, assemble(STORE_IDS), grid=3, group=40))
    # work-item t of workgroup g (s2) stores g at OUT + 4 * (64 g + t); ids 40..63 of each group do not exist
    got = np.frombuffer(gpu.read(OUT, 4 * 3 * 64), "<u4").reshape(3, 64)
    np.testing.assert_array_equal(got[:, :40], np.repeat(np.arange(3, dtype=np.uint32)[:, None], 40, axis=1))
    assert (got[:, 40:] == 0xAB).all()


@needs_llvm_mc
def test_a_wave64_dispatch_is_refused(gpu: AmdGpu, compute: Any) -> None:
    with pytest.raises(GpuQueueError, match=r"wave64 dispatch \(DISPATCH_INITIATOR\.CS_W32_EN clear\)"):
        compute.run(_launch(gpu, assemble(STORE_IDS), wave32=False))
    assert compute.device.error_code == ErrorCode.KERNEL_ERROR


def test_bytes_that_are_no_instruction_are_an_illegal_instruction_trap(gpu: AmdGpu, compute: Any) -> None:
    with pytest.raises(GpuQueueError, match=r"wave trap at PC 0x800000.*illegal instruction"):
        compute.run(_launch(gpu, b"\xff" * 16))
    assert compute.device.error_code == ErrorCode.WAVE_TRAP


@needs_llvm_mc
def test_an_endless_loop_stops_the_queue_at_the_step_budget(
    gpu: AmdGpu, compute: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Pm4Engine, "WAVE_STEP_BUDGET", 100)
    with pytest.raises(GpuQueueError, match=r"wave trap at PC 0x800000 \(s_branch .*step budget of 100"):
        compute.run(_launch(gpu, assemble("s_branch -1")))


SCRATCH_VA = 0x900000
# each lane stores its workgroup id (s2) at private offset 0
STORE_TO_SCRATCH = """
v_mov_b32 v1, s2
scratch_store_b32 off, v1, off
s_endpgm
"""


@needs_llvm_mc
def test_the_scratch_registers_give_each_wave_its_slot(gpu: AmdGpu, compute: Any) -> None:
    code = assemble(STORE_TO_SCRATCH)
    gpu.write(CODE, code + bytes(64))
    wave_bytes = 256
    launch = pm4_launch_kernel(CODE, (0, RSRC2 | 1 << Rsrc2.ENABLE_PRIVATE_SEGMENT, 0), [OUT, 0], (3, 1, 1),
                               (32, 1, 1), wave32=True, scratch_va=SCRATCH_VA, scratch_waves_per_se=1,
                               scratch_wave_bytes=wave_bytes)  # fmt: skip
    gpu.write(SCRATCH_VA, np.full(3 * wave_bytes // 4, 0xAB, np.uint32))
    compute.run(launch)
    # dword 0 of lane L of wave k is at SCRATCH_VA + k * wave_bytes + 4 * L (lanes interleaved a dword at a time)
    got = np.frombuffer(gpu.read(SCRATCH_VA, 3 * wave_bytes), "<u4").reshape(3, -1)
    np.testing.assert_array_equal(got[:, :32], np.repeat(np.arange(3, dtype=np.uint32)[:, None], 32, axis=1))
    assert (got[:, 32:] == 0xAB).all()


@needs_llvm_mc
def test_a_scratch_instruction_without_scratch_registers_traps_naming_them(gpu: AmdGpu, compute: Any) -> None:
    code = assemble(STORE_TO_SCRATCH)
    gpu.write(CODE, code + bytes(64))
    launch = pm4_launch_kernel(CODE, (0, RSRC2 | 1 << Rsrc2.ENABLE_PRIVATE_SEGMENT, 0), [OUT, 0], (1, 1, 1),
                               (32, 1, 1), wave32=True)  # fmt: skip
    with pytest.raises(GpuQueueError, match="COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI and COMPUTE_TMPRING_SIZE"):
        compute.run(launch)
