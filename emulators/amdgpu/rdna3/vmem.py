"""Memory instructions: SMEM scalar loads, FLAT/GLOBAL vector loads and stores, DS (LDS) reads and writes.

Addresses (RDNA3 ISA guide, "Scalar Memory" / "Flat, Global and Scratch" / "Data Share"):
SMEM ``sbase[63:0] + offset + soffset`` (dword aligned: the low two bits are ignored);
GLOBAL ``vaddr[63:0] + offset`` with ``saddr`` off, else ``saddr[63:0] + vaddr[31:0] + offset``;
FLAT ``vaddr[63:0] + offset``, every address taken as global memory (the LDS and private apertures are not
modelled yet); DS ``vaddr + offset`` inside the workgroup's LDS, where an access past the allocation reads zero
and is not written (as the hardware's LDS range check does). SCRATCH is scratch.py's, atomics atomics.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from .decode import Inst
from .lanes import gather, scatter
from .operands import Src
from .state import LANES, Group

__all__ = ["VMEM_HANDLERS"]

Handler = Callable[[Group, Inst], None]
_U32: Final = np.uint32
_U64: Final = np.uint64
_SMEM_DWORDS: Final = {"s_load_b32": 1, "s_load_b64": 2, "s_load_b128": 4, "s_load_b256": 8, "s_load_b512": 16}
_SUFFIX_BYTES: Final = {"b32": 4, "b64": 8, "b96": 12, "b128": 16, "u8": 1, "i8": 1, "u16": 2, "i16": 2,
                        "b8": 1, "b16": 2}  # fmt: skip
_DWORD_ALIGN: Final = ~np.uint64(3)
_STRIDE64: Final = 64  # the _stride64 forms scale both offsets by 64 elements


def _smem(dwords: int) -> Handler:
    def op(g: Group, i: Inst) -> None:
        addr = g.s64(i.src[0]) + np.uint64(i.simm & ((1 << 64) - 1))
        if i.saddr != Src.NULL:
            addr = addr + g.s(i.saddr).astype(_U64)
        addr = np.broadcast_to(addr & _DWORD_ALIGN, (g.n,))
        words = gather(g.space, addr, 4 * dwords).view("<u4")
        for k in range(dwords):
            g.set_s(i.vdst + k, words[:, k])

    return op


def _extend(data: np.ndarray, kind: str) -> np.ndarray:
    """Sub-dword loads widened to one dword per lane, as the ``_u8``/``_i8``/``_u16``/``_i16`` loads do."""
    if kind == "u8":
        return data[:, 0].astype(_U32)[:, None]
    if kind == "i8":
        return data[:, 0].view(np.int8).astype(np.int32).view(_U32)[:, None]
    if kind == "u16":
        return np.ascontiguousarray(data).view("<u2").astype(_U32)
    if kind == "i16":
        return np.ascontiguousarray(data).view("<i2").astype(np.int32).view(_U32)
    return np.ascontiguousarray(data).view("<u4")


def _lane_addresses(g: Group, i: Inst) -> np.ndarray:
    """Per-lane byte addresses, (n, 32) uint64."""
    offset = np.uint64(i.simm & ((1 << 64) - 1))
    if i.saddr != Src.NULL and i.name.startswith("global_"):
        base = g.s64(i.saddr)[:, None] + np.asarray(g.v(i.src[0]), _U32).astype(_U64)
    else:
        base = np.asarray(g.v64(i.src[0]), _U64)
    return np.broadcast_to(base + offset, (g.n, LANES))


def _pick(g: Group, values: np.ndarray, active: np.ndarray) -> np.ndarray:
    """The active lanes' entries of a (n, 32) array, in wave-then-lane order (a reshape when every lane is on)."""
    values = np.broadcast_to(values, (g.n, LANES))
    return values.reshape(-1) if g.all_active else values[active]


def _write_lanes(g: Group, first: int, active: np.ndarray, words: np.ndarray) -> None:
    for k in range(words.shape[1]):
        if g.all_active:
            g.set_v(first + k, words[:, k].reshape(g.n, LANES))
            continue
        full = np.zeros((g.n, LANES), _U32)
        full[active] = words[:, k]
        g.set_v(first + k, full)


