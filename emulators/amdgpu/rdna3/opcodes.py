"""The RDNA3 (gfx1100) decode table: every opcode the decoder knows, by encoding (docs/rdna3.md).

Opcode numbers are the RDNA3 ISA guide's (checked against LLVM's AMDGPU assembler by the tests). This table is the
single source of the known-opcode list; which of them execute is the executor's handler table
(:data:`~tinyhil.emulators.amdgpu.rdna3.executor.HANDLERS`), and the docs table is generated from both.
VOP3 opcodes 0-255 are the VOPC compares, 256-383 VOP2 + 256 and 384-511 VOP1 + 384 (their 64-bit forms).
FLAT/GLOBAL/SCRATCH share one opcode space; the name's prefix comes from the segment field.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

__all__ = ["OPCODES", "VOP3SD_OPS", "VOP3_FROM_VOP1", "VOP3_FROM_VOP2", "Enc"]


class Enc(Enum):
    """Instruction encodings (RDNA3 ISA guide, "Microcode Formats")."""

    SOP1 = "SOP1"
    SOP2 = "SOP2"
    SOPK = "SOPK"
    SOPC = "SOPC"
    SOPP = "SOPP"
    SMEM = "SMEM"
    VOP1 = "VOP1"
    VOP2 = "VOP2"
    VOPC = "VOPC"
    VOP3 = "VOP3"
    VOP3P = "VOP3P"
    VOPD = "VOPD"
    DS = "DS"
    FLAT = "FLAT"
    MUBUF = "MUBUF"


VOP3_FROM_VOP2: Final = 256
VOP3_FROM_VOP1: Final = 384


def _table(text: str) -> dict[int, str]:
    return {int(op): name for op, name in (item.split(":") for item in text.split())}


_BASE: Final[dict[Enc, dict[int, str]]] = {
    Enc.SOP1: _table(
        "0:s_mov_b32 1:s_mov_b64 2:s_cmov_b32 4:s_brev_b32 8:s_ctz_i32_b32 10:s_clz_i32_u32 12:s_cls_i32 "
        "14:s_sext_i32_i8 15:s_sext_i32_i16 16:s_bitset0_b32 18:s_bitset1_b32 21:s_abs_i32 22:s_bcnt0_i32_b32 "
        "24:s_bcnt1_i32_b32 30:s_not_b32 31:s_not_b64 32:s_and_saveexec_b32 33:s_and_saveexec_b64 "
        "34:s_or_saveexec_b32 35:s_or_saveexec_b64 36:s_xor_saveexec_b32 37:s_xor_saveexec_b64 "
        "44:s_and_not0_saveexec_b32 48:s_and_not1_saveexec_b32 49:s_and_not1_saveexec_b64 "
        "50:s_or_not1_saveexec_b32 71:s_getpc_b64 72:s_setpc_b64 73:s_swappc_b64"
    ),
    Enc.SOP2: _table(
        "0:s_add_u32 1:s_sub_u32 2:s_add_i32 3:s_sub_i32 4:s_addc_u32 5:s_subb_u32 6:s_absdiff_i32 "
        "8:s_lshl_b32 9:s_lshl_b64 10:s_lshr_b32 11:s_lshr_b64 12:s_ashr_i32 13:s_ashr_i64 14:s_lshl1_add_u32 "
        "15:s_lshl2_add_u32 16:s_lshl3_add_u32 17:s_lshl4_add_u32 18:s_min_i32 19:s_min_u32 20:s_max_i32 "
        "21:s_max_u32 22:s_and_b32 23:s_and_b64 24:s_or_b32 25:s_or_b64 26:s_xor_b32 27:s_xor_b64 "
        "28:s_nand_b32 29:s_nand_b64 30:s_nor_b32 31:s_nor_b64 32:s_xnor_b32 33:s_xnor_b64 34:s_and_not1_b32 "
        "35:s_and_not1_b64 36:s_or_not1_b32 37:s_or_not1_b64 38:s_bfe_u32 39:s_bfe_i32 40:s_bfe_u64 "
        "41:s_bfe_i64 42:s_bfm_b32 44:s_mul_i32 45:s_mul_hi_u32 46:s_mul_hi_i32 48:s_cselect_b32 "
        "49:s_cselect_b64 50:s_pack_ll_b32_b16"
    ),
    Enc.SOPK: _table(
        "0:s_movk_i32 2:s_cmovk_i32 3:s_cmpk_eq_i32 4:s_cmpk_lg_i32 5:s_cmpk_gt_i32 6:s_cmpk_ge_i32 "
        "7:s_cmpk_lt_i32 8:s_cmpk_le_i32 9:s_cmpk_eq_u32 10:s_cmpk_lg_u32 11:s_cmpk_gt_u32 12:s_cmpk_ge_u32 "
        "13:s_cmpk_lt_u32 14:s_cmpk_le_u32 15:s_addk_i32 16:s_mulk_i32 17:s_getreg_b32 18:s_setreg_b32 "
        "19:s_setreg_imm32_b32 24:s_waitcnt_vscnt 25:s_waitcnt_vmcnt "
        "26:s_waitcnt_expcnt 27:s_waitcnt_lgkmcnt"
    ),
    Enc.SOPC: _table(
        "0:s_cmp_eq_i32 1:s_cmp_lg_i32 2:s_cmp_gt_i32 3:s_cmp_ge_i32 4:s_cmp_lt_i32 5:s_cmp_le_i32 "
        "6:s_cmp_eq_u32 7:s_cmp_lg_u32 8:s_cmp_gt_u32 9:s_cmp_ge_u32 10:s_cmp_lt_u32 11:s_cmp_le_u32 "
        "12:s_bitcmp0_b32 13:s_bitcmp1_b32 16:s_cmp_eq_u64 17:s_cmp_lg_u64"
    ),
    Enc.SOPP: _table(
        "0:s_nop 3:s_sleep 4:s_set_inst_prefetch_distance 5:s_clause 7:s_delay_alu 8:s_waitcnt_depctr 9:s_waitcnt "
        "16:s_trap "
        "17:s_round_mode 18:s_denorm_mode "
        "31:s_code_end 32:s_branch 33:s_cbranch_scc0 34:s_cbranch_scc1 35:s_cbranch_vccz 36:s_cbranch_vccnz "
        "37:s_cbranch_execz 38:s_cbranch_execnz 48:s_endpgm 53:s_setprio 54:s_sendmsg 60:s_icache_inv "
        "61:s_barrier"
    ),
    Enc.SMEM: _table("0:s_load_b32 1:s_load_b64 2:s_load_b128 3:s_load_b256 4:s_load_b512"),
    Enc.VOP1: _table(
        "0:v_nop 1:v_mov_b32 2:v_readfirstlane_b32 3:v_cvt_i32_f64 4:v_cvt_f64_i32 10:v_cvt_f16_f32 "
        "11:v_cvt_f32_f16 15:v_cvt_f32_f64 16:v_cvt_f64_f32 21:v_cvt_u32_f64 22:v_cvt_f64_u32 23:v_trunc_f64 "
        "24:v_ceil_f64 25:v_rndne_f64 26:v_floor_f64 47:v_rcp_f64 49:v_rsq_f64 52:v_sqrt_f64 62:v_fract_f64 "
        "5:v_cvt_f32_i32 6:v_cvt_f32_u32 7:v_cvt_u32_f32 "
        "8:v_cvt_i32_f32 12:v_cvt_nearest_i32_f32 13:v_cvt_floor_i32_f32 17:v_cvt_f32_ubyte0 18:v_cvt_f32_ubyte1 "
        "19:v_cvt_f32_ubyte2 20:v_cvt_f32_ubyte3 32:v_fract_f32 33:v_trunc_f32 34:v_ceil_f32 35:v_rndne_f32 "
        "36:v_floor_f32 37:v_exp_f32 39:v_log_f32 42:v_rcp_f32 43:v_rcp_iflag_f32 46:v_rsq_f32 51:v_sqrt_f32 "
        "53:v_sin_f32 54:v_cos_f32 55:v_not_b32 56:v_bfrev_b32 57:v_clz_i32_u32 58:v_ctz_i32_b32 59:v_cls_i32 "
        "63:v_frexp_exp_i32_f32 64:v_frexp_mant_f32"
    ),
    Enc.VOP2: _table(
        "1:v_cndmask_b32 3:v_add_f32 4:v_sub_f32 5:v_subrev_f32 7:v_mul_dx9_zero_f32 8:v_mul_f32 "
        "9:v_mul_i32_i24 10:v_mul_hi_i32_i24 11:v_mul_u32_u24 12:v_mul_hi_u32_u24 15:v_min_f32 16:v_max_f32 "
        "17:v_min_i32 18:v_max_i32 19:v_min_u32 20:v_max_u32 24:v_lshlrev_b32 25:v_lshrrev_b32 "
        "26:v_ashrrev_i32 27:v_and_b32 28:v_or_b32 29:v_xor_b32 30:v_xnor_b32 32:v_add_co_ci_u32 "
        "33:v_sub_co_ci_u32 34:v_subrev_co_ci_u32 37:v_add_nc_u32 38:v_sub_nc_u32 39:v_subrev_nc_u32 "
        "43:v_fmac_f32 44:v_fmamk_f32 45:v_fmaak_f32 59:v_ldexp_f16"
    ),
    Enc.VOPC: _table(
        "32:v_cmp_f_f64 33:v_cmp_lt_f64 34:v_cmp_eq_f64 35:v_cmp_le_f64 36:v_cmp_gt_f64 37:v_cmp_lg_f64 "
        "38:v_cmp_ge_f64 39:v_cmp_o_f64 40:v_cmp_u_f64 41:v_cmp_nge_f64 42:v_cmp_nlg_f64 43:v_cmp_ngt_f64 "
        "44:v_cmp_nle_f64 45:v_cmp_neq_f64 46:v_cmp_nlt_f64 47:v_cmp_t_f64 160:v_cmpx_f_f64 161:v_cmpx_lt_f64 "
        "162:v_cmpx_eq_f64 163:v_cmpx_le_f64 164:v_cmpx_gt_f64 165:v_cmpx_lg_f64 166:v_cmpx_ge_f64 "
        "167:v_cmpx_o_f64 168:v_cmpx_u_f64 169:v_cmpx_nge_f64 170:v_cmpx_nlg_f64 171:v_cmpx_ngt_f64 "
        "172:v_cmpx_nle_f64 173:v_cmpx_neq_f64 174:v_cmpx_nlt_f64 175:v_cmpx_t_f64 "
        "16:v_cmp_f_f32 17:v_cmp_lt_f32 18:v_cmp_eq_f32 19:v_cmp_le_f32 20:v_cmp_gt_f32 21:v_cmp_lg_f32 "
        "22:v_cmp_ge_f32 23:v_cmp_o_f32 24:v_cmp_u_f32 25:v_cmp_nge_f32 26:v_cmp_nlg_f32 27:v_cmp_ngt_f32 "
        "28:v_cmp_nle_f32 29:v_cmp_neq_f32 30:v_cmp_nlt_f32 31:v_cmp_t_f32 65:v_cmp_lt_i32 66:v_cmp_eq_i32 "
        "67:v_cmp_le_i32 68:v_cmp_gt_i32 69:v_cmp_ne_i32 70:v_cmp_ge_i32 73:v_cmp_lt_u32 74:v_cmp_eq_u32 "
        "75:v_cmp_le_u32 76:v_cmp_gt_u32 77:v_cmp_ne_u32 78:v_cmp_ge_u32 81:v_cmp_lt_i64 82:v_cmp_eq_i64 "
        "83:v_cmp_le_i64 84:v_cmp_gt_i64 85:v_cmp_ne_i64 86:v_cmp_ge_i64 89:v_cmp_lt_u64 90:v_cmp_eq_u64 "
        "91:v_cmp_le_u64 92:v_cmp_gt_u64 93:v_cmp_ne_u64 94:v_cmp_ge_u64 126:v_cmp_class_f32 144:v_cmpx_f_f32 "
        "145:v_cmpx_lt_f32 146:v_cmpx_eq_f32 147:v_cmpx_le_f32 148:v_cmpx_gt_f32 149:v_cmpx_lg_f32 "
        "150:v_cmpx_ge_f32 151:v_cmpx_o_f32 152:v_cmpx_u_f32 153:v_cmpx_nge_f32 154:v_cmpx_nlg_f32 "
        "155:v_cmpx_ngt_f32 156:v_cmpx_nle_f32 157:v_cmpx_neq_f32 158:v_cmpx_nlt_f32 159:v_cmpx_t_f32 "
        "193:v_cmpx_lt_i32 194:v_cmpx_eq_i32 195:v_cmpx_le_i32 196:v_cmpx_gt_i32 197:v_cmpx_ne_i32 "
        "198:v_cmpx_ge_i32 201:v_cmpx_lt_u32 202:v_cmpx_eq_u32 203:v_cmpx_le_u32 204:v_cmpx_gt_u32 "
        "205:v_cmpx_ne_u32 206:v_cmpx_ge_u32 209:v_cmpx_lt_i64 210:v_cmpx_eq_i64 211:v_cmpx_le_i64 "
        "212:v_cmpx_gt_i64 213:v_cmpx_ne_i64 214:v_cmpx_ge_i64 217:v_cmpx_lt_u64 218:v_cmpx_eq_u64 "
        "219:v_cmpx_le_u64 220:v_cmpx_gt_u64 221:v_cmpx_ne_u64 222:v_cmpx_ge_u64 254:v_cmpx_class_f32"
    ),
    Enc.VOP3: _table(
        "551:v_div_fixup_f32 552:v_div_fixup_f64 567:v_div_fmas_f32 568:v_div_fmas_f64 764:v_div_scale_f32 "
        "765:v_div_scale_f64 807:v_add_f64 808:v_mul_f64 809:v_min_f64 810:v_max_f64 532:v_fma_f64 811:v_ldexp_f64 "
        "522:v_mad_i32_i24 523:v_mad_u32_u24 528:v_bfe_u32 529:v_bfe_i32 530:v_bfi_b32 531:v_fma_f32 "
        "534:v_alignbit_b32 537:v_min3_f32 538:v_min3_i32 539:v_min3_u32 540:v_max3_f32 541:v_max3_i32 "
        "542:v_max3_u32 543:v_med3_f32 544:v_med3_i32 545:v_med3_u32 576:v_xor3_b32 580:v_perm_b32 "
        "581:v_xad_u32 582:v_lshl_add_u32 583:v_add_lshl_u32 597:v_add3_u32 598:v_lshl_or_b32 599:v_and_or_b32 "
        "600:v_or3_b32 766:v_mad_u64_u32 767:v_mad_i64_i32 768:v_add_co_u32 769:v_sub_co_u32 "
        "770:v_subrev_co_u32 796:v_ldexp_f32 797:v_bfm_b32 798:v_bcnt_u32_b32 803:v_cvt_pk_u16_u32 "
        "805:v_sub_nc_i32 806:v_add_nc_i32 812:v_mul_lo_u32 813:v_mul_hi_u32 814:v_mul_hi_i32 "
        "824:v_lshlrev_b16 828:v_lshlrev_b64 829:v_lshrrev_b64 830:v_ashrrev_i64 864:v_readlane_b32 "
        "865:v_writelane_b32"
    ),
    Enc.VOP3P: _table(
        "0:v_pk_mad_i16 1:v_pk_mul_lo_u16 2:v_pk_add_i16 3:v_pk_sub_i16 4:v_pk_lshlrev_b16 5:v_pk_lshrrev_b16 "
        "6:v_pk_ashrrev_i16 7:v_pk_max_i16 8:v_pk_min_i16 9:v_pk_mad_u16 10:v_pk_add_u16 11:v_pk_sub_u16 "
        "12:v_pk_max_u16 13:v_pk_min_u16 14:v_pk_fma_f16 15:v_pk_add_f16 16:v_pk_mul_f16 17:v_pk_min_f16 "
        "18:v_pk_max_f16"
    ),
    Enc.VOPD: _table(
        "0:v_dual_fmac_f32 1:v_dual_fmaak_f32 2:v_dual_fmamk_f32 3:v_dual_mul_f32 4:v_dual_add_f32 "
        "5:v_dual_sub_f32 6:v_dual_subrev_f32 7:v_dual_mul_dx9_zero_f32 8:v_dual_mov_b32 9:v_dual_cndmask_b32 "
        "10:v_dual_max_f32 11:v_dual_min_f32 16:v_dual_add_nc_u32 17:v_dual_lshlrev_b32 18:v_dual_and_b32"
    ),
    Enc.DS: _table(
        "15:ds_store_2addr_stride64_b32 56:ds_load_2addr_stride64_b32 78:ds_store_2addr_b64 119:ds_load_2addr_b64 "
        "0:ds_add_u32 1:ds_sub_u32 2:ds_rsub_u32 3:ds_inc_u32 4:ds_dec_u32 5:ds_min_i32 6:ds_max_i32 7:ds_min_u32 "
        "8:ds_max_u32 9:ds_and_b32 10:ds_or_b32 11:ds_xor_b32 16:ds_cmpstore_b32 18:ds_min_f32 19:ds_max_f32 "
        "21:ds_add_f32 32:ds_add_rtn_u32 33:ds_sub_rtn_u32 34:ds_rsub_rtn_u32 35:ds_inc_rtn_u32 36:ds_dec_rtn_u32 "
        "37:ds_min_rtn_i32 38:ds_max_rtn_i32 39:ds_min_rtn_u32 40:ds_max_rtn_u32 41:ds_and_rtn_b32 "
        "42:ds_or_rtn_b32 43:ds_xor_rtn_b32 45:ds_storexchg_rtn_b32 48:ds_cmpstore_rtn_b32 50:ds_min_rtn_f32 "
        "51:ds_max_rtn_f32 64:ds_add_u64 96:ds_add_rtn_u64 121:ds_add_rtn_f32 "
        "13:ds_store_b32 14:ds_store_2addr_b32 30:ds_store_b8 31:ds_store_b16 "
        "54:ds_load_b32 55:ds_load_2addr_b32 57:ds_load_i8 58:ds_load_u8 59:ds_load_i16 60:ds_load_u16 "
        "77:ds_store_b64 118:ds_load_b64 222:ds_store_b96 223:ds_store_b128 254:ds_load_b96 255:ds_load_b128"
    ),
    Enc.FLAT: _table(
        "16:load_u8 17:load_i8 18:load_u16 19:load_i16 20:load_b32 21:load_b64 22:load_b96 23:load_b128 "
        "24:store_b8 25:store_b16 26:store_b32 27:store_b64 28:store_b96 29:store_b128 "
        "51:atomic_swap_b32 52:atomic_cmpswap_b32 53:atomic_add_u32 54:atomic_sub_u32 55:atomic_csub_u32 "
        "56:atomic_min_i32 57:atomic_min_u32 58:atomic_max_i32 59:atomic_max_u32 60:atomic_and_b32 "
        "61:atomic_or_b32 62:atomic_xor_b32 63:atomic_inc_u32 64:atomic_dec_u32 65:atomic_swap_b64 "
        "66:atomic_cmpswap_b64 67:atomic_add_u64 68:atomic_sub_u64 69:atomic_min_i64 70:atomic_min_u64 "
        "71:atomic_max_i64 72:atomic_max_u64 73:atomic_and_b64 74:atomic_or_b64 75:atomic_xor_b64 "
        "76:atomic_inc_u64 77:atomic_dec_u64 80:atomic_cmpswap_f32 81:atomic_min_f32 82:atomic_max_f32 "
        "86:atomic_add_f32"
    ),
    # Of MUBUF only the cache invalidations clang emits around barriers (buffer loads/stores are not modelled).
    Enc.MUBUF: _table("43:buffer_gl0_inv 44:buffer_gl1_inv"),
}
_NO_VOP3_FORM: Final = frozenset({"v_fmamk_f32", "v_fmaak_f32", "v_nop"})


def _vop3() -> dict[int, str]:
    ops = dict(_BASE[Enc.VOPC])
    ops.update({op + VOP3_FROM_VOP2: n for op, n in _BASE[Enc.VOP2].items() if n not in _NO_VOP3_FORM})
    ops.update({op + VOP3_FROM_VOP1: n for op, n in _BASE[Enc.VOP1].items() if n not in _NO_VOP3_FORM})
    ops.update(_BASE[Enc.VOP3])
    return ops


OPCODES: Final[dict[Enc, dict[int, str]]] = {**_BASE, Enc.VOP3: _vop3()}
# VOP3 opcodes in the VOP3SD layout (an SGPR carry/condition destination instead of abs/opsel).
VOP3SD_OPS: Final = frozenset(
    op for op, n in OPCODES[Enc.VOP3].items() if n in {"v_add_co_ci_u32", "v_sub_co_ci_u32", "v_subrev_co_ci_u32",
                                                       "v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32",
                                                       "v_mad_u64_u32", "v_mad_i64_i32", "v_div_scale_f32",
                                                       "v_div_scale_f64"}
)  # fmt: skip
