"""Target registries built for one test (``from support.registries import null_opener, registry_of``)."""

from __future__ import annotations

from typing import Any

from tinyhil import TargetRegistry
from tinyhil.device import Device
from tinyhil.null_device import NullDevice
from tinyhil.registry import TargetDef


def null_opener(resolved: Any) -> Device:
    """An opener for a test target: a :class:`NullDevice` named after the resolved target."""
    return NullDevice(resolved.name)


def registry_of(*definitions: TargetDef) -> TargetRegistry:
    """A registry holding ``definitions`` alone (no entry points, no built-in targets)."""
    registry = TargetRegistry(load_entry_points=False)
    for definition in definitions:
        registry.add(definition)
    return registry
