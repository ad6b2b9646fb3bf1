"""The decoder against LLVM: every opcode in the decode table assembled by llvm-mc, decoded, and compared with
LLVM's own disassembly (mnemonic, destination and first source register), plus illegal encodings."""

from __future__ import annotations

import re
import subprocess

import pytest
from support.rdna3 import LLVM_MC, MC_ARGS, mc_encode, needs_llvm_mc

from tinyhil.emulators.amdgpu.rdna3 import OPCODES, DecodeError, Enc, decode
from tinyhil.emulators.amdgpu.rdna3.opcodes import VOP3_FROM_VOP1

pytestmark = needs_llvm_mc

# One operand pattern per kind of instruction; {} is the mnemonic.
_TEMPLATES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"s_cmp_\w+_u64"), "{} s[2:3], s[4:5]"),
    (re.compile(r"s_pack_\w+"), "{} s1, s2, s3"),
    (re.compile(r"s_(getpc)_b64"), "{} s[2:3]"),
    (re.compile(r"s_setpc_b64"), "{} s[2:3]"),
    (re.compile(r"s_swappc_b64"), "{} s[2:3], s[4:5]"),
    (re.compile(r"s_(lshl|lshr|ashr)_[bi]64|s_bfe_[ui]64"), "{} s[2:3], s[4:5], s6"),
    (re.compile(r"s_(mov|not|\w+_saveexec)_b64"), "{} s[2:3], s[4:5]"),
    (re.compile(r"s_\w+_(b64|u64)$"), "{} s[2:3], s[4:5], s[6:7]"),
    (re.compile(r"s_waitcnt_depctr"), "{} 0xfff"),
    (re.compile(r"s_waitcnt_\w+"), "{} null, 0x0"),
    (re.compile(r"s_getreg_b32"), "{} s1, hwreg(HW_REG_MODE, 4, 2)"),
    (re.compile(r"s_setreg_b32"), "{} hwreg(HW_REG_MODE, 4, 2), s1"),
    (re.compile(r"s_setreg_imm32_b32"), "{} hwreg(HW_REG_MODE, 4, 2), 0x3"),
    (re.compile(r"s_\w*k_\w+"), "{} s1, 0x1234"),
    (re.compile(r"s_(cmp|bitcmp)\w+"), "{} s1, s2"),
    (re.compile(r"s_(icache_inv|barrier|endpgm|code_end)$"), "{}"),
    (
        re.compile(
            r"s_(nop|sleep|branch|cbranch_\w+|waitcnt|clause|delay_alu|sendmsg|set_inst\w+|trap|setprio|round_mode|denorm_mode)$"
        ),
        "{} 0x0",
    ),
    (re.compile(r"s_\w+_(saveexec_b32|b32|i32|u32|i8|i16)$|s_\w+_b32_b16"), "{} s1, s2, s3"),
    (re.compile(r"s_load_b(\d+)"), "LOAD"),
]
_SOP1_ONE_SRC = re.compile(r"s_(mov|cmov|not|brev|ctz|clz|cls|sext|abs|bcnt\d|bitset\d|\w+_saveexec)_")
_LOAD_REGS = {"32": "s1", "64": "s[4:5]", "128": "s[4:7]", "256": "s[4:11]", "512": "s[4:19]"}


def _scalar_source(name: str) -> str | None:
    if name.startswith("s_load_b"):
        return f"{name} {_LOAD_REGS[name[len('s_load_b') :]]}, s[2:3], 0x10"
    for pattern, template in _TEMPLATES:
        if pattern.fullmatch(name):
            if template == "{} s1, s2, s3" and _SOP1_ONE_SRC.match(name):
                return f"{name} s1, s2"
            return template.format(name)
    return None


def _all_scalar() -> list[tuple[Enc, str]]:
    encs = (Enc.SOP1, Enc.SOP2, Enc.SOPK, Enc.SOPC, Enc.SOPP, Enc.SMEM)
    return [(e, n) for e in encs for n in OPCODES[e].values()]


