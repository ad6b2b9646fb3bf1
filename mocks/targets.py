"""The emulated device targets, registered through the ``tinyhil.targets`` entry point.

- ``MOCKUSB+AMD[:renderer[:arch]]``: the USB device runtime (:class:`~tinyhil.usbgpu.amd_device.UsbAmdDevice`, the same
  code as ``USB+AMD``) over :class:`~tinyhil.mocks.usb3.MockUSB3`: an emulated ASM2464 with an emulated AMD GPU of
  the arch behind it. Options: ``mode`` (``sync``/``timed``), ``revision`` (the copyin protocol revision),
  ``quirks``, ``faults``, ``seed``, ``timing``. :func:`open_mock_usb3` opens the bridge level alone.
- ``MOCKKFD+AMD[:renderer[:arch]]``: the KFD device runtime over MOCKKFD, a virtual ``/dev/kfd`` with emulated GPUs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from tinyhil._check import check_int
from tinyhil.compiler import AMD_RENDERERS
from tinyhil.device import Device
from tinyhil.errors import InvalidArgument
from tinyhil.registry import Target, default_registry, target

if TYPE_CHECKING:  # imported when opened: loading the registry's entry points stays light
    from tinyhil.mocks.usb3 import MockUSB3

__all__ = ["AMD_ARCHS", "GFX_TARGET_VERSIONS", "MOCKKFD_CAPABILITIES", "MOCKKFD_GPUS", "MOCKKFD_MAX_GPUS",
           "MOCKKFD_VRAM_BYTES", "MOCKUSB_BOARD_OPTIONS", "MOCKUSB_BRIDGE_CAPABILITIES", "MOCKUSB_CAPABILITIES",
           "mock_kfd_amd", "mock_usb_amd", "open_mock_usb3"]  # fmt: skip

# Emulated GPU models an arch string selects (spec/kfd.md: gfx_target_version per GPU); the first is the default.
AMD_ARCHS = ("gfx1100", "gfx1201", "gfx950")


# gfx_target_version of each arch (spec/kfd.md: gfx1100 = 110000, gfx1201 = 120001, gfx950 = 90500).
GFX_TARGET_VERSIONS: Final = {"gfx1100": 110000, "gfx1201": 120001, "gfx950": 90500}
# The bridge level (spec/asm24.md): USB3 vendor requests and bulk transfers, 0xF2 SRAM windows, PCIe to the GPU.
MOCKUSB_BRIDGE_CAPABILITIES = ("usb3", "sram-windows", "pcie")
MOCKUSB_CAPABILITIES: Final = [*MOCKUSB_BRIDGE_CAPABILITIES, "sdma", "compute", "signals", "copyin", "copyout", "copy",
                               "fill", "compile", "exec", "timestamps"]  # fmt: skip


# What MOCKUSB+AMD forwards to MockUSB3: the board's behaviour, never a replacement GPU or bridge.
MOCKUSB_BOARD_OPTIONS: Final = ("mode", "quirks", "faults", "seed", "timing", "vram_bytes")


def open_mock_usb3(resolved: Target | str = "MOCKUSB+AMD", **options: Any) -> MockUSB3:
    """Open the bridge level of ``MOCKUSB+AMD``: a fresh emulated board behind a :class:`MockUSB3` transport.

    ``options`` go to :class:`MockUSB3` (``mode``, ``quirks``, ``faults``, ``seed``, ``timing``, ``function``,
    ``kernel``, ``usb3``); the emulated GPU behind it has the target's arch unless ``function`` replaces it. Use it
    as a context manager.

    Raises:
        InvalidArgument: ``resolved`` is not a ``MOCKUSB+AMD`` target, or a bad option.
    """
    if isinstance(resolved, str):
        resolved = default_registry().resolve(resolved)
    if not isinstance(resolved, Target) or resolved.definition.name != mock_usb_amd.name:
        raise InvalidArgument(f"target={resolved!r}, expected MOCKUSB+AMD (a target string or a resolved Target)")
    from tinyhil.mocks.usb3 import MockUSB3

    if "function" not in options and "bridge" not in options:
        options.setdefault("gfx_target_version", GFX_TARGET_VERSIONS[resolved.arch or AMD_ARCHS[0]])
    return MockUSB3(**options)


@target(
    "MOCKUSB+AMD",
    capabilities=MOCKUSB_CAPABILITIES,
    renderers=AMD_RENDERERS,
    default_renderer="CC",
    archs=AMD_ARCHS,
    summary="emulated AMD GPU behind an emulated ASM2464 USB bridge (MockUSB3)",
    options=MOCKUSB_BOARD_OPTIONS,
)
def mock_usb_amd(resolved: Target, *, revision: str = "pipelined", **options: Any) -> Device:
    """The USB device runtime over a fresh MockUSB3 board whose GPU has the target's arch.

    ``revision`` picks the copyin protocol revision; ``options`` go to :class:`MockUSB3` (``mode``, ``quirks``,
    ``faults``, ``seed``, ``timing``, ``vram_bytes``).
    """
    from tinyhil.compiler import HostCCompiler
    from tinyhil.mocks.usb3 import MockUSB3
    from tinyhil.usbgpu.amd_device import UsbAmdDevice

    usb = MockUSB3(gfx_target_version=GFX_TARGET_VERSIONS[resolved.arch or AMD_ARCHS[0]], **options)
    return UsbAmdDevice(resolved.name, usb, compiler=HostCCompiler(), revision=revision, on_close=usb.close)


MOCKKFD_GPUS: Final = 2  # a MOCKKFD+AMD machine has two GPUs of the chosen arch unless gpus= says otherwise
MOCKKFD_MAX_GPUS: Final = 8  # the largest emulated machine (an 8-GPU node, as in a real server); MOCKKFD:7+AMD at most
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
    indexed=True,
    max_index=MOCKKFD_MAX_GPUS - 1,
)
def mock_kfd_amd(resolved: Target, *, gpus: int | None = None, vram_bytes: int = MOCKKFD_VRAM_BYTES) -> Device:
    """Emulated AMD GPUs (``gpus``, default two, of the target's arch) behind MOCKKFD, driven by the KFD+AMD runtime.

    The target index picks the GPU (``MOCKKFD:1+AMD`` is GPU 1); the device's ``open_peer(i)`` opens another GPU of
    the same machine. Raises:
        InvalidArgument: unknown options, or an index past the last GPU.
    """
    index = resolved.spec.index or 0
    count = check_int("gpus", gpus if gpus is not None else max(MOCKKFD_GPUS, index + 1), min_value=1,
                      max_value=MOCKKFD_MAX_GPUS)  # fmt: skip
    if index >= count:
        raise InvalidArgument(f"{resolved.name}: GPU index {index}, expected < gpus={count}")
    from tinyhil.compiler import HostCCompiler
    from tinyhil.kfd.amd_device import KfdAmdDevice
    from tinyhil.mocks.kfd import MockKFD

    mock = MockKFD(gpus=count, arch=resolved.arch or AMD_ARCHS[0], vram_bytes=vram_bytes)
    return KfdAmdDevice.open(
        resolved.name,
        mock.fileio,
        gpu_index=index,
        compiler=HostCCompiler(),
        capabilities={"memory-faults"},
        on_close=mock.close,
    )
