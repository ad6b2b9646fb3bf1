"""A queue: the public face of one ring and its engine, and how the engine is scheduled on the event kernel.

Lifecycle: a doorbell (:meth:`Queue.kick`) schedules a step as soon as the engine is free; each step runs one
packet (or one run of NOPs) and schedules the next after its cost. A step that makes no progress schedules
nothing: an idle or stalled queue waits for the next doorbell; a queue blocked on a poll waits for a write to the
polled memory (:meth:`Queue.wake`, re-checked at the poll's next interval instant) or for its retry deadline, when
it hangs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tinyhil.spec.amdgpu import QueueKind

from .engine import QueueConfig, RingEngine
from .errors import GpuQueueError
from .model_choices import ErrorCode, QueueStatus

if TYPE_CHECKING:
    from tinyhil.emulators.kernel import EventHandle, EventKernel

__all__ = ["Queue"]

# Typed so that mypy keeps ``_step_event`` as ``EventHandle | None`` after a step clears it (the engine's memory
# writes and interrupts can schedule the queue again before the step ends).
_NO_EVENT: Final[EventHandle | None] = None


class Queue:
    """One SDMA or compute queue: configuration, pointers, status, and the engine that drains it.

    ``rptr`` and ``wptr`` count bytes (SDMA) or dwords (compute); ``status`` is the BAR5 STATUS word;
    :meth:`check` raises the error that stopped the queue. ``waiters`` is the GPU's registry, shared by its queues,
    of the queues waiting on a poll (by id): a queue enters it while its engine waits, so a memory write need only
    offer a wake-up to those.
    """

    def __init__(
        self,
        queue_id: int,
        config: QueueConfig,
        engine: RingEngine,
        kernel: EventKernel,
        waiters: dict[int, Queue] | None = None,
    ) -> None:
        self.id = queue_id
        self.config = config
        self.engine = engine
        self.kernel = kernel
        self.destroyed = False
        self._waiters: dict[int, Queue] = {} if waiters is None else waiters
        self._busy_until_ns = 0
        self._step_event: EventHandle | None = None
        self._deadline_event: EventHandle | None = None
        self._armed_wait: object | None = None
        self._step_label = f"{engine.name} step"
        self._deadline_label = f"{engine.name} poll deadline"
        self._step_fn = self._step

    def __repr__(self) -> str:
        return f"<Queue {self.describe()}>"

    # --- what the host sees ---
    @property
    def kind(self) -> QueueKind:
        return self.config.kind

    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def doorbell_index(self) -> int:
        return self.config.doorbell_index

    @property
    def rptr(self) -> int:
        return self.engine.rptr

    @property
    def wptr(self) -> int:
        """The write pointer as the engine last read it from memory."""
        return self.engine.wptr

    @property
    def status(self) -> QueueStatus:
        return self.engine.status

    @property
    def idle(self) -> bool:
        return self.engine.idle

    @property
    def stopped(self) -> bool:
        return self.engine.stopped

    @property
    def waiting(self) -> bool:
        """Blocked on an unsatisfied POLL_REGMEM / WAIT_REG_MEM."""
        return self.engine.wait is not None

    @property
    def error_code(self) -> ErrorCode:
        return self.engine.error_code

    @property
    def error_rptr(self) -> int:
        return self.engine.error_rptr

    @property
    def error_opcode(self) -> int:
        return self.engine.error_opcode

    @property
    def fault_va(self) -> int | None:
        return self.engine.fault_va

    @property
    def error_message(self) -> str:
        return self.engine.error_message

    def describe(self) -> str:
        """What the queue is doing, or why it stopped (one line)."""
        return self.engine.describe()

    def check(self) -> None:
        """Raise the error that stopped this queue, if any.

        Raises:
            GpuQueueError: the queue stopped (its message names the queue, the opcode and the ring offset, or
                "queue hung", or the faulting address).
        """
        engine = self.engine
        if engine.stopped:
            raise GpuQueueError(
                engine.error_message,
                queue_id=self.id,
                status=int(engine.status),
                error_code=int(engine.error_code),
                error_rptr=engine.error_rptr,
                fault_va=engine.fault_va,
            )

    # --- scheduling (called by the GPU) ---
    def kick(self) -> None:
        """A doorbell: run the engine as soon as it is free (a queue blocked on a poll keeps waiting)."""
        if self.destroyed or self.engine.stopped or self.engine.wait is not None:
            return
        self._schedule(self._busy_until_ns)

    def wake(self, va: int, nbytes: int) -> None:
        """Memory ``[va, va + nbytes)`` was written: re-check a poll watching it at its next interval instant."""
        wait = self.engine.wait
        if self.destroyed or wait is None or not (wait.va < va + nbytes and va < wait.va + wait.nbytes):
            return
        now = self.kernel.now_ns
        self._schedule(max(wait.next_check_ns(now), self._busy_until_ns), now)

    def cancel(self) -> None:
        """Stop scheduling this queue (it is being destroyed)."""
        self.destroyed = True
        self._waiters.pop(self.id, None)
        for event in (self._step_event, self._deadline_event):
            if event is not None:
                self.kernel.cancel(event)
        self._step_event = self._deadline_event = None

    def _schedule(self, at_ns: int, now: int | None = None) -> None:
        """Run a step at ``at_ns`` (or now, if that has passed) unless one is due by then; ``now``: the clock."""
        if now is None:
            now = self.kernel.now_ns
        at_ns = max(at_ns, now)
        if self._step_event is not None:
            if self._step_event.time_ns <= at_ns:
                return
            self.kernel.cancel(self._step_event)
        self._step_event = self.kernel.schedule(at_ns - now, self._step_fn, label=self._step_label)

    def _step(self) -> None:
        self._step_event = _NO_EVENT
        if self.destroyed:
            return
        engine = self.engine
        if engine.execute():
            cost_ns = engine.cost_ns
            self._busy_until_ns = self.kernel.now_ns + cost_ns
            if self._step_event is None:  # the usual case: nothing rescheduled this queue while it ran
                self._step_event = self.kernel.schedule(cost_ns, self._step_fn, label=self._step_label)
            else:
                self._schedule(self._busy_until_ns)
        wait = engine.wait
        if wait is self._armed_wait:
            return
        if self._deadline_event is not None:
            self.kernel.cancel(self._deadline_event)
            self._deadline_event = None
        self._armed_wait = wait
        if wait is None:
            self._waiters.pop(self.id, None)
            return
        self._waiters[self.id] = self
        if wait.deadline_ns is not None:
            self._deadline_event = self.kernel.schedule(
                wait.deadline_ns - self.kernel.now_ns, self._deadline, label=self._deadline_label
            )

    def _deadline(self) -> None:
        self._deadline_event = None
        self._schedule(self.kernel.now_ns)
