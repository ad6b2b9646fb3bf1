"""Shared validators for arguments at tinyhil's public boundaries.

Each ``check_*`` raises :class:`~tinyhil.errors.InvalidArgument` with the ``name=value!r, expected X`` template.
"""

from __future__ import annotations

from typing import Any

from tinyhil.errors import InvalidArgument

__all__ = ["as_readonly_bytes", "as_writable_bytes", "check_int", "check_range"]


def check_int(name: str, value: Any, *, min_value: int | None = None, max_value: int | None = None) -> int:
    """Return ``value`` if it is an ``int`` (not a ``bool``) within ``[min_value, max_value]``."""
    if type(value) is not int and (not isinstance(value, int) or isinstance(value, bool)):  # hot: a plain int
        raise InvalidArgument(f"{name}={value!r}, expected an int")
    if min_value is not None and value < min_value:
        raise InvalidArgument(f"{name}={value!r}, expected an int >= {min_value}")
    if max_value is not None and value > max_value:
        raise InvalidArgument(f"{name}={value!r}, expected an int <= {max_value}")
    return value


def check_range(what: str, offset: int, nbytes: int, limit: int) -> None:
    """Check that ``[offset, offset + nbytes)`` lies within ``[0, limit)``."""
    if type(offset) is int and type(nbytes) is int and offset >= 0 and nbytes >= 0 and offset + nbytes <= limit:
        return  # hot: plain ints in range (every emulated register and XDATA access) skip the checks below
    check_int(f"{what} offset", offset, min_value=0)
    check_int(f"{what} nbytes", nbytes, min_value=0)
    if offset + nbytes > limit:
        raise InvalidArgument(
            f"{what} range {offset:#x}+{nbytes:#x} ends at {offset + nbytes:#x}, past the end {limit:#x}"
        )


def as_readonly_bytes(name: str, data: Any) -> memoryview:
    """View any bytes-like object (bytes, bytearray, memoryview, numpy array) as flat unsigned bytes."""
    try:
        view = memoryview(data)
    except TypeError:
        raise InvalidArgument(f"{name}={type(data).__name__} object, expected a bytes-like object") from None
    if not view.c_contiguous:
        raise InvalidArgument(f"{name} is a non-contiguous buffer, expected a C-contiguous bytes-like object")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def as_writable_bytes(name: str, data: Any) -> memoryview:
    """View a writable bytes-like object (bytearray, writable memoryview, numpy array) as flat unsigned bytes."""
    try:
        view = memoryview(data)
    except TypeError:
        raise InvalidArgument(f"{name}={type(data).__name__} object, expected a writable bytes-like buffer") from None
    if view.readonly:
        raise InvalidArgument(f"{name} is read-only, expected a writable bytes-like buffer (bytearray, numpy array)")
    if not view.c_contiguous:
        raise InvalidArgument(f"{name} is a non-contiguous buffer, expected a C-contiguous writable buffer")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view
