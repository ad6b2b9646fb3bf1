"""Atomics: the vectorised combine against a lane-by-lane reference, and global/LDS atomics from assembly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.rdna3 import DATA, assemble, make_space, make_space_with_mappings, needs_llvm_mc, read, run_code

from tinyhil.emulators.amdgpu.errors import GpuMemoryFault
from tinyhil.emulators.amdgpu.rdna3.atomics import _OPS, combine

KINDS_32 = sorted(_OPS)
KINDS_64 = sorted(k for k in _OPS if not k.endswith("f32"))


def _sequential(kind: str, slots: np.ndarray, cur: np.ndarray, data: np.ndarray, cmp: np.ndarray) -> np.ndarray:
    """One lane at a time, in lane order: the ISA's definition of concurrent atomics in this model."""
    pre = np.empty_like(data)
    fn = _OPS[kind]
    for k, slot in enumerate(slots):
        pre[k] = cur[slot]
        cur[slot] = fn(cur[slot : slot + 1], data[k : k + 1], cmp[k : k + 1])[0]
    return pre


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(KINDS_32 + [f"{k}/64" for k in KINDS_64]), seed=st.integers(0, 2**32 - 1),
       lanes=st.integers(1, 200), words=st.integers(1, 6))  # fmt: skip
def test_combine_is_lane_by_lane_in_lane_order(kind: str, seed: int, lanes: int, words: int) -> None:
    kind, _, width = kind.partition("/")
    dtype = np.uint64 if width else np.uint32
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    pool = np.array([0, 1, 2, info.max, info.max >> 1, (info.max >> 1) + 1], dtype)  # edges: 0, -1, INT_MIN/MAX
    values = lambda n: np.where(rng.random(n) < 0.3, rng.choice(pool, n), rng.integers(0, info.max, n, dtype, True))  # noqa: E731
    slots = rng.integers(0, words, lanes)
    cur, data = values(words), values(lanes)
    cmp = np.where(rng.random(lanes) < 0.5, cur[slots], values(lanes)).astype(dtype)
    want_cur = cur.copy()
    with np.errstate(all="ignore"):
        want = _sequential(kind, slots, want_cur, data, cmp)
        got = combine(kind, slots, cur, data, cmp)
    np.testing.assert_array_equal(got.view(dtype), want.view(dtype))
    np.testing.assert_array_equal(cur.view(dtype), want_cur.view(dtype))


@needs_llvm_mc
@pytest.mark.parametrize("returning", [False, True])
def test_global_atomic_add_and_cmpswap_from_assembly(returning: bool) -> None:
    """64 lanes add their lane number to one of 4 counters, then swap in 7 where a counter still holds 0; the
    returning forms give each lane the value before it (lanes in order)."""
    add, cas = ("v2, v1, v0, s[0:1] glc", "v6, v1, v[4:5], s[0:1] offset:16 glc") if returning else (
        "v1, v0, s[0:1]", "v1, v[4:5], s[0:1] offset:16")  # fmt: skip
    source = f"""
        v_and_b32 v1, 3, v0
        v_lshlrev_b32 v1, 2, v1
        v_mov_b32 v2, 0
        v_mov_b32 v6, 0
        global_atomic_add_u32 {add}
        v_mov_b32 v4, 7
        v_mov_b32 v5, 0
        global_atomic_cmpswap_b32 {cas}
        v_lshlrev_b32 v8, 2, v0
        global_store_b32 v8, v2, s[0:1] offset:256
        global_store_b32 v8, v6, s[0:1] offset:512
        s_endpgm
    """
    space = make_space(16 << 20)
    initial = np.array([0, 5, 0, 9], np.uint32)
    space.write(DATA + 16, initial)
    run_code(space, assemble(source), user_data=(DATA, 0), threads=64, vgpr_granules=2)
    lanes = np.arange(64)
    np.testing.assert_array_equal(read(space, DATA, 4, "<u4"), [lanes[lanes % 4 == k].sum() for k in range(4)])
    np.testing.assert_array_equal(read(space, DATA + 16, 4, "<u4"), [7, 5, 7, 9])
    before = np.array([lanes[(lanes < k) & (lanes % 4 == k % 4)].sum() for k in lanes])
    swapped_over = np.where(lanes < 4, initial[lanes % 4], np.where(initial[lanes % 4] == 0, 7, initial[lanes % 4]))
    np.testing.assert_array_equal(read(space, DATA + 256, 64, "<u4"), before if returning else 0)
    np.testing.assert_array_equal(read(space, DATA + 512, 64, "<u4"), swapped_over if returning else 0)


@needs_llvm_mc
def test_lds_returning_atomics_from_assembly() -> None:
    """ds_max_rtn_i32 and ds_add_rtn_u32 on two LDS words: each lane gets the value before its own update."""
    source = """
        v_and_b32 v1, 1, v0
        v_lshlrev_b32 v1, 2, v1
        v_sub_nc_u32 v2, 16, v0
        ds_max_rtn_i32 v3, v1, v2
        ds_add_rtn_u32 v4, v1, v0 offset:8
        s_waitcnt lgkmcnt(0)
        v_lshlrev_b32 v8, 2, v0
        global_store_b32 v8, v3, s[0:1]
        global_store_b32 v8, v4, s[0:1] offset:256
        s_endpgm
    """
    space = make_space(16 << 20)
    run_code(space, assemble(source), user_data=(DATA, 0), threads=64, lds_granules=1, vgpr_granules=2)
    lanes = np.arange(64)
    values = 16 - lanes
    want_max = [max([0, *values[(lanes < k) & (lanes % 2 == k % 2)]]) for k in lanes]
    want_add = [lanes[(lanes < k) & (lanes % 2 == k % 2)].sum() for k in lanes]
    np.testing.assert_array_equal(read(space, DATA, 64, "<i4"), want_max)
    np.testing.assert_array_equal(read(space, DATA + 256, 64, "<u4"), want_add)


@needs_llvm_mc
@pytest.mark.parametrize("store", ["global_store_b32", "global_atomic_add_u32", "global_store_b8"])
def test_vector_writes_to_read_only_memory_are_memory_faults(store: str) -> None:
    space, mappings = make_space_with_mappings()
    readonly = 0x4000_0000
    mappings.map(readonly, space.vram[DATA : DATA + 0x1000], writable=False)
    with pytest.raises(GpuMemoryFault, match="read-only") as caught:
        run_code(space, assemble(f"v_lshlrev_b32 v1, 2, v0\n{store} v1, v0, s[0:1]\ns_endpgm"), user_data=(readonly, 0))
    assert readonly <= caught.value.va < readonly + 0x1000
    assert not read(space, DATA, 32, "<u4").any()
