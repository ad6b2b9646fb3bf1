"""Decode RDNA3 (gfx1100) machine code into :class:`Inst` values, and print them as LLVM does (docs/rdna3.md).

Field layouts are the RDNA3 ISA guide's "Microcode Formats"; the opcode names come from
:data:`~tinyhil.emulators.amdgpu.rdna3.opcodes.OPCODES`. A word that matches no implemented encoding, an opcode the
table lacks, or an instruction cut off by the end of the code is a :class:`DecodeError` naming the byte offset.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from .opcodes import OPCODES, VOP3SD_OPS, Enc
from .operands import VGPR_BASE, Src, operand_text

__all__ = ["DecodeError", "Inst", "decode", "disassemble"]

_SEGMENTS: Final = ("flat", "scratch", "global")
# Encoding identification: (mask, value) on the first dword, most specific first.
_FORMATS: Final = (
    (0xFF800000, 0xBE800000, Enc.SOP1),
    (0xFF800000, 0xBF000000, Enc.SOPC),
    (0xFF800000, 0xBF800000, Enc.SOPP),
    (0xF0000000, 0xB0000000, Enc.SOPK),
    (0xC0000000, 0x80000000, Enc.SOP2),
    (0xFC000000, 0xF4000000, Enc.SMEM),
    (0xFE000000, 0x7E000000, Enc.VOP1),
    (0xFE000000, 0x7C000000, Enc.VOPC),
    (0x80000000, 0x00000000, Enc.VOP2),
    (0xFC000000, 0xD4000000, Enc.VOP3),
    (0xFF000000, 0xCC000000, Enc.VOP3P),
    (0xFC000000, 0xC8000000, Enc.VOPD),
    (0xFC000000, 0xD8000000, Enc.DS),
    (0xFC000000, 0xDC000000, Enc.FLAT),
    (0xFC000000, 0xE0000000, Enc.MUBUF),
)
_TWO_DWORDS: Final = frozenset({Enc.SMEM, Enc.VOP3, Enc.VOP3P, Enc.VOPD, Enc.DS, Enc.FLAT, Enc.MUBUF})
_LITERAL_OPS: Final = frozenset(
    {"v_fmamk_f32", "v_fmaak_f32", "v_dual_fmamk_f32", "v_dual_fmaak_f32", "s_setreg_imm32_b32"}
)


class DecodeError(ValueError):
    """The bytes at ``pc`` are not an instruction this decoder knows (``reason`` says why)."""

    def __init__(self, pc: int, reason: str) -> None:
        super().__init__(f"illegal instruction at {pc:#x}: {reason}")
        self.pc = pc
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Inst:
    """One decoded instruction. Operand fields hold 9-bit operand codes (VGPR n is ``256 + n``, see operands.py),
    except ``vdst``: a VGPR index for vector results, an SGPR operand code for scalar ones (SOP*, SMEM sdata,
    VOPC's 64-bit-form ``sdst``, readlane). ``simm`` is SOPK/SOPP's raw simm16 or a memory offset (signed)."""

    pc: int
    size: int
    enc: Enc
    op: int
    name: str
    vdst: int = 0
    src: tuple[int, ...] = ()
    sdst: int = Src.NULL
    simm: int = 0
    literal: int = 0
    neg: int = 0
    abs: int = 0
    opsel: int = 0
    opsel_hi: int = 0
    neg_hi: int = 0
    clamp: bool = False
    omod: int = 0
    saddr: int = Src.NULL
    seg: int = 0
    offset1: int = 0
    glc: bool = False
    sve: bool = False  # SCRATCH: the VGPR address operand is used
    dual: Inst | None = None

    @property
    def text(self) -> str:
        return disassemble(self)


def _sext(value: int, bits: int) -> int:
    return value - (1 << bits) if value & (1 << (bits - 1)) else value


def _name(enc: Enc, op: int, pc: int) -> str:
    name = OPCODES[enc].get(op)
    if name is None:
        raise DecodeError(pc, f"{enc.value} opcode {op} is not in the decode table")
    return name


def _dword(code: bytes | bytearray | memoryview, at: int, pc: int) -> int:
    if at + 4 > len(code):
        raise DecodeError(pc, f"instruction runs past the end of the code ({len(code):#x} bytes)")
    return int.from_bytes(code[at : at + 4], "little")


def decode(code: bytes | bytearray | memoryview, pc: int) -> Inst:
    """The instruction at byte offset ``pc`` of ``code``.

    Raises:
        DecodeError: an unknown encoding or opcode, a misaligned ``pc``, or an instruction cut off by the end.
    """
    if pc % 4 or pc < 0:
        raise DecodeError(pc, "the PC is not dword aligned")
    w = _dword(code, pc, pc)
    enc = next((e for mask, value, e in _FORMATS if w & mask == value), None)
    if enc is None:
        raise DecodeError(pc, f"dword {w:#010x} matches no implemented encoding (MTBUF, MIMG, EXP, ...)")
    w1 = _dword(code, pc + 4, pc) if enc in _TWO_DWORDS else 0
    size = 8 if enc in _TWO_DWORDS else 4
    inst = _FIELDS[enc](w, w1, pc, size)
    srcs = inst.src + (inst.dual.src if inst.dual is not None else ())
    if enc not in (Enc.SMEM, Enc.DS, Enc.FLAT) and (Src.LITERAL in srcs or inst.name in _LITERAL_OPS):
        literal = _dword(code, pc + size, pc)
        dual = inst.dual
        if dual is not None:
            dual = replace(dual, literal=literal, size=size + 4)
        inst = replace(inst, literal=literal, size=size + 4, dual=dual)
    return inst


def _sop1(w: int, _w1: int, pc: int, size: int) -> Inst:
    op = (w >> 8) & 0xFF
    return Inst(pc, size, Enc.SOP1, op, _name(Enc.SOP1, op, pc), vdst=(w >> 16) & 0x7F, src=(w & 0xFF,))


def _sop2(w: int, _w1: int, pc: int, size: int) -> Inst:
    op = (w >> 23) & 0x7F
    return Inst(pc, size, Enc.SOP2, op, _name(Enc.SOP2, op, pc), vdst=(w >> 16) & 0x7F, src=(w & 0xFF, (w >> 8) & 0xFF))


def _sopk(w: int, _w1: int, pc: int, size: int) -> Inst:
    op = (w >> 23) & 0x1F
    return Inst(pc, size, Enc.SOPK, op, _name(Enc.SOPK, op, pc), vdst=(w >> 16) & 0x7F, simm=w & 0xFFFF)


def _sopc(w: int, _w1: int, pc: int, size: int) -> Inst:
    op = (w >> 16) & 0x7F
    return Inst(pc, size, Enc.SOPC, op, _name(Enc.SOPC, op, pc), src=(w & 0xFF, (w >> 8) & 0xFF))


def _sopp(w: int, _w1: int, pc: int, size: int) -> Inst:
    op = (w >> 16) & 0x7F
    return Inst(pc, size, Enc.SOPP, op, _name(Enc.SOPP, op, pc), simm=w & 0xFFFF)


def _smem(w: int, w1: int, pc: int, size: int) -> Inst:
    op = (w >> 18) & 0xFF
    return Inst(
        pc, size, Enc.SMEM, op, _name(Enc.SMEM, op, pc), vdst=(w >> 6) & 0x7F, src=((w & 0x3F) << 1,),
        simm=_sext(w1 & 0x1FFFFF, 21), saddr=(w1 >> 25) & 0x7F, glc=bool(w >> 14 & 1),
    )  # fmt: skip


def _vop1(w: int, _w1: int, pc: int, size: int) -> Inst:
    op = (w >> 9) & 0xFF
    return Inst(pc, size, Enc.VOP1, op, _name(Enc.VOP1, op, pc), vdst=(w >> 17) & 0xFF, src=(w & 0x1FF,))


def _vop2(w: int, _w1: int, pc: int, size: int) -> Inst:
    op = (w >> 25) & 0x3F
    src = (w & 0x1FF, VGPR_BASE + ((w >> 9) & 0xFF))
    return Inst(pc, size, Enc.VOP2, op, _name(Enc.VOP2, op, pc), vdst=(w >> 17) & 0xFF, src=src)


def _vopc(w: int, _w1: int, pc: int, size: int) -> Inst:
    op = (w >> 17) & 0xFF
    src = (w & 0x1FF, VGPR_BASE + ((w >> 9) & 0xFF))
    return Inst(pc, size, Enc.VOPC, op, _name(Enc.VOPC, op, pc), vdst=Src.VCC_LO, src=src)


def _vop3(w: int, w1: int, pc: int, size: int) -> Inst:
    op = (w >> 16) & 0x3FF
    src = (w1 & 0x1FF, (w1 >> 9) & 0x1FF, (w1 >> 18) & 0x1FF)
    common = {"vdst": w & 0xFF, "src": src, "neg": (w1 >> 29) & 7, "omod": (w1 >> 27) & 3, "clamp": bool(w >> 15 & 1)}
    if op in VOP3SD_OPS:
        return Inst(pc, size, Enc.VOP3, op, _name(Enc.VOP3, op, pc), sdst=(w >> 8) & 0x7F, **common)  # type: ignore[arg-type]
    return Inst(pc, size, Enc.VOP3, op, _name(Enc.VOP3, op, pc), abs=(w >> 8) & 7, opsel=(w >> 11) & 0xF, **common)  # type: ignore[arg-type]


def _vop3p(w: int, w1: int, pc: int, size: int) -> Inst:
    op = (w >> 16) & 0x7F
    return Inst(
        pc, size, Enc.VOP3P, op, _name(Enc.VOP3P, op, pc), vdst=w & 0xFF,
        src=(w1 & 0x1FF, (w1 >> 9) & 0x1FF, (w1 >> 18) & 0x1FF), neg=(w1 >> 29) & 7, neg_hi=(w >> 8) & 7,
        opsel=(w >> 11) & 7, opsel_hi=((w1 >> 27) & 3) | ((w >> 12) & 4), clamp=bool(w >> 15 & 1),
    )  # fmt: skip


def _vopd(w: int, w1: int, pc: int, size: int) -> Inst:
    opx, opy = (w >> 22) & 0xF, (w >> 17) & 0x1F
    vdstx = (w1 >> 24) & 0xFF
    vdsty = (((w1 >> 17) & 0x7F) << 1) | ((vdstx & 1) ^ 1)
    y = Inst(pc, size, Enc.VOPD, opy, _name(Enc.VOPD, opy, pc), vdst=vdsty,
             src=(w1 & 0x1FF, VGPR_BASE + ((w1 >> 9) & 0xFF)))  # fmt: skip
    return Inst(pc, size, Enc.VOPD, opx, _name(Enc.VOPD, opx, pc), vdst=vdstx,
                src=(w & 0x1FF, VGPR_BASE + ((w >> 9) & 0xFF)), dual=y)  # fmt: skip


def _ds(w: int, w1: int, pc: int, size: int) -> Inst:
    op = (w >> 18) & 0xFF
    src = (VGPR_BASE + (w1 & 0xFF), VGPR_BASE + ((w1 >> 8) & 0xFF), VGPR_BASE + ((w1 >> 16) & 0xFF))
    return Inst(pc, size, Enc.DS, op, _name(Enc.DS, op, pc), vdst=(w1 >> 24) & 0xFF, src=src,
                simm=w & 0xFF, offset1=(w >> 8) & 0xFF)  # fmt: skip


def _flat(w: int, w1: int, pc: int, size: int) -> Inst:
    op, seg = (w >> 18) & 0x7F, (w >> 16) & 3
    if seg >= len(_SEGMENTS):
        raise DecodeError(pc, f"FLAT segment field {seg} is reserved")
    name = f"{_SEGMENTS[seg]}_{_name(Enc.FLAT, op, pc)}"
    return Inst(
        pc, size, Enc.FLAT, op, name, vdst=(w1 >> 24) & 0xFF,
        src=(VGPR_BASE + (w1 & 0xFF), VGPR_BASE + ((w1 >> 8) & 0xFF)), simm=_sext(w & 0x1FFF, 13),
        saddr=(w1 >> 16) & 0x7F, seg=seg, glc=bool(w >> 14 & 1), sve=bool(w1 >> 23 & 1),
    )  # fmt: skip


def _mubuf(w: int, _w1: int, pc: int, size: int) -> Inst:
    op = (w >> 18) & 0xFF
    return Inst(pc, size, Enc.MUBUF, op, _name(Enc.MUBUF, op, pc))


_FIELDS: Final = {
    Enc.SOP1: _sop1, Enc.SOP2: _sop2, Enc.SOPK: _sopk, Enc.SOPC: _sopc, Enc.SOPP: _sopp, Enc.SMEM: _smem,
    Enc.VOP1: _vop1, Enc.VOP2: _vop2, Enc.VOPC: _vopc, Enc.VOP3: _vop3, Enc.VOP3P: _vop3p, Enc.VOPD: _vopd,
    Enc.DS: _ds, Enc.FLAT: _flat, Enc.MUBUF: _mubuf,
}  # fmt: skip


def disassemble(inst: Inst) -> str:
    """The instruction in LLVM's syntax, close enough to read in an error message (registers by first index)."""
    ops: list[str]
    lit = inst.literal
    match inst.enc:
        case Enc.SOPP:
            return f"{inst.name} {inst.simm:#x}"
        case Enc.MUBUF:
            return inst.name
        case Enc.SOPK:
            ops = [operand_text(inst.vdst), f"{inst.simm:#x}"]
        case Enc.SOP1 | Enc.SOP2:
            ops = [operand_text(inst.vdst)] + [operand_text(s, lit) for s in inst.src]
        case Enc.SOPC:
            ops = [operand_text(s, lit) for s in inst.src]
        case Enc.SMEM:
            ops = [operand_text(inst.vdst), operand_text(inst.src[0]), f"{inst.simm:#x}"]
        case Enc.VOPC:
            ops = [operand_text(Src.VCC_LO)] + [operand_text(s, lit) for s in inst.src]
        case Enc.VOPD:
            y = inst.dual
            assert y is not None  # _vopd always sets it
            x_text = " ".join([inst.name, f"v{inst.vdst},", ", ".join(operand_text(s, lit) for s in inst.src)])
            return f"{x_text} :: {y.name} v{y.vdst}, " + ", ".join(operand_text(s, lit) for s in y.src)
        case Enc.DS:
            ops = [f"v{inst.vdst}"] + [operand_text(s) for s in inst.src] + [f"offset:{inst.simm}"]
        case Enc.FLAT:
            addr = [operand_text(inst.src[0]), operand_text(inst.src[1]) if "store" in inst.name else f"v{inst.vdst}"]
            ops = (addr if "store" in inst.name else addr[::-1]) + [operand_text(inst.saddr), f"offset:{inst.simm}"]
        case _:
            dst = (
                operand_text(inst.vdst)
                if inst.name.startswith(("v_cmp_", "v_readlane", "v_readfirstlane"))
                else (f"v{inst.vdst}")
            )
            ops = (
                [dst]
                + ([operand_text(inst.sdst)] if inst.sdst != Src.NULL else [])
                + [operand_text(s, lit) for s in inst.src]
            )
    return f"{inst.name} {', '.join(ops)}"
