"""ctypes structures declared by annotations: ``field: u32`` becomes ``("field", ctypes.c_uint32)`` in ``_fields_``."""

from __future__ import annotations

import ctypes
from typing import Annotated, TypeVar, get_args, get_origin, get_type_hints

__all__ = ["layout", "s32", "u32", "u64"]

u32 = Annotated[int, ctypes.c_uint32]
u64 = Annotated[int, ctypes.c_uint64]
s32 = Annotated[int, ctypes.c_int32]
_C = TypeVar("_C", bound=type[ctypes.Structure] | type[ctypes.Union])


def layout(cls: _C) -> _C:
    """Set ``cls._fields_`` from its annotations, in declaration order (``Annotated[int, ctype]`` or a ctypes type)."""
    fields = []
    for name, hint in get_type_hints(cls, include_extras=True).items():
        ctype = get_args(hint)[1] if get_origin(hint) is Annotated else hint
        fields.append((name, ctype))
    cls._fields_ = fields
    return cls
