"""Gather and scatter of per-lane memory accesses through the GPU's address space, vectorised.

The fast path (every vector load and store of a contiguous buffer) translates the span the lanes cover once and
indexes the live view with numpy. Otherwise the sorted lane addresses are split into clusters at gaps wider than
a page and each cluster is translated on its own, so lanes that touch two distant buffers never translate the
space between them; a fault names the first byte of the first lane that hits nothing.
"""

from __future__ import annotations

import functools
from typing import Final

import numpy as np

from ..errors import GpuMemoryFault
from ..memory import AddressSpace

__all__ = ["gather", "scatter"]

_CLUSTER_GAP_BYTES: Final = 4096
_FAST_SPAN_SLACK_BYTES: Final = 1 << 20  # the fast path translates at most this much beyond the bytes touched
_U8: Final = np.uint8


def _fast_view(space: AddressSpace, lo: int, span: int, touched: int) -> np.ndarray | None:
    if span > touched * 4 + _FAST_SPAN_SLACK_BYTES:
        return None
    try:
        runs = space.runs(lo, span)
    except GpuMemoryFault:
        return None
    if len(runs) != 1 or runs[0][2] is None:
        return None
    return np.frombuffer(runs[0][2], _U8)


@functools.lru_cache(maxsize=16)
def _steps(count: int, nbytes: int) -> np.ndarray:
    """``0, nbytes, 2 * nbytes, ...`` (``count`` of them): the offsets of lanes that access consecutive elements."""
    steps = np.arange(count, dtype=np.uint64) * np.uint64(nbytes)
    steps.flags.writeable = False
    return steps


def _consecutive(addrs: np.ndarray, nbytes: int) -> int | None:
    """The first address when lane k accesses ``addrs[0] + k * nbytes`` (the common coalesced access), else None."""
    first = int(addrs[0])
    if int(addrs[-1]) != first + (len(addrs) - 1) * nbytes:
        return None
    return first if np.array_equal(addrs - np.uint64(first), _steps(len(addrs), nbytes)) else None


def _clusters(addrs: np.ndarray, nbytes: int) -> list[tuple[int, int, np.ndarray]]:
    """(lo, span, lane indices) per cluster of nearby addresses."""
    order = np.argsort(addrs, kind="stable")
    ordered = addrs[order]
    cuts = np.flatnonzero(np.diff(ordered) > _CLUSTER_GAP_BYTES) + 1
    out = []
    for part in np.split(np.arange(len(order)), cuts):
        lanes = np.sort(order[part])  # lane order, so that where lanes overlap the last one wins
        lo, hi = int(ordered[part[0]]), int(ordered[part[-1]]) + nbytes
        out.append((lo, hi - lo, lanes))
    return out


def _read_cluster(space: AddressSpace, addrs: np.ndarray, nbytes: int) -> tuple[int, np.ndarray]:
    """The bytes under one cluster; a fault in a gap between lanes splits it, a fault under a lane is raised."""
    lo, hi = int(addrs.min()), int(addrs.max()) + nbytes
    try:
        return lo, np.frombuffer(bytes(space.read(lo, hi - lo)), _U8)
    except GpuMemoryFault as fault:
        inside = addrs[(addrs <= fault.va) & (addrs + nbytes > fault.va)]
        if len(inside):
            raise GpuMemoryFault(int(inside.min()), nbytes, f"vector memory access: {fault.reason}") from None
        raise _SplitAt(fault.va) from None


class _SplitAt(Exception):
    def __init__(self, va: int) -> None:
        self.va = va


