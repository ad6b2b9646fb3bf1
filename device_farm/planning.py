"""Planning a run: which pairs it covers, the durations that order them, and the plan that routes them to lanes.

**Selection.** :func:`select_pairs` narrows the collected pairs to a run's share: the quarantined ones
(``--quarantine-verify``) and one part of ``N`` (``--subset i/N``), the same parts in every CI job.

**Durations.** Each passed pair's duration is kept in the farm's state (``durations.json``,
:func:`read_durations`, :func:`save_durations`); the next run plans by them.

**The plan**: route every test x target pair to the boards that can run it, then shard by expected duration.

**Routing.** A pair can run on a board that serves its target and has every capability the test requires. A pair
no board can run is *unroutable* and reported with the reason, never silently dropped.

**Lanes.** Each board slot is a *lane* (a real board has one, an emulated board its ``slots``). A lane's pairs run
in one shard process, fed test after test, so each lane pays one process start-up. With ``workers`` (at most that
many shards at once) the plan takes at most that many lanes: the fewest boards that cover every pair, then more
lanes where the most seconds per lane wait; a board left out gets an empty lane that takes only retries.

**Sharding.** Pairs are taken longest first (the recorded duration of the test on that target, else a default)
and each goes to the least-loaded lane among those that can run it: the longest-processing-time rule, whose
makespan is within 4/3 of the optimum and, for the many-small-tests suites a farm runs, close to it. Tests that
need the same board stay on the lane that holds it, since a lane is one board slot.

Lanes that can run the same pairs form one *eligibility group*, with a heap of its lanes by load; a lane whose
load changes is pushed again into the heaps of the groups it belongs to, and stale entries are skipped when they
surface. Planning ``n`` pairs over ``m`` lanes in ``k`` distinct groups costs ``O(n log n + n k log m)``.
"""

from __future__ import annotations

import datetime as dt
import heapq
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from tinyhil._files import write_atomically
from tinyhil.device_farm.inventory.hwmap import Board
from tinyhil.device_farm.quarantine import Quarantine
from tinyhil.errors import InvalidArgument
from tinyhil.loading import FileFormatError, parse_json, read_capped

__all__ = [
    "DEFAULT_DURATION_S",
    "DURATIONS_NAME",
    "Lane",
    "Pair",
    "Plan",
    "Unroutable",
    "parse_subset",
    "plan",
    "read_durations",
    "save_durations",
    "select_pairs",
]

DEFAULT_DURATION_S: Final = 1.0
DURATIONS_NAME: Final = "durations.json"  # in the farm's state directory
_DURATION_MAX_S: Final = 1e9  # a kept duration past 30 years is damage, not a measurement


@dataclass(frozen=True, slots=True)
class Pair:
    """One test on one target, with the capabilities the test requires."""

    node_id: str  # the argument that selects the test (its file's absolute path, in the run's processes)
    target: str
    requires: frozenset[str] = frozenset()
    test_id: str = ""  # pytest's node id, relative to the suite's root; empty: ``node_id``

    @property
    def name(self) -> str:
        """How reports name the test: its node id relative to the suite's root (the same in every checkout)."""
        return self.test_id or self.node_id

    @property
    def key(self) -> str:
        """How durations and results name the pair: ``name@target``."""
        return f"{self.name}@{self.target}"


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


def _lanes(boards: Sequence[Board], counts: Mapping[str, int] | None = None) -> dict[str, list[Lane]]:
    """Each board's lanes: ``counts`` of them (none for a board it leaves out), else one per slot."""
    sizes = {b.id: b.slots for b in boards} if counts is None else counts
    return {board.id: [Lane(board.id, slot) for slot in range(sizes.get(board.id, 0))] for board in boards}


