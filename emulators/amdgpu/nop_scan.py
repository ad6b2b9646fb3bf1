"""The NOP-run scan: where a run of NOP packets ends, found in bulk over a chunk of ring or IB dwords.

The engine (:meth:`~tinyhil.emulators.amdgpu.engine.RingEngine.execute`, which runs a NOP run as one step) hands
over a chunk of dwords already classified (each dword: the size of the NOP it would head, or 0), in chunks of
:data:`NOP_SCAN_MIN_DWORDS` doubling up to :data:`NOP_SCAN_MAX_DWORDS`; :func:`walk_nops` follows the chain of NOPs
from the first dword with a constant number of Python steps per chunk: runs of header-only NOPs by one vectorised
search each, NOPs with bodies one by one up to ``_NOP_WALK_STEPS``, then by pointer doubling (log2 of the chunk size
numpy passes).
"""

from __future__ import annotations

import bisect
from typing import Final

import numpy as np

__all__ = ["NOP_SCAN_MAX_DWORDS", "NOP_SCAN_MIN_DWORDS", "walk_nops"]

# A NOP run is scanned in chunks that start small (a short run costs little) and double up to this bound.
NOP_SCAN_MIN_DWORDS: Final = 64
NOP_SCAN_MAX_DWORDS: Final = 64 << 10
_NOP_WALK_STEPS: Final = 256  # Python steps over one chunk's NOPs before pointer doubling takes the rest


def walk_nops(sizes: np.ndarray, remaining: int) -> tuple[int, int, bool]:
    """Follow a run of NOPs from ``sizes[0]``, where ``sizes[i]`` is the size in dwords of a NOP whose header is
    dword ``i`` (0: not a NOP header). A NOP belongs to the run only if it ends within ``remaining`` dwords.

    Returns the dwords and packets of the run, and whether it ran past the end of ``sizes`` (the run may go on in
    the next chunk). A run of header-only NOPs is one Python step; past ``_NOP_WALK_STEPS`` steps (many NOPs with
    bodies) the rest of the chunk goes to :func:`_jump_nops`.
    """
    count = len(sizes)
    breaks: list[int] = np.flatnonzero(sizes != 1).tolist()  # where a run of header-only NOPs stops
    at = packets = index = 0
    for _ in range(_NOP_WALK_STEPS):
        stop = breaks[index] if index < len(breaks) else count
        packets += stop - at
        at = stop
        if at >= count:
            return at, packets, True
        size = int(sizes[at])
        if not size or at + size > remaining:
            return at, packets, False
        packets += 1
        at += size
        if at >= count:
            return at, packets, True
        index = bisect.bisect_left(breaks, at, index + 1)
    return _jump_nops(sizes, remaining, at, packets)


def _jump_nops(sizes: np.ndarray, remaining: int, start: int, packets: int) -> tuple[int, int, bool]:
    """:func:`walk_nops` from dword ``start`` (inside ``sizes``, ``packets`` NOPs so far) by pointer doubling:
    every dword's successor and hop count, squared each round, so a chunk of n dwords takes log2(n) numpy passes."""
    count = len(sizes)
    index = np.arange(count)
    ends = index + sizes
    member = (sizes > 0) & (ends <= remaining)  # a whole NOP: part of the run if the run reaches it
    inside = member & (ends < count)  # ... and its successor is in this chunk
    successor = np.where(inside, ends, index)  # the run stops at a dword with no successor here
    hops = inside.astype(np.int64)
    while inside[successor[start]]:
        hops += hops[successor]
        successor = successor[successor]
    last = int(successor[start])
    packets += int(hops[start])
    if member[last]:  # a NOP that ends past this chunk: the run goes on
        return int(ends[last]), packets + 1, True
    return last, packets, False
