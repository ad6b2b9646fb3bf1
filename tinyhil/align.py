"""Rounding a size or an address to a unit (a page, a sector, an alignment): the one place the rule is written.

The helpers take any ``unit > 0`` (a power of two or not) and floor towards minus infinity, so for a power of two
they equal the usual ``(value + unit - 1) & ~(unit - 1)`` and ``value & ~(unit - 1)``.
"""

from __future__ import annotations

__all__ = ["ceil_div", "round_down", "round_up"]


def ceil_div(value: int, unit: int) -> int:
    """Return how many ``unit``-sized pieces cover ``value``: ``value / unit`` rounded up (``unit > 0``)."""
    return -(-value // unit)


def round_up(value: int, unit: int) -> int:
    """Return the smallest multiple of ``unit`` that is ``>= value`` (``unit > 0``)."""
    return ceil_div(value, unit) * unit


def round_down(value: int, unit: int) -> int:
    """Return the largest multiple of ``unit`` that is ``<= value`` (``unit > 0``)."""
    return value - value % unit
