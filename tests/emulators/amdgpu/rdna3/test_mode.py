"""The MODE register from assembly: its value at launch (rsrc1), s_getreg/s_setreg/s_round_mode/s_denorm_mode,
and f32 denormal flushing as its FP_DENORM bits say."""

from __future__ import annotations

import numpy as np
import pytest
from support.rdna3 import DATA, assemble, make_space, needs_llvm_mc, read, run_code

from tinyhil.emulators.amdgpu.errors import WaveTrap
from tinyhil.emulators.amdgpu.rdna3.mode import Mode, initial_mode
from tinyhil.spec.amdhsa import Rsrc1

pytestmark = needs_llvm_mc
DENORM = np.float32(1e-40)  # an f32 denormal


def _mode_after(program: str, rsrc1_float: int = 0) -> int:
    """MODE after ``program``, from a launch with ``rsrc1_float`` as the float fields (0 unless given)."""
    space = make_space(16 << 20)
    run_code(
        space,
        assemble(f"""
        {program}
        s_getreg_b32 s4, hwreg(HW_REG_MODE, 0, 32)
        v_mov_b32 v1, 0
        v_mov_b32 v2, s4
        global_store_b32 v1, v2, s[0:1]
        s_endpgm
    """),
        user_data=(DATA, 0),
        rsrc1_float=rsrc1_float,
    )
    return int(read(space, DATA, 1, "<u4")[0])


@pytest.mark.parametrize(("round_mode", "denorm", "dx10", "ieee"), [(0, 3, 1, 1), (1, 0, 0, 0), (0xF, 0xC, 1, 0)])
def test_mode_starts_from_rsrc1s_float_fields(round_mode: int, denorm: int, dx10: int, ieee: int) -> None:
    rsrc1 = (round_mode << Rsrc1.FLOAT_ROUND_MODE_32) | (denorm << Rsrc1.FLOAT_DENORM_MODE_32)
    rsrc1 |= (dx10 << Rsrc1.ENABLE_DX10_CLAMP) | (ieee << Rsrc1.ENABLE_IEEE_MODE)
    want = round_mode | (denorm << 4) | (dx10 << 8) | (ieee << 9)  # the ISA's MODE layout, written out
    assert _mode_after("", rsrc1) == want == initial_mode(rsrc1)


def test_setreg_round_mode_and_denorm_mode_write_their_fields() -> None:
    assert _mode_after("s_round_mode 0x9\ns_denorm_mode 0x5") == 0x9 | (0x5 << Mode.FP_DENORM)
    assert _mode_after("s_mov_b32 s5, 0xff\ns_setreg_b32 hwreg(HW_REG_MODE, 4, 2), s5") == 0x3 << Mode.FP_DENORM
    assert _mode_after("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 8, 2), 0x3") == 0x3 << Mode.DX10_CLAMP


@pytest.mark.parametrize(("denorm_f32", "keeps_inputs", "keeps_results"), [(0, 0, 0), (1, 1, 0), (2, 0, 1), (3, 1, 1)])
def test_f32_denormals_flush_as_fp_denorm_says(denorm_f32: int, keeps_inputs: int, keeps_results: int) -> None:
    """v_add_f32 of a denormal and 0 (an input and a result denormal), and v_mul_f32 of 2^-100 by 2^-30
    (normal inputs, a denormal result)."""
    space = make_space(16 << 20)
    space.write(DATA, np.array([DENORM, 2.0**-100, 2.0**-30], np.float32))
    run_code(space, assemble(f"""
        s_denorm_mode {denorm_f32}
        v_mov_b32 v1, 0
        global_load_b96 v[2:4], v1, s[0:1]
        s_waitcnt vmcnt(0)
        v_add_f32 v5, v2, 0
        v_mul_f32 v6, v3, v4
        global_store_b64 v1, v[5:6], s[0:1] offset:16
        s_endpgm
    """), user_data=(DATA, 0))  # fmt: skip
    added, product = read(space, DATA + 16, 2, "<f4")
    assert added == (DENORM if keeps_inputs and keeps_results else 0)
    assert product == (np.float32(2.0**-130) if keeps_results else 0)


def test_a_hardware_register_the_model_lacks_is_a_wave_trap() -> None:
    with pytest.raises(WaveTrap, match=r"hardware register \d+ is not modelled"):
        run_code(make_space(16 << 20), assemble("s_getreg_b32 s0, hwreg(HW_REG_HW_ID1, 0, 32)\ns_endpgm"))
