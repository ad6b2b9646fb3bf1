"""The targets tinyhil's core provides: NULL, the compile-only NULL targets, and the real-hardware targets.

``NV`` is declared in ``tinyhil.nv.target`` and listed here (imported), so the registry collects it with the rest.

Emulated targets live with their mocks (``tinyhil.mocks.targets``); both modules are listed in the
``tinyhil.targets`` entry-point group, so the core never imports a mock.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tinyhil._check import check_int
from tinyhil.amdgpu.driver import WAIT_TIMEOUT_MS
from tinyhil.amdgpu.firmware import DirectoryFirmware, FirmwareSource
from tinyhil.cache import ArtifactError
from tinyhil.compiler import AMD_RENDERERS, Compiler
from tinyhil.compiler_amdgpu import amd_compiler, llvm_unavailable_reason
from tinyhil.device import Device
from tinyhil.errors import TargetUnavailable
from tinyhil.fileio import FileIO, RealFileIO
from tinyhil.kfd.over_kfd import KfdAmdDevice
from tinyhil.null_device import NullDevice
from tinyhil.nv.target import nv
from tinyhil.qemu.toolchains import (
    qcomcl_compiler,
    qcomcl_unavailable_reason,
    qemucc_compiler,
    qemucc_unavailable_reason,
)
from tinyhil.registry import Target, check_choice, check_option, target
from tinyhil.spec.amdgpu_firmware import FIRMWARE_PACKAGE, GFX1100_FIRMWARE
from tinyhil.spec.kfd_topology import KFD_DEVICE_PATH
from tinyhil.usb.backend import open_usb3, probe_usb3
from tinyhil.usb.errors import BridgeUnavailable
from tinyhil.usbgpu.over_usb import USB_AMD_CAPABILITIES

__all__ = ["KfdAmdOptions", "NullOptions", "UsbAmdOptions", "amd_kfd", "amd_usb", "kfd_probe", "null",
           "null_qcomcl_a630", "null_qemucc_aarch64", "nv", "usb_firmware_reason", "usb_probe"]  # fmt: skip

NULL_CAPABILITIES = ["null", "compile", "copyin", "copy", "fill", "exec", "timestamps"]
COMPILE_ONLY_CAPABILITIES = [*NULL_CAPABILITIES, "compile-only", "qemu-compiler"]


@dataclass(frozen=True, slots=True)
class NullOptions:
    """The options of NULL and the compile-only NULL targets: ``allow_copyout=True`` makes copyout return zeros."""

    allow_copyout: bool = False

    def __post_init__(self) -> None:
        check_option("allow_copyout", self.allow_copyout, bool, "True or False")


@target(
    "NULL",
    capabilities=NULL_CAPABILITIES,
    renderers=AMD_RENDERERS,
    renderer_probe=llvm_unavailable_reason,
    default_renderer="CC",
    summary="runs nothing: bookkeeping, real compilation, fixed virtual durations",
    options=NullOptions,
)
def null(resolved: Target, options: NullOptions) -> Device:
    """Open a NULL device (``allow_copyout=True`` makes copyout return zeros instead of raising)."""
    compiler = amd_compiler(resolved.name, resolved.renderer, resolved.arch)
    return NullDevice(resolved.name, compiler, allow_copyout=options.allow_copyout)


def _qemucc_aarch64_probe() -> str | None:
    return qemucc_unavailable_reason("aarch64")


@target(
    "NULL:QEMUCC:aarch64",
    capabilities=COMPILE_ONLY_CAPABILITIES,
    probe=_qemucc_aarch64_probe,
    options=NullOptions,
    summary="NULL with Debian's tcc for aarch64 under qemu-user: compiles C to aarch64 objects (rootfs built on "
    "first open)",
)
def null_qemucc_aarch64(resolved: Target, options: NullOptions) -> Device:
    """Open NULL with the qemu-backed aarch64 C compiler (builds its rootfs and compile server on first use)."""
    return _null_with(resolved, options, lambda: qemucc_compiler("aarch64"))


@target(
    "NULL:QCOMCL:a630",
    capabilities=COMPILE_ONLY_CAPABILITIES,
    probe=qcomcl_unavailable_reason,
    options=NullOptions,
    summary="NULL with the Adreno a630 OpenCL compiler from a user-supplied aarch64 rootfs, under qemu-user",
)
def null_qcomcl_a630(resolved: Target, options: NullOptions) -> Device:
    """Open NULL with the Adreno OpenCL compiler (configured by TINYHIL_QCOMCL_ROOTFS and its sha256)."""
    return _null_with(resolved, options, lambda: qcomcl_compiler("a630"))


def _null_with(resolved: Target, options: NullOptions, make_compiler: Callable[[], Compiler]) -> Device:
    """NULL with the compiler ``make_compiler`` builds; one whose artifacts cannot be had makes the target
    unavailable (TargetUnavailable naming why)."""
    try:
        compiler = make_compiler()
    except ArtifactError as exc:
        raise TargetUnavailable(resolved.name, str(exc)) from exc
    return NullDevice(resolved.name, compiler, allow_copyout=options.allow_copyout)


def usb_firmware_reason(firmware: FirmwareSource | None = None) -> str | None:
    """Why the USB-path GPU bring-up cannot run here for want of firmware: the gfx1100 files it uploads through the
    PSP (``docs/gfx1100.md`` section 7) that ``firmware`` (default: ``/lib/firmware/amdgpu/``) lacks."""
    source = DirectoryFirmware() if firmware is None else firmware
    missing = [name for name in GFX1100_FIRMWARE if not source.available(name)]
    if not missing:
        return None
    return (
        f"an ASM2464 bridge is attached, but the gfx1100 firmware the GPU bring-up uploads is missing from "
        f"{source!r}: {', '.join(missing)}; install {FIRMWARE_PACKAGE}"
    )


def usb_probe(*, context: Any = None, firmware: FirmwareSource | None = None) -> str | None:
    """Why ``USB+AMD`` cannot run here: libusb missing, no bridge attached, or (with a bridge) the gfx1100 firmware
    files the bring-up uploads missing (:func:`usb_firmware_reason`).

    ``context`` is an unopened ``usb1.USBContext``-like object, ``firmware`` the firmware source (tests inject
    both); by default a fresh context and ``/lib/firmware/amdgpu/``.
    """
    reason = probe_usb3(context=context)
    return usb_firmware_reason(firmware) if reason is None else reason


@dataclass(frozen=True, slots=True)
class UsbAmdOptions:
    """The options of USB+AMD: ``serial`` picks one of several bridges, ``revision`` the copyin protocol revision
    (docs/copyin.md), ``wait_timeout_ms`` bounds every wait."""

    serial: str | None = None
    revision: str = "pipelined"
    wait_timeout_ms: int = WAIT_TIMEOUT_MS

    def __post_init__(self) -> None:
        from tinyhil.usbgpu.copy import CopyRevision

        check_option("serial", self.serial, str, "None or a bridge's USB serial string")
        object.__setattr__(self, "revision", check_choice("revision", self.revision, CopyRevision).value)
        check_int("wait_timeout_ms", self.wait_timeout_ms, min_value=1)


@target(
    "USB+AMD",
    # host-native code objects run only on the emulated GPU, so no exec on a real board
    capabilities=sorted(USB_AMD_CAPABILITIES | {"real-hardware"}),
    probe=usb_probe,
    emulated=False,
    summary="AMD GPU (gfx1100) behind an ASM2464 USB bridge (the real-register bring-up not yet run on a board)",
    options=UsbAmdOptions,
)
def amd_usb(resolved: Target, options: UsbAmdOptions) -> Device:
    """An AMD GPU behind a real ASM2464-class bridge (``serial`` picks one of several): the same device runtime as
    ``MOCKUSB+AMD`` over the libusb transport, with firmware from ``/lib/firmware/amdgpu/``.

    Raises:
        TargetUnavailable: no usable bridge (libusb missing, none attached, wrong bridge firmware), or the GPU's
            firmware files are missing (the probe says so first; checked again here, for an opener called directly).
    """
    from tinyhil.usbgpu.over_usb import UsbAmdDevice

    try:
        transport = open_usb3(options.serial)
    except BridgeUnavailable as exc:
        raise TargetUnavailable(resolved.name, exc.reason) from exc
    missing = usb_firmware_reason()
    if missing is not None:
        transport.close()
        raise TargetUnavailable(resolved.name, missing)
    return UsbAmdDevice(resolved.name, transport, revision=options.revision, on_close=transport.close,
                        wait_timeout_ms=options.wait_timeout_ms)  # fmt: skip


NO_KFD_REASON = "no /dev/kfd: the amdgpu driver's KFD is not present on this machine"
KFD_CAPABILITIES = ["kfd", "sdma", "signals", "copyin", "copyout", "copy", "fill", "timestamps", "real-hardware",
                    "fault-recovery"]  # fmt: skip


def kfd_probe(*, fileio: FileIO | None = None) -> str | None:
    """Why ``KFD+AMD`` cannot run here: ``/dev/kfd`` missing or not openable (``fileio``: tests inject a seam)."""
    io = RealFileIO() if fileio is None else fileio
    try:
        fd = io.open(KFD_DEVICE_PATH, os.O_RDWR)
    except FileNotFoundError:
        return NO_KFD_REASON
    except PermissionError as exc:
        return f"/dev/kfd is not accessible ({exc.strerror}): add the user to the 'render' group"
    except OSError as exc:
        return f"/dev/kfd cannot be opened: {exc}"
    io.close(fd)
    return None


@dataclass(frozen=True, slots=True)
class KfdAmdOptions:
    """The options of KFD+AMD: none yet (the GPU is the target index, ``KFD:<n>+AMD``)."""


@target(
    "KFD+AMD",
    capabilities=KFD_CAPABILITIES,
    probe=kfd_probe,
    emulated=False,
    renderers=AMD_RENDERERS,
    renderer_probe=llvm_unavailable_reason,
    default_renderer="CC",
    summary="AMD GPU through the kernel's /dev/kfd (KFD:<n>+AMD drives GPU n)",
    indexed=True,
    options=KfdAmdOptions,
)
def amd_kfd(resolved: Target, options: KfdAmdOptions) -> Device:
    """An AMD GPU through the Linux amdkfd driver, with the same runtime as MOCKKFD+AMD.

    No ``compile`` / ``exec``: tinyhil builds host-native code objects, which only the emulated GPU runs.
    """
    return KfdAmdDevice.open(resolved.name, RealFileIO(), gpu_index=resolved.spec.index or 0,
                             capabilities={"real-hardware"})  # fmt: skip
