"""Pure device models: no pytest, no host I/O, no wall clock. Deterministic by construction."""

from __future__ import annotations

__all__: list[str] = []
