"""The emulated device targets, registered through the ``tinyhil.targets`` entry point.

- ``MOCKUSB+AMD[:renderer[:arch]]``: the USB device runtime (:class:`~tinyhil.usbgpu.over_usb.UsbAmdDevice`, the same
  code as ``USB+AMD``) over :class:`~tinyhil.mocks.usb3.MockUSB3`: an emulated ASM2464 with an emulated gfx1100
  (Navi 31's real register interface, the only one modelled on the USB path) behind it. Options:
  :class:`MockUsbOptions`. :func:`open_mock_usb3` opens the bridge level alone.
- ``MOCKKFD+AMD[:renderer[:arch]]``: the KFD device runtime over MOCKKFD, a virtual ``/dev/kfd`` with emulated GPUs.
  Options: :class:`MockKfdOptions`.
- ``REPLAY+AMD``: the USB device runtime over a recorded trace (:mod:`tinyhil.mocks.replay`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from tinyhil._check import check_int
from tinyhil.amdgpu.driver import COMPILER_CAPABILITIES
from tinyhil.compiler import AMD_RENDERERS
from tinyhil.compiler_amdgpu import llvm_unavailable_reason
from tinyhil.device import Device
from tinyhil.errors import InvalidArgument
from tinyhil.registry import Target, check_choice, check_option, default_registry, target
from tinyhil.spec.amdgpu_firmware import FIRMWARE_DIR, FIRMWARE_PACKAGE
from tinyhil.usbgpu.over_usb import USB_AMD_CAPABILITIES

if TYPE_CHECKING:  # imported when opened: loading the registry's entry points stays light
    from tinyhil.amdgpu.firmware import FirmwareSource
    from tinyhil.emulators.asm2464 import Quirks
    from tinyhil.emulators.faults import FaultPlan
    from tinyhil.emulators.timing import TimingModel
    from tinyhil.mocks.kfd.faults import KfdFaultPlan
    from tinyhil.mocks.usb.context import TransferMode
    from tinyhil.mocks.usb3 import MockUSB3

__all__ = [
    "AMD_ARCHS",
    "ENV_REPLAY",
    "GFX_TARGET_VERSIONS",
    "MOCKKFD_CAPABILITIES",
    "MOCKKFD_GPUS",
    "MOCKKFD_MAX_GPUS",
    "MOCKKFD_VRAM_BYTES",
    "MOCKUSB_ARCHS",
    "MOCKUSB_BRIDGE_CAPABILITIES",
    "MOCKUSB_CAPABILITIES",
    "REPLAY_TARGET",
    "MockKfdOptions",
    "MockUsbOptions",
    "ReplayOptions",
    "emulated_gpu_renderer_reason",
    "mock_kfd_amd",
    "mock_usb_amd",
    "open_mock_usb3",
    "replay_amd",
    "replay_unavailable_reason",
]  # fmt: skip

# Emulated GPU models an arch string selects (docs/mockkfd.md: gfx_target_version per GPU); the first is the default.
AMD_ARCHS = ("gfx1100", "gfx1201", "gfx950")
# MOCKUSB+AMD's: the USB path models only gfx1100's register interface (docs/gfx1100.md).
MOCKUSB_ARCHS: Final = ("gfx1100",)


# gfx_target_version of each arch (docs/mockkfd.md: gfx1100 = 110000, gfx1201 = 120001, gfx950 = 90500).
GFX_TARGET_VERSIONS: Final = {"gfx1100": 110000, "gfx1201": 120001, "gfx950": 90500}
# MOCKUSB+AMD's default firmware: generated blobs with valid headers (tinyhil.amdgpu.firmware.GeneratedFirmware).
GENERATED_FIRMWARE: Final = "generated"
# The bridge level (docs/asm2464.md): USB3 vendor requests and bulk transfers, 0xF2 SRAM windows, PCIe to the GPU.
MOCKUSB_BRIDGE_CAPABILITIES = ("usb3", "sram-windows", "pcie")
# The USB path's runtime over the bridge, with a compiler whose code objects the emulated GPU runs.
MOCKUSB_CAPABILITIES: Final = sorted(USB_AMD_CAPABILITIES | COMPILER_CAPABILITIES)


@dataclass(frozen=True, slots=True)
class MockUsbOptions:
    """The options of MOCKUSB+AMD: ``revision`` (the copyin protocol revision, docs/copyin.md) and the fresh board's
    behaviour, given to :class:`~tinyhil.mocks.usb3.MockUSB3`: ``mode`` (``"sync"`` / ``"timed"``), ``seed``,
    ``faults`` (a :class:`~tinyhil.emulators.faults.FaultPlan`), ``quirks``, ``timing``, ``vram_bytes``; ``record``
    (a ``.hiltrace.jsonl`` or ``.pcapng`` path) records the USB handle and writes the trace there at close;
    ``firmware`` is what the bring-up uploads to the emulated PSP: ``"generated"`` (blobs with valid headers,
    :class:`~tinyhil.amdgpu.firmware.GeneratedFirmware`) or a directory of the real files, such as
    ``/lib/firmware/amdgpu`` (:class:`~tinyhil.amdgpu.firmware.DirectoryFirmware`: the boot a board gets)."""

    revision: str = "pipelined"
    mode: TransferMode | str = "sync"
    seed: int = 0
    faults: FaultPlan | None = None
    quirks: Quirks | None = None
    timing: TimingModel | None = None
    vram_bytes: int | None = None
    record: str | None = None  # write a trace of the USB handle to this file when the device closes (docs/traces.md)
    firmware: str = GENERATED_FIRMWARE

    def __post_init__(self) -> None:
        from tinyhil.emulators.asm2464 import Quirks
        from tinyhil.emulators.faults import FaultPlan
        from tinyhil.emulators.timing import TimingModel
        from tinyhil.mocks.usb.context import TransferMode
        from tinyhil.usbgpu.copy import CopyRevision

        object.__setattr__(self, "revision", check_choice("revision", self.revision, CopyRevision).value)
        object.__setattr__(self, "mode", check_choice("mode", self.mode, TransferMode))
        check_int("seed", self.seed)
        check_option("faults", self.faults, FaultPlan, "None or a FaultPlan (tinyhil.emulators.faults)")
        check_option("quirks", self.quirks, Quirks, "None or a Quirks (tinyhil.emulators.asm2464)")
        check_option("timing", self.timing, TimingModel, "None or a TimingModel (tinyhil.emulators.timing)")
        if self.vram_bytes is not None:
            check_int("vram_bytes", self.vram_bytes, min_value=1)
        if self.record is not None:
            from tinyhil.trace.convert import trace_format

            if not isinstance(self.record, (str, os.PathLike)):
                raise InvalidArgument(f"record={self.record!r}, expected a path ending in .hiltrace.jsonl or .pcapng")
            object.__setattr__(self, "record", os.fspath(self.record))
            trace_format(self.record)
        if not isinstance(self.firmware, (str, os.PathLike)):
            raise InvalidArgument(f"firmware={self.firmware!r}, expected {GENERATED_FIRMWARE!r} or a directory path")
        object.__setattr__(self, "firmware", os.fspath(self.firmware))
        if self.firmware != GENERATED_FIRMWARE and not os.path.isdir(self.firmware):
            raise InvalidArgument(
                f"firmware={self.firmware!r}, expected {GENERATED_FIRMWARE!r} or an existing directory of AMD firmware "
                f"files such as {FIRMWARE_DIR} (install {FIRMWARE_PACKAGE})"
            )

    def firmware_source(self) -> FirmwareSource:
        """The firmware the bring-up uploads (:attr:`firmware`)."""
        from tinyhil.amdgpu.firmware import DirectoryFirmware, GeneratedFirmware

        return GeneratedFirmware() if self.firmware == GENERATED_FIRMWARE else DirectoryFirmware(self.firmware)

    def board(self) -> dict[str, Any]:
        """The keyword arguments of the fresh :class:`MockUSB3` board (everything but ``revision``)."""
        return {"mode": self.mode, "seed": self.seed, "faults": self.faults, "quirks": self.quirks,
                "timing": self.timing, "vram_bytes": self.vram_bytes}  # fmt: skip


def open_mock_usb3(resolved: Target | str = "MOCKUSB+AMD", **options: Any) -> MockUSB3:
    """Open the bridge level of ``MOCKUSB+AMD``: a fresh emulated board behind a :class:`MockUSB3` transport.

    ``options`` go to the fresh form of :class:`MockUSB3` (``mode``, ``seed``, ``faults``, ``quirks``, ``timing``,
    ``vram_bytes``, ``usb3``, transport options); the emulated GPU behind it is a gfx1100. For other parts
    (another PCIe function, a shared kernel) build the bridge and use :meth:`MockUSB3.over`. Use it as a context
    manager.

    Raises:
        InvalidArgument: ``resolved`` is not a ``MOCKUSB+AMD`` target, or a bad option.
    """
    if isinstance(resolved, str):
        resolved = default_registry().resolve(resolved)
    if not isinstance(resolved, Target) or resolved.definition.name != mock_usb_amd.name:
        raise InvalidArgument(f"target={resolved!r}, expected MOCKUSB+AMD (a target string or a resolved Target)")
    from tinyhil.mocks.usb3 import MockUSB3

    options.setdefault("gfx_target_version", GFX_TARGET_VERSIONS[resolved.arch or MOCKUSB_ARCHS[0]])
    return MockUSB3(**options)


def emulated_gpu_renderer_reason(renderer: str | None, arch: str | None) -> str | None:
    """Why a renderer cannot serve an emulated AMD GPU here: ``LLVM`` needs clang-19, and builds machine code the
    GPU runs only for the archs its RDNA3 executor decodes (``gfx1100``); ``CC`` serves every arch."""
    from tinyhil.emulators.amdgpu.rdna3 import EXECUTED_ARCHS

    return llvm_unavailable_reason(renderer, arch, runs_archs=EXECUTED_ARCHS)


@target(
    "MOCKUSB+AMD",
    capabilities=MOCKUSB_CAPABILITIES,
    renderers=AMD_RENDERERS,
    renderer_probe=emulated_gpu_renderer_reason,
    default_renderer="CC",
    archs=MOCKUSB_ARCHS,
    summary="emulated AMD GPU (gfx1100) behind an emulated ASM2464 USB bridge (MockUSB3)",
    options=MockUsbOptions,
)
def mock_usb_amd(resolved: Target, options: MockUsbOptions) -> Device:
    """The USB device runtime over a fresh MockUSB3 board with a gfx1100 behind the bridge."""
    from tinyhil.compiler_amdgpu import amd_compiler
    from tinyhil.mocks.usb3 import MockUSB3
    from tinyhil.usbgpu.over_usb import UsbAmdDevice

    compiler = amd_compiler(resolved.name, resolved.renderer, resolved.arch)
    board = {"gfx_target_version": GFX_TARGET_VERSIONS[resolved.arch or MOCKUSB_ARCHS[0]], **options.board()}
    firmware = options.firmware_source()  # the emulated PSP checks headers, not signatures (docs/gfx1100.md)
    if options.record is None:
        usb = MockUSB3(**board)
        return UsbAmdDevice(resolved.name, usb, compiler=compiler, revision=options.revision, on_close=usb.close,
                            firmware=firmware)  # fmt: skip
    from tinyhil.mocks.replay import open_recorded_usb3, recording_header
    from tinyhil.trace.recorder import TraceRecorder

    settings = {name: getattr(options, name) for name in MockUsbOptions.__dataclass_fields__ if name != "record"}
    recorder = TraceRecorder(header=recording_header(resolved.name, settings))
    usb = open_recorded_usb3(recorder, **board)
    path = options.record

    def close() -> None:
        try:
            usb.close()
        finally:
            recorder.save(path)

    return UsbAmdDevice(resolved.name, usb, compiler=compiler, revision=options.revision, on_close=close,
                        firmware=firmware)  # fmt: skip


ENV_REPLAY: Final = "TINYHIL_REPLAY"
REPLAY_TARGET: Final = "REPLAY+AMD"


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """The options of REPLAY+AMD: ``trace`` (a ``.hiltrace.jsonl`` or ``.pcapng`` file; default: the file
    ``$TINYHIL_REPLAY`` names) and ``order`` (``"strict"``, or ``"endpoint"`` for overlapping IN and OUT)."""

    trace: str | None = None
    order: str = "strict"

    def __post_init__(self) -> None:
        if self.trace is not None:
            if not isinstance(self.trace, (str, os.PathLike)):
                raise InvalidArgument(f"trace={self.trace!r}, expected a path to a trace file")
            object.__setattr__(self, "trace", os.fspath(self.trace))
            from tinyhil.trace.convert import trace_format

            trace_format(self.trace)
        from tinyhil.trace.exchanges import ReplayOrder

        object.__setattr__(self, "order", check_choice("order", self.order, ReplayOrder).value)


def replay_unavailable_reason() -> str | None:
    """``None`` when ``$TINYHIL_REPLAY`` names an existing trace file or directory, else why REPLAY+AMD cannot run."""
    given = os.environ.get(ENV_REPLAY, "")
    if not given:
        return (f"no trace to replay: pass --hil-replay FILE_OR_DIR (or set ${ENV_REPLAY}); from Python use "
                "tinyhil.mocks.replay.open_replay(PATH)")  # fmt: skip
    if not Path(given).exists():
        return f"${ENV_REPLAY}={given!r} does not exist, expected a trace file or a directory of traces"
    return None


@target(
    REPLAY_TARGET,
    capabilities=MOCKUSB_CAPABILITIES,  # those of the target it replays, each only as far as the trace goes
    probe=replay_unavailable_reason,
    renderers=AMD_RENDERERS,
    renderer_probe=emulated_gpu_renderer_reason,
    default_renderer="CC",
    summary="the USB device runtime over a recorded trace (one recorded test, answered from the trace)",
    options=ReplayOptions,
)
def replay_amd(resolved: Target, options: ReplayOptions) -> Device:
    """The USB device runtime over the real transport on a replayed trace (``trace=``, else ``$TINYHIL_REPLAY``);
    see :mod:`tinyhil.mocks.replay` and docs/traces.md."""
    from tinyhil.mocks.replay import open_replay_target

    return open_replay_target(resolved, options)


MOCKKFD_GPUS: Final = 2  # a MOCKKFD+AMD machine has two GPUs of the chosen arch unless gpus= says otherwise
MOCKKFD_MAX_GPUS: Final = 8  # the largest emulated machine (an 8-GPU node, as in a real server); MOCKKFD:7+AMD at most
MOCKKFD_VRAM_BYTES: Final = 256 << 20
MOCKKFD_CAPABILITIES: Final = ["kfd", "sdma", "compute", "signals", "copyin", "copyout", "copy", "fill", "compile",
                               "exec", "timestamps", "memory-faults", "multi-gpu", "fault-recovery"]  # fmt: skip


@dataclass(frozen=True, slots=True)
class MockKfdOptions:
    """The options of MOCKKFD+AMD: the machine's ``gpus`` (default two, or enough for the target index),
    ``vram_bytes`` per GPU, the event kernel's ``seed`` and ``faults`` (a
    :class:`~tinyhil.mocks.kfd.faults.KfdFaultPlan`), given to :class:`~tinyhil.mocks.kfd.MockKFD`."""

    gpus: int | None = None
    vram_bytes: int = MOCKKFD_VRAM_BYTES
    seed: int = 0
    faults: KfdFaultPlan | None = None

    def __post_init__(self) -> None:
        from tinyhil.mocks.kfd.faults import KfdFaultPlan

        if self.gpus is not None:
            check_int("gpus", self.gpus, min_value=1, max_value=MOCKKFD_MAX_GPUS)
        check_int("vram_bytes", self.vram_bytes, min_value=1)
        check_int("seed", self.seed)
        check_option("faults", self.faults, KfdFaultPlan, "None or a KfdFaultPlan (tinyhil.mocks.kfd.faults)")


@target(
    "MOCKKFD+AMD",
    capabilities=MOCKKFD_CAPABILITIES,
    renderers=AMD_RENDERERS,
    renderer_probe=emulated_gpu_renderer_reason,
    default_renderer="CC",
    archs=AMD_ARCHS,
    summary="emulated AMD GPUs behind MOCKKFD, a virtual /dev/kfd (MOCKKFD:<n>+AMD drives GPU n)",
    indexed=True,
    max_index=MOCKKFD_MAX_GPUS - 1,
    options=MockKfdOptions,
)
def mock_kfd_amd(resolved: Target, options: MockKfdOptions) -> Device:
    """Emulated AMD GPUs (``gpus``, default two, of the target's arch) behind MOCKKFD, driven by the KFD+AMD runtime.

    The target index picks the GPU (``MOCKKFD:1+AMD`` is GPU 1); the device's ``open_peer(i)`` opens another GPU of
    the same machine. Every open of one configuration in a thread shares one machine and the KFD process on it, as
    opens on a board share amdkfd's (:mod:`tinyhil.mocks.kfd.machines`); with ``faults`` the machine is the open's
    own and ends with its last device. Raises:
        InvalidArgument: an index past the last GPU, or a fault plan naming a GPU the machine lacks.
    """
    index = resolved.spec.index or 0
    count = options.gpus if options.gpus is not None else max(MOCKKFD_GPUS, index + 1)
    if index >= count:
        raise InvalidArgument(f"{resolved.name}: GPU index {index}, expected < gpus={count}")
    from tinyhil.compiler_amdgpu import amd_compiler
    from tinyhil.kfd.over_kfd import KfdAmdDevice
    from tinyhil.mocks.kfd import MockKFD, shared_machine

    compiler = amd_compiler(resolved.name, resolved.renderer, resolved.arch)
    arch = resolved.arch or AMD_ARCHS[0]

    def build() -> MockKFD:
        return MockKFD(gpus=count, arch=arch, vram_bytes=options.vram_bytes, seed=options.seed, faults=options.faults)

    own = options.faults is not None  # a fault plan's machine is the open's own
    mock = build() if own else shared_machine((count, arch, options.vram_bytes, options.seed), build)
    return KfdAmdDevice.open(
        resolved.name,
        mock.fileio,
        gpu_index=index,
        compiler=compiler,
        capabilities={"memory-faults"},
        on_close=mock.close if own else None,
    )
