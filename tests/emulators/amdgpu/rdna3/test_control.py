"""Scalar ALU, branches, EXEC divergence, barriers with LDS, SMEM, and the traps that end a dispatch instead of a
hang, each from a small llvm-mc program."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.rdna3 import CODE_BASE, DATA, assemble, cls_reference, make_space, needs_llvm_mc, read, run_code

from tinyhil.emulators.amdgpu.errors import GpuMemoryFault, WaveTrap

pytestmark = needs_llvm_mc
OUT = DATA + 0x1000
_PROGRAMS: dict[str, bytes] = {}


def _lo_hi(addr: int) -> list[int]:
    return [addr & 0xFFFFFFFF, addr >> 32]


def run_scalar(op: str, a: int, b: int) -> tuple[int, int]:
    """``op`` writes s6 from s0 and s1; returns (s6, SCC)."""
    if op not in _PROGRAMS:
        _PROGRAMS[op] = assemble(
            f"""
            s_mov_b32 scc, 0
            {op}
            s_cselect_b32 s7, 1, 0
            v_mov_b32 v1, s6
            v_mov_b32 v2, s7
            v_mov_b32 v3, 0
            global_store_b32 v3, v1, s[2:3]
            global_store_b32 v3, v2, s[2:3] offset:4
            s_endpgm
        """.replace("s_mov_b32 scc, 0", "s_cmp_eq_u32 s0, s0" if "addc" in op or "cselect" in op else "s_nop 0")
        )
    space = make_space(16 << 20)
    run_code(space, _PROGRAMS[op], user_data=[a, b, *_lo_hi(OUT)])
    s6, scc = read(space, OUT, 2, "<u4")
    return int(s6), int(scc)


def _s(v: int) -> int:
    return v - (1 << 32) if v >> 31 else v


M = 0xFFFFFFFF
SCALAR: dict[str, Callable[[int, int], tuple[int, int]]] = {
    "s_add_u32 s6, s0, s1": lambda a, b: ((a + b) & M, int(a + b > M)),
    "s_sub_u32 s6, s0, s1": lambda a, b: ((a - b) & M, int(b > a)),
    "s_addc_u32 s6, s0, s1": lambda a, b: ((a + b + 1) & M, int(a + b + 1 > M)),  # SCC was set by s_cmp_eq
    "s_add_i32 s6, s0, s1": lambda a, b: ((a + b) & M, int(not -(2**31) <= _s(a) + _s(b) < 2**31)),
    "s_sub_i32 s6, s0, s1": lambda a, b: ((a - b) & M, int(not -(2**31) <= _s(a) - _s(b) < 2**31)),
    "s_and_b32 s6, s0, s1": lambda a, b: (a & b, int(a & b != 0)),
    "s_xor_b32 s6, s0, s1": lambda a, b: (a ^ b, int(a ^ b != 0)),
    "s_and_not1_b32 s6, s0, s1": lambda a, b: (a & ~b & M, int(a & ~b & M != 0)),
    "s_lshl_b32 s6, s0, s1": lambda a, b: ((a << (b & 31)) & M, int((a << (b & 31)) & M != 0)),
    "s_lshr_b32 s6, s0, s1": lambda a, b: (a >> (b & 31), int(a >> (b & 31) != 0)),
    "s_ashr_i32 s6, s0, s1": lambda a, b: ((_s(a) >> (b & 31)) & M, int(_s(a) >> (b & 31) != 0)),
    "s_min_i32 s6, s0, s1": lambda a, b: (a if _s(a) < _s(b) else b, int(_s(a) < _s(b))),
    "s_max_u32 s6, s0, s1": lambda a, b: (max(a, b), int(a > b)),
    "s_mul_i32 s6, s0, s1": lambda a, b: ((a * b) & M, 0),
    "s_bfe_u64 s[6:7], s[0:1], 0x200007": lambda a, b: (
        ((a | b << 32) >> 7) & M,
        int(((a | b << 32) >> 7) & (2**32 - 1) != 0),
    ),
    "s_bfe_i64 s[6:7], s[0:1], 0x80003": lambda a, b: (
        (((a >> 3) & 0xFF ^ 0x80) - 0x80) & M,
        int((a >> 3) & 0xFF != 0),
    ),
    "s_mul_hi_u32 s6, s0, s1": lambda a, b: ((a * b) >> 32, 0),
    "s_bfe_u32 s6, s0, 0x50004": lambda a, b: ((a >> 4) & 0x1F, int((a >> 4) & 0x1F != 0)),
    "s_cselect_b32 s6, s0, s1": lambda a, b: (a, 1),
    "s_not_b32 s6, s0": lambda a, b: (~a & M, int(~a & M != 0)),
    "s_bcnt1_i32_b32 s6, s0": lambda a, b: (a.bit_count(), int(a != 0)),
    "s_ctz_i32_b32 s6, s0": lambda a, b: (((a & -a).bit_length() - 1) & M if a else M, 0),
    "s_clz_i32_u32 s6, s0": lambda a, b: (32 - a.bit_length() if a else M, 0),
    "s_cls_i32 s6, s0": lambda a, b: (cls_reference(a), 0),
    "s_brev_b32 s6, s0": lambda a, b: (int(f"{a:032b}"[::-1], 2), 0),
    "s_sext_i32_i16 s6, s0": lambda a, b: ((((a & 0xFFFF) ^ 0x8000) - 0x8000) & M, 0),
    "s_mov_b32 s6, s0\ns_cmp_lt_i32 s0, s1": lambda a, b: (a, int(_s(a) < _s(b))),
    "s_mov_b32 s6, s1\ns_cmp_ge_u32 s0, s1": lambda a, b: (b, int(a >= b)),
    "s_mov_b32 s6, s0\ns_bitcmp1_b32 s0, s1": lambda a, b: (a, (a >> (b & 31)) & 1),
    "s_mov_b32 s6, s0\ns_addk_i32 s6, 0x8000": lambda a, b: (
        (a - 0x8000) & M,
        int(not -(2**31) <= _s(a) - 0x8000 < 2**31),
    ),
    "s_mov_b32 s6, s0\ns_cmpk_lg_u32 s6, 0x1234": lambda a, b: (a, int(a != 0x1234)),
}
words = st.one_of(st.sampled_from([0, 1, 31, 32, 0x7FFFFFFF, 0x80000000, M, 0x1234]), st.integers(0, M))


@pytest.mark.parametrize("op", list(SCALAR))
@settings(max_examples=10, deadline=None)
@given(a=words, b=words)
def test_scalar_operations_and_scc(op: str, a: int, b: int) -> None:
    assert run_scalar(op, a, b) == SCALAR[op](a, b)


def test_exec_divergence_with_saveexec_and_branches() -> None:
    """Lanes below 5 take one side, the rest the other; EXEC is restored after both sides."""
    code = assemble("""
        v_lshlrev_b32 v1, 2, v0
        v_mov_b32 v2, 7
        s_mov_b32 s6, exec_lo
        v_cmpx_gt_u32_e32 5, v0
        s_cbranch_execz 2
        v_mov_b32 v2, 100
        s_xor_b32 exec_lo, exec_lo, s6
        s_cbranch_execz 1
        v_add_nc_u32 v2, v2, v0
        s_or_b32 exec_lo, exec_lo, s6
        v_add_nc_u32 v2, 1, v2
        global_store_b32 v1, v2, s[0:1]
        s_endpgm
    """)
    space = make_space(16 << 20)
    run_code(space, code, user_data=_lo_hi(OUT), threads=64, groups=2)
    lanes = np.arange(32)
    want = np.where(lanes < 5, 101, 8 + lanes)
    assert np.array_equal(read(space, OUT, 32, "<u4"), want)


def test_a_barrier_makes_other_waves_lds_writes_visible() -> None:
    """Wave 1 detours before writing LDS; wave 0 reads wave 1's slots after s_barrier."""
    code = assemble("""
        v_lshlrev_b32 v1, 2, v0
        v_cmp_gt_u32_e32 vcc_lo, 32, v0
        s_cbranch_vccnz 3
        s_nop 0
        s_nop 0
        s_nop 0
        v_add_nc_u32 v2, 1000, v0
        ds_store_b32 v1, v2
        s_barrier
        v_xor_b32 v3, 0x80, v1
        ds_load_b32 v4, v3
        s_mul_i32 s6, s2, 0x100
        v_add_nc_u32 v5, s6, v1
        global_store_b32 v5, v4, s[0:1]
        s_endpgm
    """)
    space = make_space(16 << 20)
    run_code(space, code, user_data=_lo_hi(OUT), threads=64, groups=3, lds_granules=1)
    got = read(space, OUT, 64 * 3, "<u4").reshape(3, 64)
    assert np.array_equal(got, np.tile(1000 + (np.arange(64) ^ 32), (3, 1)))


