"""The planner: route every test x target pair to the boards that can run it, then shard by expected duration.

**Routing.** A pair can run on a board that serves its target and has every capability the test requires. A pair
no board can run is *unroutable* and reported with the reason, never silently dropped.

**Sharding.** Each board slot is a *lane* (a real board has one, an emulated board its ``slots``, capped by the
worker count). Pairs are taken longest first (the recorded duration of the test on that target, else a default)
and each goes to the least-loaded lane among those that can run it: the longest-processing-time rule, whose
makespan is within 4/3 of the optimum and, for the many-small-tests suites a farm runs, close to it. Tests that
need the same board stay on the lane that holds it, since a lane is one board slot.

Lanes that can run the same pairs form one *eligibility group*, with a heap of its lanes by load; a lane whose
load changes is pushed again into the heaps of the groups it belongs to, and stale entries are skipped when they
surface. Planning ``n`` pairs over ``m`` lanes in ``k`` distinct groups costs ``O(n log n + n k log m)``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from tinyhil.device_farm.hwmap import Board
from tinyhil.errors import InvalidArgument

__all__ = ["DEFAULT_DURATION_S", "Lane", "Pair", "Plan", "Unroutable", "plan"]

DEFAULT_DURATION_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class Pair:
    """One test on one target, with the capabilities the test requires."""

    node_id: str
    target: str
    requires: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        """How durations and results name the pair: ``node_id@target``."""
        return f"{self.node_id}@{self.target}"


@dataclass(frozen=True, slots=True, order=True)
class Lane:
    """One slot of one board: the unit that runs one test at a time."""

    board: str
    slot: int

    def __str__(self) -> str:
        return f"{self.board}#{self.slot}"


@dataclass(frozen=True, slots=True)
class Unroutable:
    """A pair no schedulable board can run, and why."""

    pair: Pair
    reason: str


@dataclass(slots=True)
class Plan:
    """Per lane, its pairs in the order to run them; the pairs no board can run; the expected load per lane; and
    per routed pair (by :attr:`Pair.key`), every board that can run it (where a retry may go)."""

    shards: dict[Lane, list[Pair]] = field(default_factory=dict)
    unroutable: list[Unroutable] = field(default_factory=list)
    loads: dict[Lane, float] = field(default_factory=dict)
    eligible: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def makespan_s(self) -> float:
        """The expected duration of the longest lane."""
        return max(self.loads.values(), default=0.0)


def _lanes(boards: Sequence[Board], workers: int | None) -> dict[str, list[Lane]]:
    lanes: dict[str, list[Lane]] = {}
    for board in boards:
        slots = board.slots if workers is None else max(1, min(board.slots, workers))
        lanes[board.id] = [Lane(board.id, slot) for slot in range(slots)]
    return lanes


def _eligible(pair: Pair, boards: Sequence[Board]) -> tuple[tuple[str, ...], str]:
    serving = [b for b in boards if pair.target in b.targets]
    if not serving:
        return (), f"no schedulable board serves {pair.target}"
    able = tuple(b.id for b in serving if pair.requires <= b.capabilities)
    if not able:
        missing = sorted(pair.requires - frozenset().union(*(b.capabilities for b in serving)))
        said = ", ".join(missing) if missing else ", ".join(sorted(pair.requires))
        return (), f"no schedulable board serving {pair.target} has capabilities {said}"
    return able, ""


def plan(
    pairs: Iterable[Pair],
    boards: Sequence[Board],
    *,
    durations: Mapping[str, float] | None = None,
    default_duration_s: float = DEFAULT_DURATION_S,
    workers: int | None = None,
) -> Plan:
    """Route and shard ``pairs`` over the (schedulable) ``boards``.

    ``durations`` maps :attr:`Pair.key` to seconds from earlier runs; ``workers`` caps the lanes of each board.

    Raises:
        InvalidArgument: a negative or non-finite duration, a default that is not positive, or ``workers`` < 1.
    """
    if not 0 < default_duration_s < float("inf"):
        raise InvalidArgument(f"default_duration_s={default_duration_s!r}, expected seconds > 0")
    if workers is not None and (type(workers) is not int or workers < 1):
        raise InvalidArgument(f"workers={workers!r}, expected an integer >= 1")
    known = durations or {}
    for key, seconds in known.items():
        if not 0 <= seconds < float("inf"):
            raise InvalidArgument(f"duration of {key!r} is {seconds!r}, expected seconds >= 0")
    lanes_of = _lanes(boards, workers)
    result = Plan(loads={lane: 0.0 for lanes in lanes_of.values() for lane in lanes})
    # Longest first; ties in input order, so a plan is reproducible.
    timed = sorted(
        ((known.get(p.key, default_duration_s), n, p) for n, p in enumerate(pairs)), key=lambda t: (-t[0], t[1])
    )
    groups: dict[tuple[str, ...], list[tuple[float, int, Lane]]] = {}
    member_of: dict[Lane, list[tuple[str, ...]]] = {}
    order = {lane: n for n, lane in enumerate(result.loads)}
    eligibility: dict[tuple[str, frozenset[str]], tuple[tuple[str, ...], str]] = {}
    for seconds, _, pair in timed:
        cache_key = (pair.target, pair.requires)
        if cache_key not in eligibility:
            eligibility[cache_key] = _eligible(pair, boards)
        able, reason = eligibility[cache_key]
        if not able:
            result.unroutable.append(Unroutable(pair, reason))
            continue
        heap = groups.get(able)
        if heap is None:
            heap = groups[able] = [(result.loads[lane], order[lane], lane) for b in able for lane in lanes_of[b]]
            heapq.heapify(heap)
            for _, _, lane in heap:
                member_of.setdefault(lane, []).append(able)
        while True:
            load, _, lane = heapq.heappop(heap)
            if load == result.loads[lane]:
                break
        result.shards.setdefault(lane, []).append(pair)
        result.eligible[pair.key] = able
        result.loads[lane] = load + seconds
        entry = (result.loads[lane], order[lane], lane)
        for group in member_of[lane]:
            heapq.heappush(groups[group], entry)
    return result
