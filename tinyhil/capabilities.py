"""The one table of capability names: what a target with each capability can do, and the check for unknown names.

A target declares capabilities (``@target(..., capabilities=[...])``); a test asks for them
(``@pytest.mark.hil(requires=[...])``) and is skipped on a target that lacks one. :data:`CAPABILITIES` names and
describes every capability tinyhil's own targets declare; ``docs/targets.md`` is generated from it and the
registry. A user package may register targets with capabilities of its own: :func:`known_capabilities` is this
table's names together with every capability a registered target declares, and :func:`check_capabilities` turns
a misspelt name into an error that suggests the closest known one instead of a test that silently skips
everywhere.

This module imports no registry (a registry is passed in), so any layer may use it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final, Protocol

from tinyhil.errors import InvalidArgument

__all__ = ["CAPABILITIES", "REAL_HARDWARE", "check_capabilities", "known_capabilities"]

REAL_HARDWARE: Final = "real-hardware"  # the capability no emulator has, even one served to a real interface

# name -> what a target with the capability can do, one line for users (sorted by name).
CAPABILITIES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "compile": "compile program source with the target's compiler (Device.compile returns a Program)",
        "compile-only": "runs nothing, but its compiler is real: the target exists to compile (a NULL device)",
        "compute": "a PM4 compute queue: kernels are dispatched with DISPATCH_DIRECT packets",
        "copy": "copy between two device buffers (Device.copy)",
        "copyin": "copy host bytes into device memory (Device.copyin)",
        "copyout": "copy device memory back to the host (Device.copyout / copyout_into)",
        "exec": "run a compiled program over a grid of workgroups (Device.exec)",
        "fault-recovery": "a reported compute-queue fault leaves the device usable: the runtime replaces the queue",
        "fill": "fill device memory with a byte value (Device.fill)",
        "kfd": "driven through the Linux amdkfd uapi: /dev/kfd ioctls, mmaps and the sysfs topology",
        "memory-faults": "a GPU access to unmapped memory fails the next wait with an error naming the address",
        "multi-gpu": "the machine has several GPUs; device.open_peer(i) opens another one in the same process",
        "null": "the NULL device: allocations are bookkeeping, nothing runs and no data is kept",
        "pcie": "a PCIe tree behind the bridge: bring-up, BAR sizing, configuration and memory TLPs (0xF0)",
        "qemu-compiler": "its compiler is a foreign-architecture program run under qemu-user (or docker)",
        "real-hardware": "needs attached hardware (a board or /dev/kfd); never emulated",
        "sdma": "an SDMA engine does copies and fills (packets on an SDMA ring)",
        "signals": "work on different engines is ordered by GPU signals, with no synchronize in between",
        "sram-windows": "the bridge's 512 KB SRAM, reached through 0xF2-armed bulk transfers into slots and windows",
        "timestamps": "Device.timestamp() and timed profile events (virtual time on emulated targets)",
        "usb3": "an ASM2464-class USB3 bridge: vendor control requests and bulk transfers",
    }
)


class _Definition(Protocol):
    """What :func:`known_capabilities` reads of a registered target (a :class:`~tinyhil.registry.TargetDef`)."""

    @property
    def capabilities(self) -> Iterable[str]: ...


class _Registry(Protocol):
    """What :func:`known_capabilities` reads of a registry (a :class:`~tinyhil.registry.TargetRegistry`)."""

    def definitions(self) -> Iterable[_Definition]: ...


def known_capabilities(registry: _Registry) -> frozenset[str]:
    """Every capability name in :data:`CAPABILITIES` and every one a target registered in ``registry`` declares.

    Raises:
        InvalidArgument: ``registry`` has no ``definitions()`` method.
    """
    definitions = getattr(registry, "definitions", None)
    if not callable(definitions):
        raise InvalidArgument(
            f"registry={registry!r}, expected a TargetRegistry (an object with a definitions() method)"
        )
    names = set(CAPABILITIES)
    for definition in definitions():
        names.update(definition.capabilities)
    return frozenset(names)


def check_capabilities(names: Iterable[str], known: Iterable[str], *, where: str) -> None:
    """Check that every name in ``names`` is one of ``known``.

    ``where`` starts the message and says who asked (``"hil marker requires"`` gives ``hil marker requires
    unknown capability 'copyot' (did you mean 'copyout'?); known capabilities: compile, copy, ...``).

    Raises:
        InvalidArgument: a name is unknown (each one is named, with the closest known name where one is close,
            and the known names are listed, sorted), or a name is not a string.
    """
    known_set = frozenset(known)
    known_names = sorted(known_set)
    unknown: list[str] = []
    for name in names:
        if not isinstance(name, str):
            raise InvalidArgument(f"{where} capability {name!r}, expected a capability name (a string)")
        if name not in known_set and name not in unknown:
            unknown.append(name)
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, known_names, n=1)
        hints.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
    noun = "capability" if len(unknown) == 1 else "capabilities"
    listed = ", ".join(known_names) or "none"
    raise InvalidArgument(f"{where} unknown {noun} {', '.join(hints)}; known capabilities: {listed}")
