"""The compiler seam over a compile server in a foreign-architecture root file system.

Every :class:`QemuCompiler` with the same server command shares one :class:`CompileServer` per process: started
by the first compile, serving every later one, stopped by :func:`shutdown_servers` or when the process exits.
A QemuCompiler is plain configuration, so it pickles; in a pool worker it finds (or starts) that worker's own
server.

Parallel compilation (:func:`tinyhil.process_pool.compile_many`): by default the parent's one shared server compiles
every source in turn (``pool_fan_out = False``). ``per_worker_servers=True`` instead sends the sources to the
worker pool, where each worker starts its own server. ``benchmarks/bench_compile.py`` measures both; on a
2-core machine, 32 distinct kernels took 0.27 s on the shared server, 0.50-0.54 s with per-worker servers
started for the batch (worker and server start-ups dominate) and 0.16-0.18 s once they were warm (1.5-1.7x).
The shared server is the default: single ``Device.compile`` calls (the common case) go to it anyway, it costs
no extra start-ups, memory or processes, and under pytest-xdist each pool is small (usable CPUs divided by the
xdist workers: one here), so per-worker servers mostly add a process layer. Large repeated batches on machines
with idle cores should opt in to ``per_worker_servers=True``.
"""

from __future__ import annotations

import multiprocessing.util
import os
import threading
from collections.abc import Sequence
from typing import Final

from tinyhil.errors import InvalidArgument
from tinyhil.portable_kernel import with_portable_header
from tinyhil.qemu.ccserver import elf_machine
from tinyhil.qemu.protocol import CompileServerError
from tinyhil.qemu.server import DEFAULT_START_TIMEOUT_S, DEFAULT_TIMEOUT_S, CompileServer

__all__ = ["QemuCompiler", "shutdown_servers"]

_SHUTDOWN_PRIORITY: Final = 50  # multiprocessing finalizers run at exit in parents and in pool workers alike

_servers: dict[tuple[str, ...], CompileServer] = {}
_servers_lock = threading.Lock()
_finalizer: multiprocessing.util.Finalize | None = None


def _forget_inherited_servers() -> None:
    """In a forked child the parent's servers are the parent's: drop them (unclosed) so the child starts its own."""
    global _servers_lock, _finalizer
    _servers.clear()
    _servers_lock = threading.Lock()
    _finalizer = None


os.register_at_fork(after_in_child=_forget_inherited_servers)


def _shared_server(compiler: QemuCompiler) -> CompileServer:
    global _finalizer
    key = tuple(compiler.command)
    with _servers_lock:
        server = _servers.get(key)
        if server is None or server.closed:
            server = CompileServer(
                compiler.command,
                name=compiler.name,
                timeout_s=compiler.timeout_s,
                start_timeout_s=compiler.start_timeout_s,
            )
            _servers[key] = server
        if _finalizer is None:
            # atexit does not run in multiprocessing children; multiprocessing's own finalizers run in both.
            _finalizer = multiprocessing.util.Finalize(None, shutdown_servers, exitpriority=_SHUTDOWN_PRIORITY)
        return server


def shutdown_servers() -> None:
    """Stop every compile server this process started (the next compile starts a new one)."""
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.close()


class QemuCompiler:
    """Compiles through a compile server started by ``command`` (see :mod:`tinyhil.qemu.runner` for commands).

    ``elf_machine``, when given, is the ELF ``e_machine`` every output must have (183 for aarch64): a server that
    returns anything else is reported as broken rather than handing the caller a wrong binary.
    """

    pool_fan_out = False

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        *,
        elf_machine: int | None = None,
        portable_kernels: bool = False,
        per_worker_servers: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> None:
        if not name or not command:
            raise InvalidArgument(f"name={name!r}, command={command!r}, expected a name and a server command")
        for label, value in (("timeout_s", timeout_s), ("start_timeout_s", start_timeout_s)):
            if not value > 0:
                raise InvalidArgument(f"{label}={value!r}, expected a positive number of seconds")
        self._name = name
        self.command = list(command)
        self.elf_machine = elf_machine
        self.portable_kernels = portable_kernels  # a C compiler: sources get the portable kernel header in front
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.pool_fan_out = per_worker_servers

    def __repr__(self) -> str:
        return f"QemuCompiler({self._name!r}, per_worker_servers={self.pool_fan_out})"

    @property
    def name(self) -> str:
        return self._name

    @property
    def server(self) -> CompileServer:
        """This process's server for this compiler's command (created, not yet started, on first use)."""
        return _shared_server(self)

    def compile(self, source: bytes) -> bytes:
        """Compile ``source`` on the shared server.

        Raises:
            CompileError: the compiler rejected the source; its message is attached.
            CompileServerError: the server failed, timed out, or returned something that is not the expected ELF.
        """
        binary = self.server.compile(with_portable_header(source) if self.portable_kernels else source)
        if self.elf_machine is not None and elf_machine(binary) != self.elf_machine:
            raise CompileServerError(
                self._name,
                f"returned {binary[:20]!r}... with e_machine={elf_machine(binary)}, expected an ELF object with "
                f"e_machine={self.elf_machine}",
            )
        return binary
