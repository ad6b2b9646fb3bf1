"""Building the guest compile server (``ccserver.c``) with the rootfs' own tcc, under the guest runner.

What works, found by trying (Debian bookworm, tcc 0.9.27+git20200814, qemu-user 7.2, no binfmt_misc):

- ``tcc -c`` under ``qemu-aarch64-static -L ROOTFS`` compiles C to aarch64 objects; tcc finds its headers under
  ``/usr/lib/aarch64-linux-gnu/tcc/include`` and the libc headers in ``/usr/include``, both through ``-L``.
- A server cannot run ``tcc`` per request: without binfmt_misc a process under qemu-user cannot ``execve``
  another aarch64 binary. The server must contain the compiler: libtcc.
- Debian's ``libtcc.a`` (package libtcc-dev) is built by gcc and uses ``R_AARCH64_LDST32_ABS_LO12_NC``
  relocations, which tcc's arm64 linker rejects ("Unknown relocation type for got: 285"), so tcc can neither link
  it nor ``-run`` it, and no aarch64 binutils are assumed on the host.
- So the server is compiled *together with* tcc's library from the Debian source package of the same version
  (``#include "libtcc.c"``, a ONE_SOURCE build), by the rootfs' tcc, and linked against the rootfs' glibc with the
  start files of libc6-dev. That takes about half a second under qemu, once; the binary is cached, keyed by the
  rootfs sha256, this file's recipe, the server source and the tcc source sha256.
- The server writes each object to a memfd and reads it back (libtcc writes only to named files), so no file
  system is shared with the host.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from importlib import resources
from pathlib import Path
from typing import Final

from tinyhil.cache import ArtifactError, cache_dir, cache_lock, fetch
from tinyhil.qemu.runner import ARCH2ELF_MACHINE, GuestRunner, Rootfs

__all__ = [
    "SERVER_SOURCE_NAME",
    "TCC_SOURCE_ENV",
    "TCC_SOURCE_SHA256",
    "TCC_SOURCE_URL",
    "build_server",
    "elf_machine",
    "server_source",
]

SERVER_SOURCE_NAME: Final = "ccserver.c"
# The Debian source of the tcc in the rootfs (tcc 0.9.27+git20200814.62c30a4a-1, bookworm); digest from its .dsc.
TCC_SOURCE_URL: Final = "http://deb.debian.org/debian/pool/main/t/tcc/tcc_0.9.27+git20200814.62c30a4a.orig.tar.bz2"
TCC_SOURCE_SHA256: Final = "d63c113bcdd657f51c8ee197a0b0a24203603313e19a52b5f678d40ab7f5df35"
TCC_SOURCE_ENV: Final = "TINYHIL_TCC_SOURCE"  # "<path or URL> <sha256>" of another copy (a mirror, an offline file)
TCC_VERSION: Final = "0.9.27"
ARCH2TCC: Final = {"aarch64": ("TCC_TARGET_ARM64", "aarch64-linux-gnu")}
BUILD_RECIPE_VERSION: Final = 1
BUILD_TIMEOUT_S: Final = 300.0
SERVER_BINARY_NAME: Final = "tinyhil-ccserver"
_ELF_MAGIC: Final = b"\x7fELF"
_ELF_MACHINE_OFFSET: Final = 18  # e_machine: u16 after e_ident[16] and e_type
_KEY_CHARS: Final = 24
_OVERRIDE_FIELDS: Final = 2


def server_source() -> bytes:
    """The guest server's C source, shipped with tinyhil."""
    return (resources.files("tinyhil.qemu") / SERVER_SOURCE_NAME).read_bytes()


def elf_machine(binary: bytes) -> int | None:
    """The ELF ``e_machine`` of a little-endian ELF file, or ``None`` when ``binary`` is not one."""
    if len(binary) < _ELF_MACHINE_OFFSET + 2 or not binary.startswith(_ELF_MAGIC):
        return None
    return int.from_bytes(binary[_ELF_MACHINE_OFFSET : _ELF_MACHINE_OFFSET + 2], "little")