def _pieces(space: AddressSpace, addrs: np.ndarray, nbytes: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(lo, bytes, lane indices) covering every lane, reading only mapped ranges."""
    out = []
    work = [(lanes, addrs[lanes]) for _lo, _span, lanes in _clusters(addrs, nbytes)]
    while work:
        lanes, where = work.pop()
        try:
            lo, data = _read_cluster(space, where, nbytes)
        except _SplitAt as split:
            below = where < split.va
            work += [(lanes[below], where[below]), (lanes[~below], where[~below])]
            continue
        out.append((lo, data, lanes))
    return out


def gather(space: AddressSpace, addrs: np.ndarray, nbytes: int) -> np.ndarray:
    """``nbytes`` bytes at each address (uint64, 1-D): shape (len(addrs), nbytes), uint8.

    Raises:
        GpuMemoryFault: a lane's bytes have nothing mapped behind them (``va`` is that lane's address).
    """
    out = np.empty((len(addrs), nbytes), _U8)
    if not len(addrs):
        return out
    first = _consecutive(addrs, nbytes)
    if first is not None:  # one slice of the live view, copied
        view = _fast_view(space, first, len(addrs) * nbytes, len(addrs) * nbytes)
        if view is not None:
            return view.reshape(len(addrs), nbytes).copy()
    offsets = np.arange(nbytes, dtype=np.int64)
    lo = int(addrs.min())
    span = int(addrs.max()) + nbytes - lo
    view = _fast_view(space, lo, span, len(addrs) * nbytes)
    if view is not None:
        rel = (addrs - np.uint64(lo)).view(np.int64)  # below the span's size, so the view is exact
        if nbytes % 4 == 0 and lo % 4 == 0 and not int(np.bitwise_or.reduce(rel)) & 3 and len(view) % 4 == 0:
            dwords = view.view("<u4")
            words = dwords[rel >> 2] if nbytes == 4 else dwords[(rel >> 2)[:, None] + np.arange(nbytes // 4)]
            return np.asarray(words.view(_U8).reshape(len(addrs), nbytes))
        return np.asarray(view[rel[:, None] + offsets])
    for piece_lo, data, lanes in _pieces(space, addrs, nbytes):
        out[lanes] = data[(addrs[lanes] - np.uint64(piece_lo)).astype(np.int64)[:, None] + offsets]
    return out


def _check_writable(view: np.ndarray, lo: int, span: int) -> None:
    if not view.flags.writeable:
        raise GpuMemoryFault(lo, span, "vector memory store: write to read-only memory")


def scatter(space: AddressSpace, addrs: np.ndarray, data: np.ndarray) -> None:
    """Store ``data[k]`` (uint8, shape (len(addrs), nbytes)) at ``addrs[k]``; where lanes overlap the last wins.

    Raises:
        GpuMemoryFault: a lane's bytes have nothing mapped behind them or are read-only; the lanes of other
            clusters may be stored.
    """
    if not len(addrs):
        return
    nbytes = data.shape[1]
    first = _consecutive(addrs, nbytes)
    if first is not None:  # one slice assignment into the live view
        view = _fast_view(space, first, len(addrs) * nbytes, len(addrs) * nbytes)
        if view is not None:
            _check_writable(view, first, len(addrs) * nbytes)
            view.reshape(len(addrs), nbytes)[:] = data
            space.notify_written(first, len(addrs) * nbytes)
            return
    offsets = np.arange(nbytes, dtype=np.int64)
    lo = int(addrs.min())
    span = int(addrs.max()) + nbytes - lo
    view = _fast_view(space, lo, span, len(addrs) * nbytes)
    if view is not None:
        _check_writable(view, lo, span)
        rel = (addrs - np.uint64(lo)).view(np.int64)
        if nbytes % 4 == 0 and lo % 4 == 0 and not int(np.bitwise_or.reduce(rel)) & 3 and len(view) % 4 == 0:
            dwords, values = view.view("<u4"), np.ascontiguousarray(data).view("<u4")
            if nbytes == 4:
                dwords[rel >> 2] = values[:, 0]
            else:
                dwords[(rel >> 2)[:, None] + np.arange(nbytes // 4)] = values
        else:
            view[rel[:, None] + offsets] = data
        space.notify_written(lo, span)
        return
    for piece_lo, old, lanes in _pieces(space, addrs, nbytes):
        merged = old.copy()
        merged[(addrs[lanes] - np.uint64(piece_lo)).astype(np.int64)[:, None] + offsets] = data[lanes]
        space.write(piece_lo, merged)
