"""SCRATCH loads and stores: each lane's private memory, swizzled a dword per lane in the dispatch's scratch.

Addressing (RDNA3 ISA guide, "Scratch" and "Flat, Global and Scratch"): a lane's private offset is the VGPR
address (when the instruction's SVE bit says it is used) + the SGPR ``saddr`` (unless ``off``) + the instruction
offset. Private memory is interleaved per lane at dword granularity, so dword ``d`` of lane ``L`` of the wave in
scratch slot ``w`` (its index among the waves running together) lives at
``scratch_base + w * scratch_wave_bytes + d * 128 + L * 4`` (wave32: 32 lanes x 4 bytes per dword row), the base
GFX11's architected flat scratch gives the wave; a dispatch without a scratch base stops the wave at its first
scratch instruction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from .decode import Inst
from .lanes import gather, scatter
from .operands import VGPR_BASE, Src
from .state import LANES, SCRATCH_LANE_STRIDE, Group, OperandError
from .vmem import _SUFFIX_BYTES, _extend, _pick, _read_lanes, _write_lanes

__all__ = ["SCRATCH_HANDLERS"]

Handler = Callable[[Group, Inst], None]
_U64: Final = np.uint64
_DWORD: Final = 4
_LANE_BYTES: Final = np.arange(LANES, dtype=np.uint64) * np.uint64(_DWORD)


def _byte_addresses(g: Group, i: Inst, active: np.ndarray, nbytes: int) -> np.ndarray:
    """The GPU address of every byte each active lane accesses: (k, nbytes) uint64."""
    if g.w.scratch_base is None:
        raise OperandError(
            f"{i.name} needs the dispatch's scratch memory, but DispatchSetup.scratch_base is not set (program "
            "COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI and COMPUTE_TMPRING_SIZE for a kernel with a private segment)"
        )
    offset = np.full((g.n, LANES), i.simm & 0xFFFFFFFF, np.uint64)
    if i.sve:
        offset += np.asarray(g.v(i.src[0]), np.uint32)
    if i.saddr != Src.NULL:
        offset += np.broadcast_to(g.s(i.saddr).astype(_U64), (g.n,))[:, None]
    offset &= _U64(0xFFFFFFFF)
    waves = np.arange(len(g.w.pc), dtype=np.uint64)[g.sel]
    base = _U64(g.w.scratch_base) + waves * _U64(g.w.scratch_wave_bytes)
    lane_base = base[:, None] + _LANE_BYTES  # (n, 32)
    offset, lane_base = _pick(g, offset, active), _pick(g, lane_base, active)
    byte: np.ndarray = np.asarray(offset[:, None] + np.arange(nbytes, dtype=np.uint64), np.uint64)
    return np.asarray(lane_base[:, None] + (byte >> _U64(2)) * _U64(SCRATCH_LANE_STRIDE) + (byte & _U64(3)), _U64)


def _load(kind: str) -> Handler:
    nbytes = _SUFFIX_BYTES[kind]

    def op(g: Group, i: Inst) -> None:
        active = g.exec
        addrs = _byte_addresses(g, i, active, nbytes)
        if nbytes % _DWORD == 0 and not int(np.bitwise_or.reduce(addrs[:, 0], initial=0)) & 3:
            words = gather(g.space, addrs[:, ::_DWORD].reshape(-1), _DWORD).reshape(len(addrs), nbytes)
        else:  # sub-dword or unaligned: byte by byte through the swizzle
            words = gather(g.space, addrs.reshape(-1), 1).reshape(len(addrs), nbytes)
        _write_lanes(g, i.vdst, active, _extend(np.ascontiguousarray(words), kind))

    return op


def _store(kind: str) -> Handler:
    nbytes = _SUFFIX_BYTES[kind]

    def op(g: Group, i: Inst) -> None:
        active = g.exec
        addrs = _byte_addresses(g, i, active, nbytes)
        data = _read_lanes(g, i.src[1] - VGPR_BASE, active, nbytes)
        if nbytes % _DWORD == 0 and not int(np.bitwise_or.reduce(addrs[:, 0], initial=0)) & 3:
            scatter(g.space, addrs[:, ::_DWORD].reshape(-1), np.ascontiguousarray(data).reshape(-1, _DWORD))
        else:
            scatter(g.space, addrs.reshape(-1), np.ascontiguousarray(data).reshape(-1, 1))

    return op


SCRATCH_HANDLERS: Final[dict[str, Handler]] = {
    **{f"scratch_load_{kind}": _load(kind) for kind in ("b32", "b64", "b96", "b128", "u8", "i8", "u16", "i16")},
    **{f"scratch_store_{kind}": _store(kind) for kind in ("b32", "b64", "b96", "b128", "b8", "b16")},
}
