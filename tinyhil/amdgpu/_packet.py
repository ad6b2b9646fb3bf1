"""Helpers shared by the packet builders: dword arrays, address splitting, argument checks."""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum
from typing import Any, Final, TypeVar

import numpy as np
import numpy.typing as npt

from tinyhil._check import as_readonly_bytes, check_int
from tinyhil.errors import InvalidArgument

__all__ = ["Packet", "as_dwords", "check_address", "check_enum", "hi32", "lo32", "packet"]

Packet = npt.NDArray[np.uint32]
_U64_MAX: Final = (1 << 64) - 1
E = TypeVar("E", bound=IntEnum)


def packet(dwords: Iterable[int]) -> Packet:
    """A little-endian uint32 array of ``dwords``."""
    return np.array(list(dwords), dtype="<u4")


def check_address(name: str, va: int, alignment: int = 1) -> int:
    check_int(name, va, min_value=0, max_value=_U64_MAX)
    if va % alignment:
        raise InvalidArgument(f"{name}={va:#x}, expected a multiple of {alignment}")
    return va


def lo32(value: int) -> int:
    return value & 0xFFFF_FFFF


def hi32(value: int) -> int:
    return value >> 32 & 0xFFFF_FFFF


def as_dwords(name: str, data: Any) -> Packet:
    """``data`` (bytes-like of whole dwords, or a sequence of u32 ints) as a uint32 array."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = as_readonly_bytes(name, data)
        if view.nbytes % 4:
            raise InvalidArgument(f"{name} of {view.nbytes} bytes, expected whole dwords")
        return np.frombuffer(bytes(view), "<u4").copy()
    if isinstance(data, np.ndarray):
        if (
            data.dtype.kind not in "ui"
            or data.ndim != 1
            or (data.size and (data.min() < 0 or data.max() > 0xFFFF_FFFF))
        ):
            raise InvalidArgument(f"{name} is a {data.dtype} array of shape {data.shape}, expected 1-D u32 values")
        return data.astype("<u4")
    return packet(check_int(f"{name}[{i}]", v, min_value=0, max_value=0xFFFF_FFFF) for i, v in enumerate(data))


def check_enum(name: str, value: Any, kind: type[E]) -> E:
    """``value`` as a member of ``kind``, or ``InvalidArgument`` listing the members."""
    try:
        return kind(value)
    except ValueError:
        members = ", ".join(f"{m.value} ({m.name})" for m in kind)
        raise InvalidArgument(f"{name}={value!r}, expected one of {members}") from None
