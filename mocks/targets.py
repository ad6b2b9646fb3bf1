"""The emulated device targets, registered through the ``tinyhil.targets`` entry point."""

from __future__ import annotations

from typing import Any

from tinyhil.compiler import AMD_RENDERERS
from tinyhil.registry import Target, target
from tinyhil.runtime import Device

__all__ = ["AMD_ARCHS", "mock_kfd_amd", "mock_usb_amd"]

# Emulated GPU models an arch string selects (spec/kfd.md: gfx_target_version per GPU); the first is the default.
AMD_ARCHS = ("gfx1100", "gfx1201", "gfx950")


def _mockusb_probe() -> str | None:
    return "not implemented yet: the ASM2464 emulator and MockUSB3 land with issue 3"


@target(
    "MOCKUSB+AMD",
    capabilities=[],
    probe=_mockusb_probe,
    renderers=AMD_RENDERERS,
    default_renderer="CC",
    archs=AMD_ARCHS,
    summary="emulated AMD GPU behind an emulated ASM2464",
)
def mock_usb_amd(resolved: Target, **options: Any) -> Device:
    """An emulated AMD GPU behind the emulated ASM2464 bridge, over MockUSB3."""
    raise NotImplementedError(_mockusb_probe())


def _mockkfd_probe() -> str | None:
    return "not implemented yet: MOCKKFD lands with issue 6"


@target(
    "MOCKKFD+AMD",
    capabilities=[],
    probe=_mockkfd_probe,
    renderers=AMD_RENDERERS,
    default_renderer="CC",
    archs=AMD_ARCHS,
    summary="emulated AMD GPU behind a virtual /dev/kfd",
)
def mock_kfd_amd(resolved: Target, **options: Any) -> Device:
    """An emulated AMD GPU behind MOCKKFD, a virtual /dev/kfd."""
    raise NotImplementedError(_mockkfd_probe())
