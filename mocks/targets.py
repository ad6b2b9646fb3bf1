"""The emulated device targets, registered through the ``tinyhil.targets`` entry point."""

from __future__ import annotations

from typing import Any, Final

from tinyhil._check import check_int
from tinyhil.compiler import AMD_RENDERERS, HostCCompiler
from tinyhil.emulators.amdgpu import AmdGpu
from tinyhil.emulators.kernel import EventKernel
from tinyhil.errors import InvalidArgument
from tinyhil.kfd.runtime import KfdAmdDevice
from tinyhil.mocks.kfd import MockKFD
from tinyhil.registry import Target, target
from tinyhil.runtime import Device

__all__ = ["AMD_ARCHS", "GFX_TARGET_VERSIONS", "MOCKKFD_CAPABILITIES", "MOCKKFD_GPUS", "MOCKKFD_VRAM_BYTES",
           "mock_kfd_amd", "mock_usb_amd"]  # fmt: skip

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


# gfx_target_version of each arch (spec/kfd.md: gfx1100 = 110000, gfx1201 = 120001, gfx950 = 90500).
GFX_TARGET_VERSIONS: Final = {"gfx1100": 110000, "gfx1201": 120001, "gfx950": 90500}
MOCKKFD_GPUS: Final = 2  # a MOCKKFD+AMD machine has two GPUs of the chosen arch unless gpus= says otherwise
MOCKKFD_VRAM_BYTES: Final = 256 << 20
MOCKKFD_CAPABILITIES: Final = ["kfd", "sdma", "compute", "signals", "copyin", "copyout", "copy", "fill", "compile",
                               "exec", "timestamps", "memory-faults", "multi-gpu"]  # fmt: skip


@target(
    "MOCKKFD+AMD",
    capabilities=MOCKKFD_CAPABILITIES,
    renderers=AMD_RENDERERS,
    default_renderer="CC",
    archs=AMD_ARCHS,
    summary="emulated AMD GPUs behind MOCKKFD, a virtual /dev/kfd (MOCKKFD:<n>+AMD drives GPU n)",
)
def mock_kfd_amd(
    resolved: Target, *, gpus: int | None = None, vram_bytes: int = MOCKKFD_VRAM_BYTES, **options: Any
) -> Device:
    """Emulated AMD GPUs (``gpus``, default two, of the target's arch) behind MOCKKFD, driven by the KFD+AMD runtime.

    The target index picks the GPU (``MOCKKFD:1+AMD`` is GPU 1); the device's ``open_peer(i)`` opens another GPU of
    the same machine. Raises:
        InvalidArgument: unknown options, or an index past the last GPU.
    """
    if options:
        raise InvalidArgument(f"options={sorted(options)} for {resolved.name}, expected only gpus and vram_bytes")
    index = resolved.spec.index or 0
    count = check_int("gpus", gpus if gpus is not None else max(MOCKKFD_GPUS, index + 1), min_value=1)
    if index >= count:
        raise InvalidArgument(f"{resolved.name}: GPU index {index}, expected < gpus={count}")
    version = GFX_TARGET_VERSIONS[resolved.arch or AMD_ARCHS[0]]
    kernel = EventKernel()
    ports = [AmdGpu(kernel, vram_bytes=vram_bytes, gfx_target_version=version, name=f"gpu{n}") for n in range(count)]
    mock = MockKFD(ports)
    return KfdAmdDevice.open(
        resolved.name,
        mock.fileio,
        gpu_index=index,
        compiler=HostCCompiler(),
        capabilities={"memory-faults"},
        on_close=mock.close,
    )