def _llvm_disassembly(data: bytes) -> str:
    assert LLVM_MC is not None
    text = " ".join(f"0x{b:02x}" for b in data)
    run = subprocess.run([LLVM_MC, *MC_ARGS, "-disassemble"], input=text, capture_output=True, text=True, check=True)
    lines = [line.strip() for line in run.stdout.splitlines() if line.strip() and not line.strip().startswith(".")]
    return lines[0].split("//")[0].strip()


def _first_regs(text: str) -> list[str]:
    """Registers in order, by first index: v[2:3] -> v2, s[0:1] -> s0."""
    return [f"{m[0]}{m[1] or m[2]}" for m in re.findall(r"\b([sv])(?:\[(\d+):\d+\]|(\d+))", text)]


@pytest.mark.parametrize(("enc", "name"), _all_scalar(), ids=lambda v: getattr(v, "value", v))
def test_scalar_opcodes_decode_as_llvm_encodes_them(enc: Enc, name: str) -> None:
    source = _scalar_source(name)
    assert source is not None, f"no operand template for {name}"
    (data,) = mc_encode([source])
    inst = decode(data, 0)
    assert (inst.enc, inst.name, inst.size) == (enc, name, len(data))
    llvm = _llvm_disassembly(data)
    assert llvm.split()[0] == name
    if inst.enc in (Enc.SOP1, Enc.SOP2, Enc.SOPK) and "s1" in source:
        assert inst.vdst == 1


_VECTOR_CASES: list[tuple[str, str]] = [
    ("v_add_f32_e32 v1, v2, v3", "v_add_f32"),
    ("v_add_f32_e64 v1, -v2, |v3| clamp", "v_add_f32"),
    ("v_fma_f32 v1, v2, 0.5, s4", "v_fma_f32"),
    ("v_mov_b32_e32 v4, 0x3e22f983", "v_mov_b32"),
    ("v_mov_b32_e32 v4, 0.15915494", "v_mov_b32"),
    ("v_cndmask_b32_e64 v1, v2, v3, s4", "v_cndmask_b32"),
    ("v_cmp_gt_i32_e64 s4, v1, v2", "v_cmp_gt_i32"),
    ("v_cmpx_ne_u32_e32 0, v3", "v_cmpx_ne_u32"),
    ("v_mad_u64_u32 v[1:2], null, s15, s2, v[0:1]", "v_mad_u64_u32"),
    ("v_add_co_u32 v2, vcc_lo, s4, v0", "v_add_co_u32"),
    ("v_add_co_ci_u32_e32 v3, vcc_lo, s5, v1, vcc_lo", "v_add_co_ci_u32"),
    ("v_lshlrev_b64 v[0:1], 2, v[1:2]", "v_lshlrev_b64"),
    ("v_fmamk_f32 v1, v2, 0x40000000, v3", "v_fmamk_f32"),
    ("v_dual_mov_b32 v6, v4 :: v_dual_add_nc_u32 v5, v5, v2", "v_dual_mov_b32"),
    ("v_dual_fmaak_f32 v1, v2, v3, 0x40000000 :: v_dual_mov_b32 v4, v5", "v_dual_fmaak_f32"),
    ("v_pk_add_f16 v1, v2, v3 op_sel:[1,0]", "v_pk_add_f16"),
    ("global_load_b32 v2, v[2:3], off offset:-16", "global_load_b32"),
    ("global_load_b128 v[4:7], v1, s[2:3] offset:64", "global_load_b128"),
    ("global_store_b64 v[0:1], v[2:3], off", "global_store_b64"),
    ("flat_load_b32 v1, v[2:3]", "flat_load_b32"),
    ("scratch_load_b32 v1, v2, off", "scratch_load_b32"),
    ("ds_load_b32 v1, v2 offset:16", "ds_load_b32"),
    ("ds_store_2addr_b32 v2, v4, v5 offset0:1 offset1:2", "ds_store_2addr_b32"),
    ("s_load_b128 s[4:7], s[0:1], 0x2c", "s_load_b128"),
    ("buffer_gl0_inv", "buffer_gl0_inv"),
    ("ds_load_2addr_stride64_b32 v[2:3], v1 offset1:2", "ds_load_2addr_stride64_b32"),
    ("ds_store_2addr_b64 v1, v[2:3], v[4:5] offset1:2", "ds_store_2addr_b64"),
    ("ds_add_u32 v1, v2", "ds_add_u32"),
]


