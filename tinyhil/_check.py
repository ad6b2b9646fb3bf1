"""Shared validators for arguments at tinyhil's public boundaries.

Each ``check_*`` raises :class:`~tinyhil.errors.InvalidArgument` with the ``name=value!r, expected X`` template.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import RING_MAX_BYTES, RING_MIN_BYTES

__all__ = [
    "GRID_MAX_DIM",
    "GRID_MAX_SIZE",
    "HOST_NATIVE_MAX_WORKGROUPS",
    "WORKGROUP_MAX_DIM",
    "WORKGROUP_MAX_SIZE",
    "as_readonly_bytes",
    "as_writable_bytes",
    "check_int",
    "check_launch",
    "check_range",
    "check_ring_bytes",
]

# Kernel-launch limits, as an AMD GPU reports them (ROCr's HSA agent info, printed by rocminfo for every GC 9-12 GPU).
# ``grid`` counts workgroups and ``local`` threads per workgroup; HSA's grid counts work-items (grid x local).
WORKGROUP_MAX_SIZE: Final = 1024  # HSA_AGENT_INFO_WORKGROUP_MAX_SIZE: threads in one workgroup (x * y * z)
WORKGROUP_MAX_DIM: Final = 1024  # HSA_AGENT_INFO_WORKGROUP_MAX_DIM: threads along each workgroup dimension
GRID_MAX_DIM: Final = 0xFFFF_FFFF  # HSA_AGENT_INFO_GRID_MAX_DIM: work-items along each grid dimension
GRID_MAX_SIZE: Final = 0xFFFF_FFFF  # HSA_AGENT_INFO_GRID_MAX_SIZE: work-items in the whole grid
# The emulated GPUs' host-native executor calls the kernel once per workgroup on the host (about a microsecond of
# host time each, before the kernel's own work): it runs at most this many workgroups per dispatch, so no launch
# keeps the host busy for more than seconds. A model limit, not a hardware one (hardware: GRID_MAX_SIZE work-items).
HOST_NATIVE_MAX_WORKGROUPS: Final = 1 << 22
_DIMS: Final = 3


def check_int(name: str, value: Any, *, min_value: int | None = None, max_value: int | None = None) -> int:
    """Return ``value`` if it is an ``int`` (an ``IntEnum`` member too, not a ``bool``) within
    ``[min_value, max_value]``."""
    if type(value) is int and (min_value is None or value >= min_value) and (max_value is None or value <= max_value):
        return value
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r}, expected an int")
    if min_value is not None and value < min_value:
        raise InvalidArgument(f"{name}={value!r}, expected an int >= {min_value}")
    if max_value is not None and value > max_value:
        raise InvalidArgument(f"{name}={value!r}, expected an int <= {max_value}")
    return value


def check_range(what: str, offset: int, nbytes: int, limit: int) -> None:
    """Check that ``[offset, offset + nbytes)`` lies within ``[0, limit)``."""
    if type(offset) is int and type(nbytes) is int and offset >= 0 and nbytes >= 0 and offset + nbytes <= limit:
        return
    check_int(f"{what} offset", offset, min_value=0)
    check_int(f"{what} nbytes", nbytes, min_value=0)
    if offset + nbytes > limit:
        raise InvalidArgument(
            f"{what} range {offset:#x}+{nbytes:#x} ends at {offset + nbytes:#x}, past the end {limit:#x}"
        )


def check_ring_bytes(
    name: str, value: Any, *, min_bytes: int = RING_MIN_BYTES, max_bytes: int | None = RING_MAX_BYTES
) -> int:
    """Return ``value`` if it is a ring size: a power of two from ``min_bytes`` to ``max_bytes`` (no cap: None).

    The defaults are the emulated GPU's ring rule (the model's range). A KFD client passes ``min_bytes=
    KFD_MIN_QUEUE_RING_SIZE``: the kernel takes any power of two but clamps a smaller one up to that size, so the
    queue would run past a smaller ring the client allocated.
    """
    check_int(name, value, min_value=min_bytes, max_value=max_bytes)
    if value & (value - 1):
        raise InvalidArgument(f"{name}={value:#x}, expected a power of two")
    return int(value)


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
    except (TypeError, ValueError):  # not a buffer, or a released memoryview
        raise InvalidArgument(
            f"{name}={type(data).__name__} object, expected a writable bytes-like object (bytearray, numpy array)"
        ) from None
    if view.readonly:
        raise InvalidArgument(
            f"{name} is a read-only {type(data).__name__} buffer, expected a writable bytes-like object "
            "(bytearray, numpy array)"
        )
    if not view.c_contiguous:
        raise InvalidArgument(f"{name} is a non-contiguous buffer, expected a C-contiguous writable buffer")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _check_dims(name: str, value: Any, max_each: int, limit: str) -> tuple[int, int, int]:
    """``value`` (an int, or a tuple or list of 1 to 3 ints, each in ``1..max_each``: the constant ``limit``) as
    three dimensions."""
    expected = "expected an int or a tuple of 1 to 3 ints"
    items: Sequence[Any]
    if isinstance(value, int) and not isinstance(value, bool):
        items = (value,)
    elif isinstance(value, tuple | list):
        if not 1 <= len(value) <= _DIMS:
            raise InvalidArgument(f"{name} is a {type(value).__name__} of {len(value)} items, {expected}")
        items = value
    else:
        raise InvalidArgument(f"{name}={_short_repr(value)}, {expected}")
    for item in items:
        check_int(name, item, min_value=1)
        if item > max_each:
            raise InvalidArgument(f"{name}={value!r}, expected each dimension <= {max_each:#x} ({limit})")
    x, y, z = (*items, 1, 1)[:_DIMS]
    return (x, y, z)


def check_launch(
    grid: Any, local: Any, *, max_workgroups: int = HOST_NATIVE_MAX_WORKGROUPS
) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Return ``(grid, local)`` as three dimensions each: ``grid`` workgroups of ``local`` threads.

    Each is an int or a tuple (or list) of 1 to 3 positive ints. The launch must fit an AMD GPU's limits
    (:data:`WORKGROUP_MAX_SIZE` threads per workgroup, :data:`WORKGROUP_MAX_DIM` along each of its dimensions,
    :data:`GRID_MAX_DIM` work-items along each grid dimension, :data:`GRID_MAX_SIZE` in all) and have at most
    ``max_workgroups`` workgroups.

    Raises:
        InvalidArgument: naming the value and the limit it breaks.
    """
    check_int("max_workgroups", max_workgroups, min_value=1)
    grid3 = _check_dims("grid", grid, GRID_MAX_DIM, "GRID_MAX_DIM")
    local3 = _check_dims("local", local, WORKGROUP_MAX_DIM, "WORKGROUP_MAX_DIM")
    threads = local3[0] * local3[1] * local3[2]
    if threads > WORKGROUP_MAX_SIZE:
        raise InvalidArgument(
            f"local={local!r} is {threads} threads per workgroup, expected at most {WORKGROUP_MAX_SIZE} "
            f"(WORKGROUP_MAX_SIZE)"
        )
    for axis, groups, size in zip("xyz", grid3, local3, strict=True):
        if groups * size > GRID_MAX_DIM:
            raise InvalidArgument(
                f"grid={grid!r} x local={local!r} is {groups * size:#x} work-items along {axis}, expected at most "
                f"{GRID_MAX_DIM:#x} (GRID_MAX_DIM)"
            )
    workgroups = grid3[0] * grid3[1] * grid3[2]
    if workgroups * threads > GRID_MAX_SIZE:
        raise InvalidArgument(
            f"grid={grid!r} x local={local!r} is {workgroups * threads:#x} work-items, expected at most "
            f"{GRID_MAX_SIZE:#x} (GRID_MAX_SIZE)"
        )
    if workgroups > max_workgroups:
        limit = "HOST_NATIVE_MAX_WORKGROUPS: the host-native executor runs each workgroup as a host call"
        raise InvalidArgument(
            f"grid={grid!r} is {workgroups:#x} workgroups, expected at most {max_workgroups:#x} per launch "
            f"({limit if max_workgroups == HOST_NATIVE_MAX_WORKGROUPS else 'this target'}); split the launch"
        )
    return grid3, local3