def test_smem_loads_every_width() -> None:
    code = assemble("""
        s_load_b512 s[16:31], s[0:1], 0x0
        s_load_b64 s[4:5], s[0:1], 0x8
        s_waitcnt lgkmcnt(0)
        v_lshlrev_b32 v1, 2, v0
        v_mov_b32 v2, s31
        v_mov_b32 v3, s5
        v_mov_b32 v4, 0
        global_store_b32 v4, v2, s[2:3]
        global_store_b32 v4, v3, s[2:3] offset:4
        s_endpgm
    """)
    space = make_space(16 << 20)
    space.write(DATA, np.arange(100, 116, dtype=np.uint32))
    run_code(space, code, user_data=[*_lo_hi(DATA), *_lo_hi(OUT)])
    assert list(read(space, OUT, 2, "<u4")) == [115, 103]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("v_ldexp_f16 v1, v2, v3\ns_endpgm", "v_ldexp_f16 is not implemented"),
        ("v_pk_add_u16 v1, v2, 1\ns_endpgm", "constant operands of packed math"),
        ("scratch_load_b32 v1, v2, off\ns_endpgm", "scratch_base is not set"),
        ("s_code_end", "s_code_end is not implemented"),
        ("s_branch 0x1000", "PC outside the code"),
        ("s_nop 0", "illegal instruction: VOP2 opcode 0"),  # runs off the end into zero padding
        ("s_branch 0xffff", "step budget of 100"),  # branches to itself
    ],
)
def test_what_cannot_run_is_a_wave_trap_naming_the_pc(source: str, message: str) -> None:
    space = make_space(16 << 20)
    with pytest.raises(WaveTrap, match=message) as caught:
        run_code(space, assemble(source), step_budget=100)
    assert CODE_BASE <= caught.value.pc < CODE_BASE + 0x10000 + 4


