"""Lifecycle state of a transport or handle; its methods are guarded by :func:`tinyhil._state.requires_open`."""

from __future__ import annotations

from enum import Enum

from tinyhil._state import requires_open

__all__ = ["TransportState", "requires_open"]


class TransportState(Enum):
    """``OPEN`` from construction until ``close()``; ``CLOSED`` after (closing is final)."""

    OPEN = "open"
    CLOSED = "closed"
