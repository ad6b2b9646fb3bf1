"""The host half of loading a program for the emulated GPUs' host-native executor: does its shared object load?

ROCr loads a code object on the host, before any dispatch runs it, and a code object that cannot load fails there
with the loader's message. The AMD runtime does the same at the first :meth:`~tinyhil.device.Device.exec` of a
program, so an unloadable kernel is reported as that, at the dispatch that used it, instead of as a queue that
stopped on the GPU (which MOCKKFD, like amdkfd, cannot report except as a wait that never ends).

The check is the executor's own load (``emulators/amdgpu/executor.py``): the shared object is loaded from memory
(``memfd_create`` + ``dlopen`` of ``/proc/self/fd/N``; elsewhere a temporary file deleted once loaded) and the entry
point looked up. As there, a loaded library stays loaded and its memfd stays open, so the dynamic loader never
mistakes a later library for it by name.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
from typing import Final

__all__ = ["load_error"]

_PROC_FD: Final = "/proc/self/fd"
# Shared objects that loaded, by SHA-256 of their bytes: the library and its memfd (-1: none), both kept open.
_LIBRARIES: dict[bytes, tuple[ctypes.CDLL, int]] = {}


def _load(shared_object: bytes, name: str) -> tuple[ctypes.CDLL, int]:
    if hasattr(os, "memfd_create") and os.path.isdir(_PROC_FD):
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
        try:
            with open(fd, "wb", closefd=False) as out:
                out.write(shared_object)
            return ctypes.CDLL(f"{_PROC_FD}/{fd}"), fd
        except BaseException:
            os.close(fd)  # nothing was loaded under its name
            raise
    with tempfile.NamedTemporaryFile(prefix=name, suffix=".so") as out:  # no memfd (macOS)
        out.write(shared_object)
        out.flush()
        return ctypes.CDLL(out.name), -1


def load_error(shared_object: bytes, entry: str) -> str | None:
    """Why ``shared_object`` cannot run ``entry`` on this host (the dynamic loader's message), or ``None``.

    A shared object that loaded once is not loaded again (cached by content for the life of the process).
    """
    digest = hashlib.sha256(shared_object).digest()
    loaded = _LIBRARIES.get(digest)
    if loaded is None:
        try:
            loaded = _LIBRARIES[digest] = _load(shared_object, f"tinyhil-check-{digest.hex()[:16]}")
        except OSError as error:
            return f"its shared object does not load: {error}"
    if not hasattr(loaded[0], entry):
        return f"entry point {entry!r} is not in its shared object"
    return None