@pytest.mark.parametrize(("source", "name"), _VECTOR_CASES)
def test_vector_encodings_decode_fields_as_llvm(source: str, name: str) -> None:
    (data,) = mc_encode([source])
    inst = decode(data, 0)
    assert inst.name == name and inst.size == len(data)
    llvm = _llvm_disassembly(data)
    assert llvm.split()[0].removesuffix("_e32").removesuffix("_e64") == name
    assert _first_regs(inst.text)[:2] == _first_regs(llvm)[:2] or inst.enc in (Enc.VOP3P, Enc.DS)


def _vector_names() -> list[tuple[Enc, int, str]]:
    out = [(Enc.VOP1, op, n) for op, n in OPCODES[Enc.VOP1].items()]
    out += [(Enc.VOP2, op, n) for op, n in OPCODES[Enc.VOP2].items()]
    out += [(Enc.VOPC, op, n) for op, n in OPCODES[Enc.VOPC].items()]
    out += [(Enc.VOP3, op, n) for op, n in OPCODES[Enc.VOP3].items() if op >= VOP3_FROM_VOP1 + 128]
    return out


@pytest.mark.parametrize(("enc", "op", "name"), _vector_names(), ids=lambda v: getattr(v, "value", v))
def test_every_vector_opcode_number_is_llvms(enc: Enc, op: int, name: str) -> None:
    """Encode the opcode number into its format and let LLVM name it."""
    if enc is Enc.VOP1:
        word = 0x7E000000 | (op << 9) | ((1 << 17) | 0x102 if name != "v_nop" else 0)  # v_nop has no operands
    elif enc is Enc.VOP2:
        word = (op << 25) | (1 << 17) | (3 << 9) | 0x102
    elif enc is Enc.VOPC:
        word = 0x7C000000 | (op << 17) | (3 << 9) | 0x102
    else:
        word = 0xD4000000 | (op << 16) | 1
    data = word.to_bytes(4, "little")
    if enc is Enc.VOP3:
        data += (0x102 | (0x103 << 9)).to_bytes(4, "little")  # v2, v3, s0 (LLVM wants 0 in an unused src2)
    data += b"\0\0\0\x40"  # a literal, for the ops that take one
    inst = decode(data, 0)
    assert inst.name == name
    llvm = _llvm_disassembly(data[: inst.size])
    assert llvm.split()[0].removesuffix("_e32").removesuffix("_e64") == name


@pytest.mark.parametrize(
    ("words", "reason"),
    [
        ([0xF0000000, 0], "matches no implemented encoding"),  # MIMG
        ([0xE0000000, 0], "MUBUF opcode 0 is not in the decode table"),  # buffer_load_format_x
        ([0xBFB10000], "not in the decode table"),  # SOPP opcode 49
        ([0xD4000000 | (1000 << 16)], "runs past the end"),  # VOP3 missing its second dword
        ([0xDC5B0000, 0], "segment field 3 is reserved"),
        ([0xCB000000, 0], "VOPD opcode 12 is not in the decode table"),  # X slot v_dual_dot2acc_f32_f16
    ],
)
def test_illegal_encodings_are_decode_errors(words: list[int], reason: str) -> None:
    data = b"".join(w.to_bytes(4, "little") for w in words)
    with pytest.raises(DecodeError, match=reason):
        decode(data, 0)


def test_misaligned_and_truncated_pcs_are_decode_errors() -> None:
    with pytest.raises(DecodeError, match="dword aligned"):
        decode(b"\0" * 8, 2)
    with pytest.raises(DecodeError, match="past the end"):
        decode(b"\xff\x02\x02\x8b", 0)  # s_and_b32 with a literal that is missing
