"""One register write of the gfx1100 bring-up, as a value: by mask (:class:`RegUpdate`) or by field name
(:class:`FieldUpdate`). The tables of writes live with their blocks (``gfx1100_gmc``, ``gfx1100_ih``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

__all__ = [
    "U32_MASK",
    "FieldUpdate",
    "RegUpdate",
]

U32_MASK: Final = 0xFFFF_FFFF


@dataclass(frozen=True, slots=True)
class RegUpdate:
    """One register write of the bring-up: ``value`` into the bits of ``mask``, the other bits read back and kept
    (AM's ``update``); a full mask writes ``value`` outright. ``register`` is a :class:`Reg` name, with ``{hub}``
    (``GC`` / ``MM``) or ``{sdma}`` (``0`` / ``1``) to fill in."""

    register: str
    value: int
    mask: int = U32_MASK


@dataclass(frozen=True, slots=True)
class FieldUpdate:
    """One register write of the bring-up by field name (``tinyhil.spec.gfx1100_fields`` has the layouts): the
    fields of ``values`` set, the others read back and kept (AM's ``update``), or with ``whole`` the others 0 (AM's
    ``write``). ``register`` is a :class:`Reg` name, as in :class:`RegUpdate`."""

    register: str
    values: Mapping[str, int]
    whole: bool = False

    @classmethod
    def of(cls, register: str, *, whole: bool = False, **values: int) -> FieldUpdate:
        return cls(register, MappingProxyType(values), whole)
