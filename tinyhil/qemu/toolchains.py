"""The toolchains of the compile-only targets: availability probes (cheap) and compilers (built on first open).

``QEMUCC:<arch>``: Debian's tcc for the guest arch in a rootfs built from the Debian archive
(:func:`tinyhil.qemu.rootfs.debian_rootfs`), or a prebuilt rootfs pinned with ``TINYHIL_QEMUCC_ROOTFS`` and
``TINYHIL_QEMUCC_ROOTFS_SHA256``; the compile server is built in it on first use (:mod:`tinyhil.qemu.ccserver`).

``QCOMCL:<gpu>``: the Adreno OpenCL compiler, for users who have its aarch64 rootfs: ``TINYHIL_QCOMCL_ROOTFS`` (a
tar archive, path or URL), ``TINYHIL_QCOMCL_ROOTFS_SHA256``, and ``TINYHIL_QCOMCL_SERVER``, the path inside that
rootfs of a compile server speaking :mod:`tinyhil.qemu.protocol` (default ``/usr/bin/tinyhil-ccserver``).

Probes never download: a missing Debian rootfs counts as available when apt can build it, and is built on the
first open (which can then still fail, e.g. offline; the open raises ``TargetUnavailable`` with the reason).
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path
from typing import Final

from tinyhil.cache import ArtifactError
from tinyhil.qemu.ccserver import build_server, tcc_source_reason
from tinyhil.qemu.compiler import QemuCompiler
from tinyhil.qemu.rootfs import debian_rootfs, debian_rootfs_reason, pinned_rootfs
from tinyhil.qemu.runner import ARCH2ELF_MACHINE, GuestRunner, Rootfs, find_runner

__all__ = [
    "QCOMCL_DEFAULT_SERVER",
    "QCOMCL_ROOTFS_ENV",
    "QCOMCL_SERVER_ENV",
    "QCOMCL_SHA256_ENV",
    "QEMUCC_ROOTFS_ENV",
    "QEMUCC_SHA256_ENV",
    "qcomcl_compiler",
    "qcomcl_unavailable_reason",
    "qemucc_compiler",
    "qemucc_unavailable_reason",
]

QEMUCC_ROOTFS_ENV: Final = "TINYHIL_QEMUCC_ROOTFS"
QEMUCC_SHA256_ENV: Final = "TINYHIL_QEMUCC_ROOTFS_SHA256"
QCOMCL_ROOTFS_ENV: Final = "TINYHIL_QCOMCL_ROOTFS"
QCOMCL_SHA256_ENV: Final = "TINYHIL_QCOMCL_ROOTFS_SHA256"
QCOMCL_SERVER_ENV: Final = "TINYHIL_QCOMCL_SERVER"
QCOMCL_DEFAULT_SERVER: Final = "/usr/bin/tinyhil-ccserver"
QCOMCL_ARCH: Final = "aarch64"  # the Adreno compiler is an aarch64 library


def _pinned(rootfs_env: str, sha256_env: str) -> tuple[str, str] | str | None:
    """``(source, sha256)`` when ``rootfs_env`` is set, ``None`` when neither is, or why the setting is unusable.

    This reads only the environment and the file system, so a configuration error is reported as such whether or
    not a runner (qemu-user or docker) is present.
    """
    source = os.environ.get(rootfs_env, "").strip()
    sha256 = os.environ.get(sha256_env, "").strip()
    if not source:
        if sha256:
            return f"{sha256_env} is set but {rootfs_env} is not: set {rootfs_env} to the rootfs archive it pins"
        return None
    if not sha256:
        return f"{rootfs_env} is set but {sha256_env} is not: a rootfs must be pinned by its sha256"
    scheme = urllib.parse.urlsplit(source).scheme
    if not scheme and not Path(source).expanduser().is_file():
        return f"{rootfs_env}={source!r}: no such file"
    return source, sha256


def _runner(arch: str) -> GuestRunner:
    found = find_runner(arch)
    if isinstance(found, str):
        raise ArtifactError(found)
    return found


def qemucc_unavailable_reason(arch: str = "aarch64") -> str | None:
    """``None`` when ``NULL:QEMUCC:<arch>`` can open here, else the precise reason (never downloads).

    The configuration (``TINYHIL_QEMUCC_ROOTFS`` and its sha256) is checked first, then the runner, then whether the
    Debian rootfs can be built, then whether the tcc source for the compile server can be had
    (:func:`~tinyhil.qemu.ccserver.tcc_source_reason`).
    """
    pinned = _pinned(QEMUCC_ROOTFS_ENV, QEMUCC_SHA256_ENV)
    if isinstance(pinned, str):
        return pinned
    runner = find_runner(arch)
    if isinstance(runner, str):
        return runner
    reason = None if pinned is not None else debian_rootfs_reason(arch)
    return reason if reason is not None else tcc_source_reason()


def qemucc_compiler(arch: str = "aarch64", *, per_worker_servers: bool = False) -> QemuCompiler:
    """Debian's tcc for ``arch`` behind a compile server (builds the rootfs and the server on first use).

    Raises:
        ArtifactError (and subclasses): no runner, or the rootfs or the server could not be fetched or built.
    """
    pinned = _pinned(QEMUCC_ROOTFS_ENV, QEMUCC_SHA256_ENV)
    if isinstance(pinned, str):
        raise ArtifactError(pinned)
    runner = _runner(arch)
    rootfs: Rootfs = pinned_rootfs(*pinned) if pinned is not None else debian_rootfs(arch)
    runner.prepare(rootfs)
    program = build_server(rootfs, runner)
    return QemuCompiler(
        f"QEMUCC:{arch}",
        runner.command(rootfs, program),
        elf_machine=ARCH2ELF_MACHINE[arch],
        portable_kernels=True,
        per_worker_servers=per_worker_servers,
    )


def qcomcl_unavailable_reason() -> str | None:
    """``None`` when ``NULL:QCOMCL:<gpu>`` can open here, else the precise reason (configuration first, then runner)."""
    pinned = _pinned(QCOMCL_ROOTFS_ENV, QCOMCL_SHA256_ENV)
    if pinned is None:
        return (
            f"not configured: set {QCOMCL_ROOTFS_ENV} to the Adreno compiler's aarch64 rootfs archive (path or URL) "
            f"and {QCOMCL_SHA256_ENV} to its sha256; its compile server is {QCOMCL_SERVER_ENV} "
            f"(default {QCOMCL_DEFAULT_SERVER})"
        )
    if isinstance(pinned, str):
        return pinned
    runner = find_runner(QCOMCL_ARCH)
    return runner if isinstance(runner, str) else None


def qcomcl_compiler(gpu: str) -> QemuCompiler:
    """The configured Adreno compiler for ``gpu`` (e.g. ``a630``) behind its compile server.

    Raises:
        ArtifactError (and subclasses): not configured, no runner, or the rootfs could not be fetched.
    """
    reason = qcomcl_unavailable_reason()
    if reason is not None:
        raise ArtifactError(reason)
    pinned = _pinned(QCOMCL_ROOTFS_ENV, QCOMCL_SHA256_ENV)
    assert isinstance(pinned, tuple)  # guaranteed by the reason check above
    runner = _runner(QCOMCL_ARCH)
    rootfs = pinned_rootfs(*pinned)
    runner.prepare(rootfs)
    server = os.environ.get(QCOMCL_SERVER_ENV, "").strip() or QCOMCL_DEFAULT_SERVER
    return QemuCompiler(f"QCOMCL:{gpu}", runner.command(rootfs, rootfs.tree / server.lstrip("/"), [gpu]))
