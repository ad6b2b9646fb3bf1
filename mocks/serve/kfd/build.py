"""Building the ``LD_PRELOAD`` library (``interpose.c``) with the system C compiler, once per source and compiler.

The library lands in the artifact cache (:func:`tinyhil.cache.cache_dir`) at
``serve-kfd/<key>/libtinyhil-kfd.so``, where ``key`` hashes the source, the compiler's path and its ``--version``
line, so an edited source or another compiler builds afresh and an unchanged one is reused. The compiler is
``$CC`` when set, else ``cc``, else ``gcc``; without one :class:`~tinyhil.errors.TargetUnavailable` names the
Debian package that provides it.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Final

from tinyhil.cache import cache_dir, cache_lock
from tinyhil.errors import TargetUnavailable

__all__ = ["COMPILER_PACKAGE", "LIBRARY_NAME", "SOURCE_NAME", "build_interposer", "compiler", "interposer_source"]

SOURCE_NAME: Final = "interpose.c"
LIBRARY_NAME: Final = "libtinyhil-kfd.so"
COMPILER_PACKAGE: Final = "gcc"  # the Debian package that provides cc
_KEY_CHARS: Final = 16
_COMPILERS: Final = ("cc", "gcc")
_FLAGS: Final = ("-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror")
_LIBS: Final = ("-ldl",)  # dlsym lives in libc from glibc 2.34; older ones need libdl
_BUILD_TIMEOUT_S: Final = 120
_SERVED: Final = "tinyhil serve kfd"


def interposer_source() -> bytes:
    """The C source of the interposer, as shipped in this package."""
    return importlib.resources.files(__package__).joinpath(SOURCE_NAME).read_bytes()


def compiler() -> str | None:
    """The C compiler to build with (``$CC``, else ``cc``, else ``gcc``), or ``None`` when there is none."""
    wanted = os.environ.get("CC")
    names = (wanted,) if wanted else _COMPILERS
    return next((found for name in names if (found := shutil.which(name))), None)


def _version(cc: str) -> str:
    try:
        done = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S, check=False)
    except OSError:
        return ""
    return done.stdout.splitlines()[0] if done.stdout else ""


def build_interposer(target: str = "MOCKKFD+AMD") -> Path:
    """The interposer library, built on first use and cached (see the module docstring).

    Raises:
        TargetUnavailable: no C compiler (the message names the Debian package), or the build failed (the message
            carries the compiler's first error lines).
    """
    cc = compiler()
    if cc is None:
        wanted = os.environ.get("CC")
        which = f"CC={wanted!r} is not on PATH" if wanted else "no C compiler (cc or gcc) is on PATH"
        raise TargetUnavailable(target, f"{_SERVED} builds its LD_PRELOAD library from source and {which}; "
                                        f"install the Debian package {COMPILER_PACKAGE}")  # fmt: skip
    source = interposer_source()
    key = hashlib.sha256(source + cc.encode() + _version(cc).encode()).hexdigest()[:_KEY_CHARS]
    library = cache_dir() / "serve-kfd" / key / LIBRARY_NAME
    if library.is_file():
        return library
    with cache_lock(f"serve-kfd-{key}"):
        if not library.is_file():
            _compile(target, cc, source, library)
    return library


def _compile(target: str, cc: str, source: bytes, library: Path) -> None:
    library.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=library.parent, prefix=".build-") as work:
        source_path = Path(work) / SOURCE_NAME
        source_path.write_bytes(source)
        built = Path(work) / LIBRARY_NAME
        command = [cc, *_FLAGS, "-o", str(built), str(source_path), *_LIBS]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TargetUnavailable(target, f"{_SERVED}: running {cc} failed: {exc}") from None
        if done.returncode != 0:
            errors = " | ".join(done.stderr.strip().splitlines()[:3]) or f"exit status {done.returncode}"
            raise TargetUnavailable(target, f"{_SERVED}: {cc} could not build {SOURCE_NAME}: {errors}")
        os.replace(built, library)
