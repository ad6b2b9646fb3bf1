"""Scratch from assembly: the per-lane dword swizzle, the wave's base, and the SGPR/VGPR/offset address parts."""

from __future__ import annotations

import numpy as np
import pytest
from support.rdna3 import SCRATCH, assemble, make_space, needs_llvm_mc, read, run_code

from tinyhil.emulators.amdgpu.errors import WaveTrap
from tinyhil.emulators.amdgpu.rdna3.state import LANES, SCRATCH_LANE_STRIDE

pytestmark = needs_llvm_mc
WAVE_BYTES = 8 * SCRATCH_LANE_STRIDE  # 8 private dwords per lane


def test_scratch_stores_land_a_dword_per_lane_per_row_in_each_waves_share() -> None:
    """Lane L of wave w stores 1000*w + L, then (via an SGPR + offset) 2000 + L two rows further, and reads both
    back from the address the VGPR names; s1 is the scratch wave offset the dispatch gave the wave."""
    source = """
        s_mul_i32 s2, s0, 1000
        v_add_nc_u32 v1, s2, v0
        v_add_nc_u32 v2, 2000, v0
        s_mov_b32 s3, 4
        scratch_store_b32 off, v1, off offset:4
        scratch_store_b32 off, v2, s3 offset:8
        v_mov_b32 v5, 12
        scratch_load_b32 v3, v5, off
        scratch_load_b32 v4, off, off offset:4
        v_sub_nc_u32 v3, v3, v2
        v_sub_nc_u32 v4, v4, v1
        v_or_b32 v3, v3, v4
        scratch_store_b32 off, v3, off
        s_endpgm
    """
    space = make_space(64 << 20)
    run_code(space, assemble(source), threads=LANES, groups=3, scratch_wave_bytes=WAVE_BYTES)
    rows = read(space, SCRATCH, 3 * WAVE_BYTES // 4, "<u4").reshape(3, 8, LANES)  # (wave, dword, lane)
    lanes = np.arange(LANES)
    for wave in range(3):
        np.testing.assert_array_equal(rows[wave, 1], 1000 * wave + lanes)
        np.testing.assert_array_equal(rows[wave, 3], 2000 + lanes)
        np.testing.assert_array_equal(rows[wave, 0], 0)  # each lane read back exactly what it stored


def test_a_scratch_access_without_scratch_memory_is_a_wave_trap() -> None:
    with pytest.raises(WaveTrap, match="scratch_base is not set"):
        run_code(make_space(16 << 20), assemble("scratch_store_b32 off, v0, off\ns_endpgm"))
