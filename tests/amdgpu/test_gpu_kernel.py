"""The driver side of GPU machine code: recognising code objects, kernarg layout, the dispatch registers."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from support.rdna3 import needs_clang

from tinyhil.amdgpu.errors import CodeObjectError
from tinyhil.amdgpu.gpu_kernel import (
    DISPATCH_PACKET_BYTES,
    MAX_SCRATCH_WAVES,
    is_amdgpu_code_object,
    kernarg_segment,
    load_gpu_kernel,
)
from tinyhil.compiler_amdgpu import AmdgpuCompiler
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu_pm4 import GFX1100_SHADER_ENGINES, SH_REG_BASE, ShReg

pytestmark = needs_clang

CL = b"""__kernel void saxpy(float alpha, __global const float *x, __global float *y, int n) {
  int i = __builtin_amdgcn_workitem_id_x(); if (i < n) y[i] = alpha * x[i] + y[i]; }
TH_KERNEL(portable) { TH_PTR(0, th_u32, x); TH_THREADS { x[TH_GLOBAL_ID(0)] = 1; } }
__kernel void private_array(__global const int *a, __global int *out) {
  int t = __builtin_amdgcn_workitem_id_x(); volatile int arr[16];  /* volatile: kept in scratch */
  for (int k = 0; k < 16; k++) arr[k] = a[t * 16 + k];
  out[t] = arr[a[t] & 15]; }
