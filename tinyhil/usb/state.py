"""Lifecycle state of a transport and the decorator that guards operations needing it open."""

from __future__ import annotations

import functools
from collections.abc import Callable
from enum import Enum
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from tinyhil.errors import StateError

__all__ = ["TransportState", "requires_open"]


class TransportState(Enum):
    """``OPEN`` from construction until ``close()``; ``CLOSED`` after (closing is final)."""

    OPEN = "open"
    CLOSED = "closed"


class _Stateful(Protocol):
    @property
    def state(self) -> TransportState: ...


S = TypeVar("S", bound=_Stateful)
P = ParamSpec("P")
R = TypeVar("R")


def requires_open(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Guard ``method`` so it raises :class:`~tinyhil.errors.StateError` unless ``self.state`` is ``OPEN``.

    The error names the object, the method and the state it was in, e.g.
    ``Usb3Transport.bulk_write() needs the transport open, but it is closed``.
    """
    if not callable(method) or isinstance(method, (staticmethod, classmethod, property)):
        raise TypeError(f"@requires_open decorates plain methods, not {type(method).__name__}")

    @functools.wraps(method)
    def guarded(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        state = self.state
        if state is not TransportState.OPEN:
            raise StateError(
                f"{type(self).__name__}.{method.__name__}() needs the transport open, but it is {state.value}"
            )
        return method(self, *args, **kwargs)

    return guarded