def _lane_counts(boards: Sequence[Board], demand: Mapping[tuple[str, ...], float], workers: int) -> dict[str, int]:
    """How many lanes each board gets when at most ``workers`` shards run at once (``demand``: the planned
    seconds per eligibility group). First the fewest boards that cover every group, the one that covers the most
    seconds first (a greedy set cover); then, while lanes are fewer than ``workers``, one more lane for the group
    with the most seconds per lane, on its board with spare slots and the fewest lanes. A board with no lane takes
    no planned work (its lane stands by for retries); every group keeps at least one lane however small
    ``workers`` is, so the lanes may outnumber the workers (the engine then runs them ``workers`` at a time)."""
    order = {board.id: n for n, board in enumerate(boards)}
    spare = {board.id: max(1, min(board.slots, workers)) for board in boards}
    counts: dict[str, int] = {}
    uncovered = dict(demand)
    while uncovered:
        covers: dict[str, float] = {}
        for group, seconds in uncovered.items():
            for board in group:
                covers[board] = covers.get(board, 0.0) + seconds
        best = min(covers, key=lambda b: (-covers[b], order[b]))
        counts[best] = 1
        uncovered = {group: seconds for group, seconds in uncovered.items() if best not in group}
    while sum(counts.values()) < workers:
        open_groups = [g for g in demand if any(counts.get(b, 0) < spare[b] for b in g)]
        if not open_groups:
            break
        group = max(open_groups, key=lambda g: demand[g] / max(1, sum(counts.get(b, 0) for b in g)))
        board = min((b for b in group if counts.get(b, 0) < spare[b]), key=lambda b: (counts.get(b, 0), order[b]))
        counts[board] = counts.get(board, 0) + 1
    return counts


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

    ``durations`` maps :attr:`Pair.key` to seconds from earlier runs; ``workers`` bounds the shards that run at
    once: the plan uses at most that many lanes where the pairs allow (:func:`_lane_counts`), and a board it leaves
    out gets an empty lane that stands by for retries.

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
    # Longest first; ties in input order, so a plan is reproducible.
    timed = sorted(
        ((known.get(p.key, default_duration_s), n, p) for n, p in enumerate(pairs)), key=lambda t: (-t[0], t[1])
    )
    eligibility: dict[tuple[str, frozenset[str]], tuple[tuple[str, ...], str]] = {}
    demand: dict[tuple[str, ...], float] = {}
    for seconds, _, pair in timed:
        cache_key = (pair.target, pair.requires)
        if cache_key not in eligibility:
            eligibility[cache_key] = _eligible(pair, boards)
        able = eligibility[cache_key][0]
        if able:
            demand[able] = demand.get(able, 0.0) + seconds
    lanes_of = _lanes(boards, None if workers is None else _lane_counts(boards, demand, workers))
    result = Plan(loads={lane: 0.0 for lanes in lanes_of.values() for lane in lanes})
    groups: dict[tuple[str, ...], list[tuple[float, int, Lane]]] = {}
    member_of: dict[Lane, list[tuple[str, ...]]] = {}
    order = {lane: n for n, lane in enumerate(result.loads)}
    for seconds, _, pair in timed:
        able, reason = eligibility[(pair.target, pair.requires)]
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
    for board in boards:  # a board the lanes left out stands by for retries
        if not lanes_of[board.id] and any(board.id in able for able in demand):
            result.shards[Lane(board.id, 0)] = []
    return result


def parse_subset(text: str) -> tuple[int, int]:
    """``"i/N"`` (1 <= i <= N) as ``(i, N)``.

    Raises:
        InvalidArgument: not two integers with 1 <= i <= N.
    """
    part, _, count = text.partition("/")
    try:
        i, n = int(part), int(count)
    except ValueError:
        raise InvalidArgument(f"--subset {text!r}, expected i/N such as 2/4") from None
    if not 1 <= i <= n:
        raise InvalidArgument(f"--subset {text!r}, expected 1 <= i <= N")
    return i, n


def select_pairs(pairs: Sequence[Pair], *, quarantine: Quarantine | None = None, quarantine_verify: bool = False,
                 subset: tuple[int, int] | None = None, subset_seed: int = 0) -> list[Pair]:  # fmt: skip
    """The pairs a run covers: with ``quarantine_verify`` only those an active ``quarantine`` entry names (by test
    and target; the board is not known before planning), and with ``subset`` ``(i, N)`` the ``i``-th of ``N`` parts
    of a shuffle seeded with ``subset_seed`` (every CI job computes the same parts, each pair in exactly one).

    Raises:
        InvalidArgument: ``quarantine_verify`` without a quarantine.
    """
    chosen = list(pairs)
    if quarantine_verify:
        if quarantine is None:
            raise InvalidArgument("--quarantine-verify runs the quarantined tests, expected --quarantine FILE too")
        active = quarantine.active(dt.date.today())
        chosen = [p for p in chosen if any(e.matches(p.name, p.target, board=None) for e in active)]
    if subset is not None:
        i, n = subset
        order = sorted(chosen, key=lambda p: p.key)
        random.Random(subset_seed).shuffle(order)
        picked = {p.key for p in order[i - 1 :: n]}
        chosen = [p for p in chosen if p.key in picked]
    return chosen


def read_durations(state_dir: Path) -> dict[str, float]:
    """Durations kept from earlier runs in ``state_dir``, by pair key; a file that cannot be used is a fresh start
    (it only orders the work)."""
    try:
        known = parse_json(read_capped(state_dir / DURATIONS_NAME, "durations"), state_dir / DURATIONS_NAME)
    except FileFormatError:
        return {}
    if not isinstance(known, dict):
        return {}
    return {str(k): float(v) for k, v in known.items() if type(v) in (int, float) and 0 <= v < _DURATION_MAX_S}


def save_durations(state_dir: Path, known: Mapping[str, float]) -> None:
    """Keep ``known`` (seconds by pair key) for the next run's plan."""
    write_atomically(state_dir / DURATIONS_NAME, json.dumps(dict(known), sort_keys=True))
