"""tinyhil: a hardware-in-the-loop test and emulation harness for accelerator and USB-bridge driver stacks.

Open a target by its target string and drive it through the device runtime seam::

    with tinyhil.open_target("NULL") as dev:
        buf = dev.alloc(4096)
        dev.copyin(buf, b"hello")

Subpackages: ``tinyhil.emulators`` (pure device models), ``tinyhil.mocks`` (drop-in seam implementations over the
emulators), ``tinyhil.device_farm`` (inventory, scheduling, the ``tinyhil`` command), ``tinyhil.fixtures`` (the pytest
plugin and the portable HIL suite).
"""

from __future__ import annotations

from tinyhil.device import Buffer, Device, DeviceBase, Program
from tinyhil.errors import (
    CapabilityMissing,
    CompileError,
    DeviceError,
    DeviceTimeout,
    InvalidArgument,
    StateError,
    TargetUnavailable,
    TinyHilError,
)
from tinyhil.registry import Target, TargetDef, TargetRegistry, default_registry, open_target, target
from tinyhil.target import GRAMMAR, TargetString, parse_target

__version__ = "0.1.0"

__all__ = [
    "GRAMMAR",
    "Buffer",
    "CapabilityMissing",
    "CompileError",
    "Device",
    "DeviceBase",
    "DeviceError",
    "DeviceTimeout",
    "InvalidArgument",
    "Program",
    "StateError",
    "Target",
    "TargetDef",
    "TargetRegistry",
    "TargetString",
    "TargetUnavailable",
    "TinyHilError",
    "__version__",
    "default_registry",
    "open_target",
    "parse_target",
    "target",
]