def _read_lanes(g: Group, first: int, active: np.ndarray, nbytes: int) -> np.ndarray:
    count = max(1, nbytes // 4)
    words = np.stack([_pick(g, g.w.vgpr[first + k, g.sel], active) for k in range(count)], axis=1)
    return np.ascontiguousarray(words).view(np.uint8)[:, :nbytes]


def _global_load(kind: str) -> Handler:
    nbytes = _SUFFIX_BYTES[kind]

    def op(g: Group, i: Inst) -> None:
        if g.all_active:  # every lane loads: no masking, results reshaped in place
            words = _extend(gather(g.space, _lane_addresses(g, i).reshape(-1), nbytes), kind)
            for k in range(words.shape[1]):
                g.set_v(i.vdst + k, words[:, k].reshape(g.n, LANES))
            return
        active = g.exec
        data = gather(g.space, _lane_addresses(g, i)[active], nbytes)
        _write_lanes(g, i.vdst, active, _extend(data, kind))

    return op


def _global_store(kind: str) -> Handler:
    nbytes = _SUFFIX_BYTES[kind]

    def op(g: Group, i: Inst) -> None:
        if g.all_active and nbytes >= 4:
            count = nbytes // 4
            words = np.stack([np.asarray(g.w.vgpr[i.src[1] - 256 + k, g.sel]).reshape(-1) for k in range(count)], 1)
            scatter(g.space, _lane_addresses(g, i).reshape(-1), words.view(np.uint8))
            return
        active = g.exec
        scatter(g.space, _lane_addresses(g, i)[active], _read_lanes(g, i.src[1] - 256, active, nbytes))

    return op


def _lds_index(
    g: Group, i: Inst, offset: int, nbytes: int, vaddr: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(active lanes, flat LDS byte index of each active lane, whether it lies inside the allocation); ``vaddr``
    is the address VGPR as int64 when the caller already has it (the two-address forms)."""
    active = g.exec
    rel = (np.asarray(g.v(i.src[0]), _U32).astype(np.int64) if vaddr is None else vaddr) + offset
    inside = rel + nbytes <= g.w.lds_bytes
    index = rel + g.w.lds_base[g.sel][:, None]
    if not inside.all():
        index = np.where(inside, index, g.w.lds_base[g.sel][:, None])
    return active, _pick(g, index, active), _pick(g, inside, active)


def _lds_words(g: Group, index: np.ndarray, nbytes: int) -> np.ndarray | None:
    """Dword indices (k, nbytes / 4) of dword-aligned accesses of whole dwords, else None (byte indexing)."""
    if nbytes % 4 or int(np.bitwise_or.reduce(index)) & 3:
        return None
    return (index >> 2)[:, None] + np.arange(nbytes // 4) if nbytes > 4 else (index >> 2)[:, None]


def _lds_read(g: Group, index: np.ndarray, inside: np.ndarray, nbytes: int) -> np.ndarray:
    """The LDS bytes (k, nbytes) at each index; lanes outside the allocation read zero."""
    words = _lds_words(g, index, nbytes)
    if words is not None:
        data = np.ascontiguousarray(g.w.lds.view("<u4")[words]).view(np.uint8)
    else:
        data = g.w.lds[index[:, None] + np.arange(nbytes)]
    if not inside.all():
        data[~inside] = 0
    return data


def _lds_write(g: Group, index: np.ndarray, inside: np.ndarray, data: np.ndarray) -> None:
    """Store ``data`` (k, nbytes) at each index, except the lanes outside the allocation."""
    if not inside.all():
        index, data = index[inside], data[inside]
    nbytes = data.shape[1]
    words = _lds_words(g, index, nbytes)
    if words is not None:
        g.w.lds.view("<u4")[words] = np.ascontiguousarray(data).view("<u4")
    else:
        g.w.lds[index[:, None] + np.arange(nbytes)] = data


def _ds_load(kind: str, offsets: tuple[int, ...] = (0,), stride: int = 1) -> Handler:
    nbytes = _SUFFIX_BYTES[kind]

    def op(g: Group, i: Inst) -> None:
        pieces = []
        vaddr = np.asarray(g.v(i.src[0]), _U32).astype(np.int64)
        for field in offsets:
            off = (i.simm if field == 0 else i.offset1) * stride if len(offsets) > 1 else i.simm | (i.offset1 << 8)
            active, index, inside = _lds_index(g, i, off, nbytes, vaddr)
            pieces.append(_extend(_lds_read(g, index, inside, nbytes), kind))
        _write_lanes(g, i.vdst, active, np.concatenate(pieces, axis=1))

    return op


def _ds_store(kind: str, offsets: tuple[int, ...] = (0,), stride: int = 1) -> Handler:
    nbytes = _SUFFIX_BYTES[kind]

    def op(g: Group, i: Inst) -> None:
        for n_field, field in enumerate(offsets):
            off = (i.simm if field == 0 else i.offset1) * stride if len(offsets) > 1 else i.simm | (i.offset1 << 8)
            active, index, inside = _lds_index(g, i, off, nbytes)
            _lds_write(g, index, inside, _read_lanes(g, i.src[1 + n_field] - 256, active, nbytes))

    return op


def _handlers() -> dict[str, Handler]:
    ops: dict[str, Handler] = {name: _smem(n) for name, n in _SMEM_DWORDS.items()}
    for seg in ("global", "flat"):
        for kind in ("b32", "b64", "b96", "b128", "u8", "i8", "u16", "i16"):
            ops[f"{seg}_load_{kind}"] = _global_load(kind)
        for kind in ("b32", "b64", "b96", "b128", "b8", "b16"):
            ops[f"{seg}_store_{kind}"] = _global_store(kind)
    for kind in ("b32", "b64", "b96", "b128", "u8", "i8", "u16", "i16"):
        ops[f"ds_load_{kind}"] = _ds_load(kind)
    for kind in ("b32", "b64", "b96", "b128", "b8", "b16"):
        ops[f"ds_store_{kind}"] = _ds_store(kind)
    for kind, size in (("b32", 4), ("b64", 8)):
        ops[f"ds_load_2addr_{kind}"] = _ds_load(kind, (0, 1), size)
        ops[f"ds_store_2addr_{kind}"] = _ds_store(kind, (0, 1), size)
    ops["ds_load_2addr_stride64_b32"] = _ds_load("b32", (0, 1), 4 * _STRIDE64)
    ops["ds_store_2addr_stride64_b32"] = _ds_store("b32", (0, 1), 4 * _STRIDE64)
    return ops


VMEM_HANDLERS: Final[dict[str, Handler]] = _handlers()
