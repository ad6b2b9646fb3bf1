"""Lifecycle state of a transport or handle and the one decorator that guards the operations needing it open."""

from __future__ import annotations

import functools
from collections.abc import Callable
from enum import Enum
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from tinyhil.errors import StateError

__all__ = ["TransportState", "not_open", "requires_open"]


class TransportState(Enum):
    """``OPEN`` from construction until ``close()``; ``CLOSED`` after (closing is final)."""

    OPEN = "open"
    CLOSED = "closed"


def not_open(obj: object, method: str, state: TransportState) -> StateError:
    """The error :func:`requires_open` raises for ``obj.method()`` in ``state``."""
    return StateError(f"{type(obj).__name__}.{method}() needs it open, but it is {state.value}")


class _Stateful(Protocol):
    _state: TransportState


S = TypeVar("S", bound=_Stateful)
P = ParamSpec("P")
R = TypeVar("R")


def requires_open(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Guard ``method`` so it raises :class:`~tinyhil.errors.StateError` unless ``self._state`` is ``OPEN``.

    The one open-state guard of the USB stack (:class:`~tinyhil.usb.transport.Usb3Transport` and the emulated
    ``usb1`` handle). The error names the class, the method and the state, e.g.
    ``Usb3Transport.bulk_write() needs it open, but it is closed``.
    """
    if not callable(method) or isinstance(method, (staticmethod, classmethod, property)):
        raise TypeError(f"@requires_open decorates plain methods, not {type(method).__name__}")

    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> R:
        try:
            state = args[0]._state
        except IndexError:  # as the plain method would, when self is not given positionally
            raise TypeError(f"{method.__qualname__}() missing 1 required positional argument: 'self'") from None
        if state is not TransportState.OPEN:
            raise not_open(args[0], method.__name__, state)
        return method(*args, **kwargs)

    return guarded