"""


@pytest.fixture(scope="module")
def binary() -> bytes:
    return AmdgpuCompiler().compile(CL)


def _explicit(kernel_args: list[dict[str, object]]) -> list[tuple[int, int]]:
    return [(int(str(a[".offset"])), int(str(a[".size"]))) for a in kernel_args
            if not str(a[".value_kind"]).startswith("hidden_")]  # fmt: skip


def test_only_an_amdgpu_elf_is_gpu_code(binary: bytes, tmp_path: Path) -> None:
    assert is_amdgpu_code_object(binary)
    assert not is_amdgpu_code_object(binary[:18])
    host = bytearray(binary[:64])
    struct.pack_into("<H", host, 18, 62)  # EM_X86_64
    assert not is_amdgpu_code_object(bytes(host))


def test_each_word_goes_to_its_arguments_offset_cut_to_its_size(binary: bytes) -> None:
    kd = load_gpu_kernel(binary, "saxpy", 0).kd
    words = [0x3F80_0000, 0x1234_5000, 0x6789_A000, (-3) & (2**64 - 1)]
    data = kernarg_segment(kd, words, (2, 1, 1), (64, 1, 1))
    spans = _explicit(kd.metadata[".args"])
    got = [int.from_bytes(data[o : o + n], "little") for o, n in spans]
    assert got == [w & ((1 << 8 * n) - 1) for w, (_, n) in zip(words, spans, strict=True)]


def test_the_portable_block_takes_the_words_in_order(binary: bytes) -> None:
    kd = load_gpu_kernel(binary, "portable", 0).kd
    data = kernarg_segment(kd, [5, 6, 7], (2, 1, 1), (32, 1, 1))
    np.testing.assert_array_equal(np.frombuffer(data[:24], "<u8"), [5, 6, 7])
    hidden = {a[".value_kind"]: a[".offset"] for a in kd.metadata[".args"]}
    assert data[hidden["hidden_block_count_x"]] == 2 and data[hidden["hidden_group_size_x"]] == 32
    with pytest.raises(InvalidArgument, match="33 arguments, expected 1"):
        kernarg_segment(kd, [0] * 33, (1, 1, 1), (32, 1, 1))


def test_a_kernel_the_object_lacks_is_refused_at_load(binary: bytes) -> None:
    with pytest.raises(
        CodeObjectError, match=r"no kernel 'nope' in the code object \(kernels: portable, private_array, saxpy\)"
    ):
        load_gpu_kernel(binary, "nope", 0)


def _sh_regs(packets: np.ndarray) -> dict[int, int]:
    regs: dict[int, int] = {}
    at = 0
    while at < len(packets):  # replay the SET_SH_REG writes
        header = int(packets[at])
        count, opcode = ((header >> 16) & 0x3FFF) + 1, (header >> 8) & 0xFF
        if opcode == 0x76:
            base = SH_REG_BASE + int(packets[at + 1])
            regs.update({base + i: int(v) for i, v in enumerate(packets[at + 2 : at + 1 + count])})
        at += 1 + count
    return regs


def test_the_launch_programs_the_descriptors_registers_and_user_sgprs(binary: bytes) -> None:
    kernel = load_gpu_kernel(binary, "saxpy", 0x10_0000)
    kernarg_va = 0x20_0000
    slot, packets = kernel.launch(kernarg_va, [0, 0, 0, 0], (3, 1, 1), (64, 1, 1))
    assert len(slot) == kernel.kernarg_bytes() and len(slot) % DISPATCH_PACKET_BYTES == 0
    regs = _sh_regs(packets)
    assert (regs[ShReg.COMPUTE_PGM_HI] << 32 | regs[ShReg.COMPUTE_PGM_LO]) << 8 == kernel.entry_va
    assert regs[ShReg.COMPUTE_PGM_RSRC1] == kernel.kd.compute_pgm_rsrc1
    assert regs[ShReg.COMPUTE_PGM_RSRC2] == kernel.kd.dispatch_rsrc2()
    assert regs[ShReg.COMPUTE_USER_DATA_0] | regs[ShReg.COMPUTE_USER_DATA_1] << 32 == kernarg_va
    assert regs[ShReg.COMPUTE_NUM_THREAD_X] == 64 and regs[ShReg.COMPUTE_START_X] == 0
    assert packets[-1] & 1 << 15  # DISPATCH_INITIATOR.CS_W32_EN: the descriptor is wave32
    assert not kernel.uses_scratch and kernel.scratch_bytes((3, 1, 1), (64, 1, 1)) == 0
    assert regs[ShReg.COMPUTE_TMPRING_SIZE] == 0  # no scratch


@pytest.mark.parametrize(("groups", "slots"), [(3, 6), (4096, MAX_SCRATCH_WAVES)])
def test_a_private_segment_gets_scratch_registers_for_the_dispatchs_waves(
    binary: bytes, groups: int, slots: int
) -> None:
    kernel = load_gpu_kernel(binary, "private_array", 0x10_0000)
    assert kernel.uses_scratch and kernel.kd.private_segment_fixed_size > 0
    scratch_va = 0x1_2345_6700
    grid, block = (groups, 1, 1), (64, 1, 1)  # two waves a workgroup
    _, packets = kernel.launch(0x20_0000, [0, 0], grid, block, scratch_va)
    regs = _sh_regs(packets)
    assert (regs[ShReg.COMPUTE_DISPATCH_SCRATCH_BASE_HI] << 32 | regs[ShReg.COMPUTE_DISPATCH_SCRATCH_BASE_LO]) << 8 == (
        scratch_va
    )
    tmpring = regs[ShReg.COMPUTE_TMPRING_SIZE]
    waves_per_se, wave_units = tmpring & 0xFFF, tmpring >> 12
    # the grid's waves (at most MAX_SCRATCH_WAVES), per shader engine, rounded up
    assert waves_per_se * GFX1100_SHADER_ENGINES == -(-min(2 * groups, slots) // GFX1100_SHADER_ENGINES) * (
        GFX1100_SHADER_ENGINES
    )
    lane_bytes = -(-kernel.kd.private_segment_fixed_size // 4) * 4
    assert wave_units * 256 == -(-lane_bytes * 32 // 256) * 256  # every lane's private segment, in 256-byte units
    assert kernel.scratch_bytes(grid, block) == waves_per_se * GFX1100_SHADER_ENGINES * wave_units * 256
