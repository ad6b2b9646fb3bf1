"""A run of NOP packets as one engine step: where the run ends, found in bulk, and the step that skips it.

The engines hand over a chunk of ring or IB dwords already classified (each dword: the size of the NOP it would
head, or 0); these functions follow the chain of NOPs from the first dword with a constant number of Python steps per
chunk: runs of header-only NOPs by one vectorised search each, NOPs with bodies one by one up to
``_NOP_WALK_STEPS``, then by pointer doubling (log2 of the chunk size numpy passes). :func:`run_nops` is the
engine's step over one run (``RingEngine.execute``'s dispatch step hands it a NOP at the read position).
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Final

import numpy as np

from ._packets import _PREFETCH_BYTES
from .errors import GpuMemoryFault

if TYPE_CHECKING:
    from .engine import RingEngine

__all__ = ["NOP_SCAN_MAX_DWORDS", "NOP_SCAN_MIN_DWORDS", "run_nops", "walk_nops"]

# A NOP run is scanned in chunks that start small (a short run costs little) and double up to this bound.
NOP_SCAN_MIN_DWORDS: Final = 64
NOP_SCAN_MAX_DWORDS: Final = 64 << 10
_NOP_WALK_STEPS: Final = 256  # Python steps over one chunk's NOPs before pointer doubling takes the rest


def run_nops(engine: RingEngine, first_bytes: int, available_bytes: int) -> int:
    """Run the NOP at ``engine``'s read position (``first_bytes`` long, complete) and every whole NOP right after it
    that the IB or the ring (up to its end: a run does not wrap) holds, as one step; return the units consumed.

    Costs ``packet_ns`` per NOP, and reads what one NOP at a time would have read (each header's prefetch, never
    a NOP's body): a dword the run cannot read ends it, and the packet there faults when the engine reaches it
    on its own. A ring that is not one live view (in the system aperture, or split) runs its NOPs one by one.
    """
    at, packets = first_bytes // 4, 1
    ring_words: np.ndarray | None = None
    if engine._ibs:
        frame = engine._ibs[-1]
        base_va, limit = frame.base_va + frame.pos_bytes, available_bytes // 4
    elif engine._ring_words is not None:
        offset = (engine.rptr * engine.unit_bytes) % engine._ring_bytes
        limit = min(available_bytes, engine._ring_bytes - offset) // 4
        ring_words = np.frombuffer(engine._ring_words, np.uint32)[offset // 4 : offset // 4 + limit]
    else:
        limit = at
    chunk = NOP_SCAN_MIN_DWORDS
    while at < limit:
        count = min(chunk, limit - at)
        if ring_words is not None:
            words = ring_words[at : at + count]
        else:
            # The read reaches the prefetch of the chunk's last header, as a one-by-one fetch would.
            lookahead = min(_PREFETCH_BYTES // 4 - 1, limit - at - count)
            try:
                words = np.frombuffer(engine._memory.read(base_va + at * 4, (count + lookahead) * 4), "<u4")
            except GpuMemoryFault:
                if count == 1:
                    break
                chunk = count // 2  # close in on the first dword the run cannot read
                continue
            words = words[:count]
        run_dwords, run_packets, more = walk_nops(engine._nop_dwords(words), limit - at)
        at += run_dwords
        packets += run_packets
        if not more:
            break
        chunk = min(2 * chunk, NOP_SCAN_MAX_DWORDS)
    engine.cost_ns += packets * engine._packet_ns
    engine.wait = None
    engine._advance(at * 4)
    engine.stall = "running"
    return at * 4 // engine.unit_bytes


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
