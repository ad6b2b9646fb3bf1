"""Foreign-architecture compilers behind a long-lived compile server, run under qemu-user (or docker).

- :mod:`~tinyhil.qemu.protocol`: the framed request/reply protocol and its errors.
- :mod:`~tinyhil.qemu.server`: the host side of one server process (timeouts, one restart, clean shutdown).
- :mod:`~tinyhil.qemu.runner`: how guest programs run here (qemu-user, or the docker fallback).
- :mod:`~tinyhil.qemu.rootfs`: root file systems built from Debian packages or pinned archives.
- :mod:`~tinyhil.qemu.ccserver`: building the guest server (``ccserver.c``) with the rootfs' own tcc.
- :mod:`~tinyhil.qemu.compiler`: :class:`QemuCompiler`, the compiler seam over a shared server.
- :mod:`~tinyhil.qemu.toolchains`: the QEMUCC and QCOMCL toolchains behind the compile-only targets.

This is a host tool behind the compiler seam, not a device model, so it lives in the core (which never imports
``tinyhil.emulators``).
"""

from __future__ import annotations

from tinyhil.qemu.compiler import QemuCompiler, shutdown_servers
from tinyhil.qemu.protocol import CompileServerError, CompileServerTimeout, Status
from tinyhil.qemu.runner import GuestRunner, Rootfs, find_runner
from tinyhil.qemu.server import CompileServer

__all__ = [
    "CompileServer",
    "CompileServerError",
    "CompileServerTimeout",
    "GuestRunner",
    "QemuCompiler",
    "Rootfs",
    "Status",
    "find_runner",
    "shutdown_servers",
]
