"""Drop-in seam implementations over the emulators; their targets register through ``tinyhil.mocks.targets``."""

from __future__ import annotations

__all__: list[str] = []
