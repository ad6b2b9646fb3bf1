"""The targets tinyhil's core provides: NULL and the real-hardware targets.

Emulated targets live with their mocks (``tinyhil.mocks.targets``); both modules are listed in the
``tinyhil.targets`` entry-point group, so the core never imports a mock.
"""

from __future__ import annotations

from typing import Any

from tinyhil.compiler import HOST_CC_RENDERERS, HostCCompiler
from tinyhil.errors import InvalidArgument
from tinyhil.null_device import NullDevice
from tinyhil.registry import Target, target
from tinyhil.runtime import Device

__all__ = ["amd_kfd", "amd_usb", "null"]


def _not_implemented(what: str, issue: int) -> str:
    return f"not implemented yet: {what} lands with issue {issue}"


@target(
    "NULL",
    capabilities=["null", "compile", "copyin", "copy", "fill", "exec", "timestamps"],
    renderers=HOST_CC_RENDERERS,
    default_renderer="CC",
    summary="runs nothing: bookkeeping, real compilation, fixed virtual durations",
)
def null(resolved: Target, *, allow_copyout: bool = False, **options: Any) -> Device:
    """Open a NULL device (``allow_copyout=True`` makes copyout return zeros instead of raising)."""
    if options:
        raise InvalidArgument(f"options={sorted(options)} for {resolved.name}, expected only allow_copyout")
    return NullDevice(resolved.name, HostCCompiler(), allow_copyout=allow_copyout)


def _usb_probe() -> str | None:
    return _not_implemented("the USB3 transport on libusb", 3)


@target("USB+AMD", capabilities=[], probe=_usb_probe, emulated=False, summary="AMD GPU behind an ASM2464 bridge")
def amd_usb(resolved: Target, **options: Any) -> Device:
    """An AMD GPU behind a real ASM2464-class USB bridge."""
    raise NotImplementedError(_usb_probe())


def _kfd_probe() -> str | None:
    return _not_implemented("the KFD client and /dev/kfd runtime", 6)


@target("KFD+AMD", capabilities=[], probe=_kfd_probe, emulated=False, summary="AMD GPU through the kernel's /dev/kfd")
def amd_kfd(resolved: Target, **options: Any) -> Device:
    """An AMD GPU through the Linux amdkfd driver."""
    raise NotImplementedError(_kfd_probe())
