"""The run's ``--workers``: at most that many shard processes at once, handed out longest lane first.

A lane holds a slot for as long as its shard process lives (it is fed test after test), and gives it back when it
has no test left. When more lanes wait than slots are free, the lane with the most planned work goes first: lanes
are the jobs of a longest-processing-time list schedule over the slots, as pairs are over lanes in the plan.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tinyhil.errors import InvalidArgument

__all__ = ["SlotGate"]


class SlotGate:
    """``slots`` slots; :meth:`held` waits for one, the largest ``load`` first (ties: first come)."""

    def __init__(self, slots: int) -> None:
        if type(slots) is not int or slots < 1:
            raise InvalidArgument(f"slots={slots!r}, expected an integer >= 1")
        self.slots = self.free = slots
        self.peak = 0  # the most slots ever held at once
        self._cond = threading.Condition()
        self._waiting: list[tuple[float, int]] = []
        self._order = itertools.count()

    @property
    def waiting(self) -> int:
        """How many lanes wait for a slot."""
        with self._cond:
            return len(self._waiting)

    @contextmanager
    def held(self, load: float = 0.0) -> Iterator[None]:
        with self._cond:
            ticket = (-load, next(self._order))
            heapq.heappush(self._waiting, ticket)
            while self.free == 0 or self._waiting[0] != ticket:
                self._cond.wait()
            heapq.heappop(self._waiting)
            self.free -= 1
            self.peak = max(self.peak, self.slots - self.free)
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self.free += 1
                self._cond.notify_all()