def _tcc_source() -> tuple[str, str]:
    override = os.environ.get(TCC_SOURCE_ENV, "").split()
    if not override:
        return TCC_SOURCE_URL, TCC_SOURCE_SHA256
    if len(override) != _OVERRIDE_FIELDS:
        raise ArtifactError(f"{TCC_SOURCE_ENV}={' '.join(override)!r}, expected '<path or URL> <sha256>'")
    return override[0], override[1]


def _config_h(triplet: str) -> str:
    return "\n".join(
        [
            "/* written by tinyhil.qemu.ccserver: what tcc's configure would write for Debian's tcc */",
            f'#define CONFIG_TCCDIR "/usr/lib/{triplet}/tcc"',
            f'#define CONFIG_TRIPLET "{triplet}"',
            f'#define TCC_VERSION "{TCC_VERSION}"',
            "#define GCC_MAJOR 0",
            "#define GCC_MINOR 0",
            "#define CC_NAME CC_tcc",
            "",
        ]
    )


def build_server(rootfs: Rootfs, runner: GuestRunner) -> Path:
    """The compile server binary for ``rootfs``, built on first use and cached (see the module docstring).

    Raises:
        ArtifactError: the tcc source could not be fetched, or tcc failed to build the server (its output attached).
    """
    if runner.arch not in ARCH2TCC:
        raise ArtifactError(f"no tcc target known for arch={runner.arch!r} (known: {sorted(ARCH2TCC)})")
    source = server_source()
    tcc_url, tcc_sha256 = _tcc_source()
    key_material = f"{BUILD_RECIPE_VERSION}\0{rootfs.sha256}\0{tcc_sha256}\0{runner.arch}\0".encode() + source
    key = hashlib.sha256(key_material).hexdigest()[:_KEY_CHARS]
    binary = cache_dir() / "qemu-servers" / key / SERVER_BINARY_NAME
    if binary.is_file():
        return binary
    with cache_lock(f"ccserver-{key}"):
        if not binary.is_file():
            _build(rootfs, runner, source, fetch(tcc_url, sha256=tcc_sha256, extract=True), binary)
    return binary


def _tcc_source_dir(tree: Path) -> Path:
    for candidate in (tree, *sorted(p for p in tree.iterdir() if p.is_dir())):
        if (candidate / "libtcc.c").is_file() and (candidate / "tcc.h").is_file():
            return candidate
    raise ArtifactError(f"the tcc source archive extracted to {tree} has no libtcc.c and tcc.h")


def _build(rootfs: Rootfs, runner: GuestRunner, source: bytes, tcc_tree: Path, binary: Path) -> None:
    target_macro, triplet = ARCH2TCC[runner.arch]
    tcc_dir = _tcc_source_dir(tcc_tree)
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tinyhil-ccserver-build-") as scratch:
        work = Path(scratch)
        (work / "config.h").write_text(_config_h(triplet))
        (work / SERVER_SOURCE_NAME).write_bytes(source)
        out = work / SERVER_BINARY_NAME
        args = [
            f"-D{target_macro}=1", "-DONE_SOURCE=1", f"-I{work}", f"-I{tcc_dir}",
            "-o", str(out), str(work / SERVER_SOURCE_NAME), "-lm",  # glibc >= 2.34 has dl and pthread in libc
        ]  # fmt: skip
        command = runner.command(rootfs, rootfs.tree / "usr" / "bin" / "tcc", args, mounts=[work, tcc_dir])
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ArtifactError(f"building the compile server ran longer than {BUILD_TIMEOUT_S} s") from None
        built = out.read_bytes() if out.is_file() else b""
        if done.returncode != 0 or elf_machine(built) != ARCH2ELF_MACHINE[runner.arch]:
            raise ArtifactError(
                f"building the compile server with {' '.join(command)} failed (exit status {done.returncode}):\n"
                f"{(done.stderr + done.stdout).strip()}"
            )
        partial = binary.with_name(f".tmp-{os.getpid()}-{binary.name}")
        partial.write_bytes(built)
        partial.chmod(0o755)
        os.replace(partial, binary)
