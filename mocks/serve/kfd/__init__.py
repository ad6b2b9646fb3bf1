"""``tinyhil serve kfd``: MOCKKFD served as ``/dev/kfd`` to processes that never import tinyhil (docs/serve.md).

The pieces: :mod:`~.build` compiles the ``LD_PRELOAD`` interposer (``interpose.c``) on first use; :mod:`~.tree`
renders the sysfs and ``/dev`` files it redirects to; :class:`KfdServer` answers its requests
(:mod:`~.protocol`) with MOCKKFD, over memfd-backed host memory (:class:`SharedMemory`), with a
:class:`DoorbellWatcher` ringing the doorbells the client stores.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from tinyhil.errors import InvalidArgument
from tinyhil.mocks.kfd import MockKFD
from tinyhil.mocks.serve.command import run_command
from tinyhil.mocks.serve.kfd.build import build_interposer
from tinyhil.mocks.serve.kfd.doorbells import DoorbellWatcher
from tinyhil.mocks.serve.kfd.server import KfdServer
from tinyhil.mocks.serve.kfd.shared import SharedMemory
from tinyhil.mocks.serve.kfd.tree import render_tree
from tinyhil.mocks.serve.options import parse_options
from tinyhil.mocks.targets import MOCKKFD_GPUS
from tinyhil.registry import default_registry

__all__ = [
    "ROOT_ENV",
    "SOCKET_ENV",
    "DoorbellWatcher",
    "KfdServer",
    "SharedMemory",
    "build_interposer",
    "open_served_machine",
    "serve_kfd",
    "served_environment",
]

SOCKET_ENV: Final = "TINYHIL_KFD_SOCKET"
ROOT_ENV: Final = "TINYHIL_KFD_ROOT"
_SERVED_TARGET: Final = "MOCKKFD+AMD"
_EXIT_NOT_FOUND: Final = 127  # what a shell answers for a command it cannot find


def open_served_machine(target: str, options: Mapping[str, Any]) -> tuple[MockKFD, SharedMemory]:
    """The MOCKKFD machine ``target`` (a ``MOCKKFD+AMD`` target string) and ``options`` describe, its host memory
    shared.

    Raises:
        InvalidArgument: not a MOCKKFD+AMD target, or a bad option (the registry's message).
    """
    resolved = default_registry().resolve(target)
    if resolved.definition.name != _SERVED_TARGET:
        raise InvalidArgument(f"--target {target!r}: tinyhil serve kfd serves {_SERVED_TARGET}[:n][:renderer[:arch]]")
    built = resolved.build_options(options)
    index = resolved.spec.index or 0
    count = built.gpus if built.gpus is not None else max(MOCKKFD_GPUS, index + 1)  # as MOCKKFD+AMD counts them
    if index >= count:
        raise InvalidArgument(f"--target {target!r}: GPU index {index}, expected < gpus={count}")
    memory = SharedMemory()
    kfd = MockKFD(gpus=count, arch=resolved.arch, seed=built.seed, vram_bytes=built.vram_bytes, faults=built.faults,
                  host_memory=memory.allocate)  # fmt: skip
    return kfd, memory


def served_environment(library: Path, socket_path: str, root: Path) -> dict[str, str]:
    """The environment of a served command: this one, with the interposer preloaded and told where to look."""
    preload = os.environ.get("LD_PRELOAD", "")
    return {**os.environ, "LD_PRELOAD": f"{library} {preload}".strip(), SOCKET_ENV: socket_path, ROOT_ENV: str(root)}


def serve_kfd(target: str, options: Sequence[str], command: Sequence[str]) -> int:
    """Run ``command`` with ``target`` (``options``: ``KEY=VALUE`` target options) as its ``/dev/kfd``; returns the
    command's exit status (127 when it cannot be run).

    Raises:
        TargetUnavailable: no C compiler to build the interposer with (the message names the Debian package).
        InvalidArgument: a bad target or option.
    """
    library = build_interposer(target)
    kfd, memory = open_served_machine(target, parse_options(options))
    with tempfile.TemporaryDirectory(prefix="tinyhil-kfd-") as work:
        root = Path(work) / "root"
        root.mkdir()
        render_tree(kfd.sysfs, root)
        socket_path = str(Path(work) / "kfd.sock")
        server = KfdServer(kfd, memory, socket_path)
        server.start()
        try:
            return run_command(command, served_environment(library, socket_path, root))
        except OSError as exc:
            print(f"tinyhil serve kfd: cannot run {command[0]!r}: {exc.strerror}", file=sys.stderr)
            return _EXIT_NOT_FOUND
        finally:
            server.stop()
