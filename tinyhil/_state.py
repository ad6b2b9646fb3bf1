"""The one open-state guard: a method of an object that can be closed refuses to run once it is.

Devices (:class:`~tinyhil.device.DeviceBase`), the KFD client, the USB transport and the emulated ``usb1`` handle
have ``closed`` (``False`` until ``close()``; closing is final) and guard their methods with :func:`requires_open`.
The error names the object and the method: ``Usb3Transport.bulk_write() called, but it is closed``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from tinyhil.errors import StateError

__all__ = ["Closable", "closed_error", "requires_open"]


class Closable(Protocol):
    """What :func:`requires_open` reads on every call: ``closed`` (a plain attribute on the hot USB objects)."""

    @property
    def closed(self) -> bool: ...


S = TypeVar("S", bound=Closable)
P = ParamSpec("P")
R = TypeVar("R")


def closed_error(obj: object, method: str) -> StateError:
    """The error for ``obj.method()`` on a closed ``obj``; a ``name`` the object has is shown beside its class."""
    name = getattr(obj, "name", None)
    who = f"{type(obj).__name__}({name})" if isinstance(name, str) else type(obj).__name__
    return StateError(f"{who}.{method}() called, but it is closed")


def requires_open(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Guard ``method`` so it raises :class:`~tinyhil.errors.StateError` once ``self.closed`` is true."""
    if not callable(method) or isinstance(method, (staticmethod, classmethod, property)):
        raise TypeError(f"@requires_open decorates plain methods, not {type(method).__name__}")

    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> R:
        try:
            closed = args[0].closed
        except IndexError:  # as the plain method would, when self is not given positionally
            raise TypeError(f"{method.__qualname__}() missing 1 required positional argument: 'self'") from None
        if closed:
            raise closed_error(args[0], method.__name__)
        return method(*args, **kwargs)

    return guarded
