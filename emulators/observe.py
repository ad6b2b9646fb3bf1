"""Observer hooks on the device models: what the host armed, what landed where, what the GPU polled.

A test or a trace recorder subclasses :class:`Observer` (every event is a no-op there) and attaches it to a model
(the bridge ``Asm2464``, the GPU ``AmdGpu``), which calls it at the moments below, in virtual-time order. With
nothing attached a model pays one ``is None`` test per event.
Observers watch: they must not change the model they observe.

| event | model | when |
|---|---|---|
| ``sram_armed(direction, slot_start, arm, replaced)`` | bridge | 0xF2 arm accepted; ``replaced``: the unconsumed one |
| ``arm_claimed(arm)`` | bridge | a bulk transfer starts moving on ``arm`` (an 0xF2 arm or an 0xF0 stream) |
| ``arm_given_back(arm, moved)`` | bridge | that transfer ended on the wire after ``moved`` of its bytes |
| ``arm_finished(arm)`` | bridge | an SRAM transfer no longer in flight: landed (or lost by a fault), or its IN done |
| ``dma_write(pcie_addr, nbytes)`` | bridge | the GPU's DMA wrote ``nbytes`` at ``pcie_addr`` (quirks applied) |
| ``gpu_polled(address, value, matched)`` | GPU | an SDMA POLL_REGMEM read ``value`` (masked) at GPU ``address`` |
| ``gpu_register(address, value, write)`` | GPU (gfx1100 front end) | a register read or write at dword ``address`` |

Attach with ``bridge.observe(observer)`` / ``gpu.observe(observer)``: the returned :class:`Observation` detaches on
``detach()`` or at the end of a ``with`` block. Several observers may watch one model; each sees every event, in the
order they were attached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinyhil.errors import InvalidArgument, StateError

if TYPE_CHECKING:
    from types import TracebackType

    from tinyhil.emulators.asm2464.sram import Arm, Direction

__all__ = ["Observation", "Observed", "Observer"]


class Observer:
    """The events a model reports (see the module docstring); subclass and override the ones you need."""

    def sram_armed(self, direction: Direction, slot_start: int, arm: Arm, replaced: Arm | None) -> None:
        """An 0xF2 arm was accepted (``replaced``: the unconsumed arm of that direction it replaced, if any)."""

    def arm_claimed(self, arm: Arm) -> None:
        """A bulk transfer started moving on ``arm``."""

    def arm_given_back(self, arm: Arm, moved: int) -> None:
        """The bulk transfer on ``arm`` ended after ``moved`` bytes (``arm.remaining`` says what is left)."""

    def arm_finished(self, arm: Arm) -> None:
        """The SRAM transfer on ``arm`` is no longer in flight (landed or lost; for IN, completed)."""

    def dma_write(self, pcie_addr: int, nbytes: int) -> None:
        """The GPU wrote ``nbytes`` into the bridge at ``pcie_addr``."""

    def gpu_polled(self, address: int, value: int, matched: bool) -> None:
        """An SDMA memory poll read ``value`` (masked) at ``address``; ``matched``: its condition held."""

    def gpu_register(self, address: int, value: int, write: bool) -> None:
        """The host read (``write`` False: ``value`` is what it got) or wrote the register at dword ``address``."""


class _Fanout(Observer):
    """Several observers as one, called in attach order."""

    def __init__(self, observers: tuple[Observer, ...]) -> None:
        self.observers = observers

    def sram_armed(self, direction: Direction, slot_start: int, arm: Arm, replaced: Arm | None) -> None:
        for observer in self.observers:
            observer.sram_armed(direction, slot_start, arm, replaced)

    def arm_claimed(self, arm: Arm) -> None:
        for observer in self.observers:
            observer.arm_claimed(arm)

    def arm_given_back(self, arm: Arm, moved: int) -> None:
        for observer in self.observers:
            observer.arm_given_back(arm, moved)

    def arm_finished(self, arm: Arm) -> None:
        for observer in self.observers:
            observer.arm_finished(arm)

    def dma_write(self, pcie_addr: int, nbytes: int) -> None:
        for observer in self.observers:
            observer.dma_write(pcie_addr, nbytes)

    def gpu_polled(self, address: int, value: int, matched: bool) -> None:
        for observer in self.observers:
            observer.gpu_polled(address, value, matched)

    def gpu_register(self, address: int, value: int, write: bool) -> None:
        for observer in self.observers:
            observer.gpu_register(address, value, write)


class Observed:
    """The observers attached to one model; its blocks read ``observer`` (``None`` when nobody watches) per event."""

    def __init__(self) -> None:
        self.observer: Observer | None = None
        self.observers: tuple[Observer, ...] = ()

    def attach(self, observer: Observer) -> Observation:
        """Start calling ``observer``; the returned handle detaches it."""
        if not isinstance(observer, Observer):
            raise InvalidArgument(
                f"observer={observer!r}, expected an Observer (subclass tinyhil.emulators.observe.Observer)"
            )
        if any(attached is observer for attached in self.observers):
            raise StateError(f"observer {observer!r} is already attached; detach it first")
        self._set((*self.observers, observer))
        return Observation(self, observer)

    def detach(self, observer: Observer) -> None:
        """Stop calling ``observer`` (a no-op when it is not attached)."""
        self._set(tuple(o for o in self.observers if o is not observer))

    def _set(self, observers: tuple[Observer, ...]) -> None:
        self.observers = observers
        self.observer = None if not observers else observers[0] if len(observers) == 1 else _Fanout(observers)


class Observation:
    """One attached observer: ``detach()`` (or leaving the ``with`` block) stops its events."""

    def __init__(self, observed: Observed, observer: Observer) -> None:
        self._observed = observed
        self.observer = observer

    def detach(self) -> None:
        self._observed.detach(self.observer)

    def __enter__(self) -> Observation:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.detach()
