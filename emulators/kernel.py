"""The deterministic event kernel: an integer-nanosecond virtual clock and an ordered event queue.

Every emulator runs on one kernel. Events fire in ``(time_ns, sequence)`` order, so the same seed, fault plan and
inputs give the same schedule and the same virtual timestamps on any machine. Nothing here reads the wall clock.

Lifecycle: a model ``schedule``s callbacks (a landed bulk transfer, a poll retry, an engine step); the host side
blocks with ``run_until(condition, timeout_ns, what=...)``, which runs events in order until the condition holds,
and raises :class:`VirtualTimeout` naming ``what`` once the virtual deadline passes or nothing is left to run (a
wait that can never be satisfied fails at once, in virtual time, instead of hanging).
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import numpy as np

from tinyhil.errors import DeviceError, DeviceTimeout, InvalidArgument

__all__ = ["MAX_EVENTS_PER_WAIT", "EventHandle", "EventKernel", "NoProgress", "VirtualTimeout"]

# A wait that runs this many events without its condition holding and without time advancing is a livelock.
MAX_EVENTS_PER_WAIT: Final = 1_000_000


class VirtualTimeout(DeviceTimeout):
    """A wait on an emulated device ran out of virtual time; the message names what was awaited."""

    def __init__(self, what: str, timeout_ns: int, now_ns: int) -> None:
        super().__init__(
            f"timed out waiting for {what}: not satisfied within {timeout_ns} ns of virtual time (now {now_ns} ns)"
        )
        self.what = what
        self.timeout_ns = timeout_ns
        self.now_ns = now_ns


class NoProgress(DeviceError):
    """Events keep firing at one instant without the awaited condition ever holding (a model livelock)."""


class EventHandle:
    """A scheduled event, returned by :meth:`EventKernel.schedule`; pass it to :meth:`EventKernel.cancel`.

    Only ``schedule`` makes one (it fills the slots of a bare instance: no constructor frame per event)."""

    __slots__ = ("cancelled", "fn", "label", "time_ns")

    time_ns: int
    fn: Callable[[], None]
    label: str
    cancelled: bool

    def __repr__(self) -> str:
        state = " cancelled" if self.cancelled else ""
        return f"EventHandle({self.label or self.fn!r} at {self.time_ns} ns{state})"


_new_handle: Final = object.__new__
_heappush: Final = heapq.heappush
_heappop: Final = heapq.heappop

# The queue holds (time_ns, sequence, event): tuples compare in C, and the sequence breaks ties in schedule order.
_Entry = tuple[int, int, EventHandle]


class EventKernel:
    """A virtual clock (``now_ns``) and a queue of callbacks ordered by ``(time, sequence)``.

    ``now_ns`` is the virtual time in nanoseconds: read it freely; assigning it raises ``AttributeError``, since
    only the kernel moves time. It is a property whose getter is ``operator.attrgetter``, so reading it runs no
    Python frame (docs/performance.md).

    ``rng`` is a seeded NumPy generator for models that need randomness (landing jitter, fault timing): the seed is
    an explicit argument, so a run is reproducible from its seed.
    """

    if TYPE_CHECKING:

        @property
        def now_ns(self) -> int:
            """The virtual time in nanoseconds (read-only)."""

    else:
        now_ns = property(operator.attrgetter("_now_ns"), doc="The virtual time in nanoseconds (read-only).")

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.reset()

    def reset(self) -> None:
        """Drop every pending event and restart time at 0 with a fresh generator from the seed."""
        self._now_ns = 0
        self._queue: list[_Entry] = []
        self._next_sequence = itertools.count().__next__
        self.rng = np.random.default_rng(self.seed)
        self.events_run = 0

    @property
    def pending(self) -> int:
        """How many events are scheduled and not cancelled."""
        return sum(not entry[2].cancelled for entry in self._queue)

    def schedule(self, delay_ns: int, fn: Callable[[], None], *, label: str = "") -> EventHandle:
        """Run ``fn`` after ``delay_ns`` nanoseconds of virtual time (0: after the events already due now).

        Raises:
            InvalidArgument: ``delay_ns`` is negative or not an int.
        """
        if type(delay_ns) is not int or delay_ns < 0:  # bool is not an int here
            raise InvalidArgument(f"delay_ns={delay_ns!r}, expected an int >= 0 (virtual time only moves forward)")
        time_ns = self._now_ns + delay_ns
        event = _new_handle(EventHandle)
        event.time_ns = time_ns
        event.fn = fn
        event.label = label
        event.cancelled = False
        _heappush(self._queue, (time_ns, self._next_sequence(), event))
        return event

    def cancel(self, handle: EventHandle) -> None:
        """Cancel a scheduled event; cancelling one that already ran or was cancelled does nothing."""
        handle.cancelled = True

    def step(self, limit_ns: int | None = None) -> bool:
        """Run the next event (if it is due by ``limit_ns``); return whether one ran."""
        queue = self._queue
        while queue:
            time_ns, _, event = queue[0]
            if event.cancelled:
                _heappop(queue)
                continue
            if limit_ns is not None and time_ns > limit_ns:
                return False
            _heappop(queue)
            self._now_ns = time_ns
            self.events_run += 1
            event.fn()
            return True
        return False

    def run_for(self, duration_ns: int) -> None:
        """Run every event due within ``duration_ns`` from now, then set the clock to that instant."""
        if not isinstance(duration_ns, int) or duration_ns < 0:
            raise InvalidArgument(f"duration_ns={duration_ns!r}, expected an int >= 0")
        deadline = self._now_ns + duration_ns
        queue = self._queue
        # step(deadline) until the deadline
        while queue:
            time_ns, _, event = queue[0]
            if event.cancelled:  # dropped at once, as step does: cancelled timeouts must not pile up in the heap
                _heappop(queue)
                continue
            if time_ns > deadline:
                break
            _heappop(queue)
            self._now_ns = time_ns
            self.events_run += 1
            event.fn()
        self._now_ns = deadline

    def run_until_idle(self, max_events: int = MAX_EVENTS_PER_WAIT) -> None:
        """Run events until none is left.

        Raises:
            NoProgress: more than ``max_events`` ran (a model that reschedules itself forever).
        """
        for _ in range(max_events):
            if not self.step():
                return
        raise NoProgress(f"event queue still busy after {max_events} events at {self._now_ns} ns")

    def run_until(self, condition: Callable[[], bool], timeout_ns: int, *, what: str) -> None:
        """Run events in order until ``condition()`` holds.

        Raises:
            VirtualTimeout: the condition still fails once the clock passes ``now + timeout_ns``, or nothing is
                left to run before then (the clock then jumps to the deadline: time the host would have waited).
            NoProgress: events fire at one instant without end.
        """
        if not isinstance(timeout_ns, int) or timeout_ns < 0:
            raise InvalidArgument(f"timeout_ns={timeout_ns!r}, expected an int >= 0")
        deadline = self._now_ns + timeout_ns
        stuck_at, stuck_events = self._now_ns, 0
        while not condition():
            if not self.step(deadline):
                self._now_ns = deadline
                raise VirtualTimeout(what, timeout_ns, self._now_ns)
            if self._now_ns == stuck_at:
                stuck_events += 1
                if stuck_events > MAX_EVENTS_PER_WAIT:
                    raise NoProgress(f"{stuck_events} events ran at {stuck_at} ns without {what} becoming true")
            else:
                stuck_at, stuck_events = self._now_ns, 0