def test_an_illegal_encoding_is_a_wave_trap() -> None:
    space = make_space(16 << 20)
    with pytest.raises(WaveTrap, match=r"illegal instruction: MUBUF opcode 0") as caught:
        run_code(space, bytes.fromhex("000000e0 00000000"))
    assert caught.value.pc == CODE_BASE


def test_a_wild_store_names_the_lanes_address() -> None:
    code = assemble("""
        v_lshlrev_b32 v1, 12, v0
        global_store_b32 v1, v0, s[0:1]
        s_endpgm
    """)
    space = make_space(16 << 20)
    base = (16 << 20) - 5 * 4096  # lanes 5.. fall past the end of VRAM
    with pytest.raises(GpuMemoryFault) as caught:
        run_code(space, code, user_data=_lo_hi(base))
    assert caught.value.va == base + 5 * 4096


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("v_mov_b32 v1, src_shared_base\ns_endpgm", "operand code 235 is not a source"),
        ("v_mov_b32 v200, 0\ns_endpgm", "past the registers"),
    ],
)
def test_operands_the_model_lacks_are_wave_traps(source: str, message: str) -> None:
    with pytest.raises(WaveTrap, match=message):
        run_code(make_space(16 << 20), assemble(source))


def test_bad_dispatch_setups_are_refused_before_anything_runs() -> None:
    from tinyhil.emulators.amdgpu.rdna3 import DispatchSetup, run_dispatch
    from tinyhil.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="num_thread"):
        DispatchSetup(0, 0, 0, 0, num_thread=(2048, 1, 1))
    with pytest.raises(InvalidArgument, match="user_data"):
        DispatchSetup(0, 0, 0, 0, user_data=(0,) * 17)
    space = make_space(16 << 20)
    with pytest.raises(WaveTrap, match="wave64"):
        run_dispatch(space, DispatchSetup(CODE_BASE >> 8, 0, 0, 0, wave32=False))
    with pytest.raises(WaveTrap, match="program address is not mapped"):
        run_dispatch(space, DispatchSetup((32 << 20) >> 8, 0, 0, 0))
