"""Hardware and protocol facts as code: the spec's names and numbers, shared by drivers and device models.

Modules here hold constants, enums and pure layout helpers only; they import nothing from tinyhil but
``tinyhil.errors``, so both the reference drivers (core) and the emulators may import them without breaking the
layering (a driver header and the device's register map are the same facts, written once).
"""

from __future__ import annotations

__all__: list[str] = []
