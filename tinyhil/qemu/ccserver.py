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
- No binary package ships tcc's source (tcc and libtcc-dev carry the compiler, its headers, ``libtcc.h`` and
  ``libtcc.a`` only), so the source comes from the source package, through the machine's own apt sources:
  ``apt-get source --download-only tcc=<version>`` (needs ``deb-src`` entries; no root), its ``.orig.tar.bz2``
  checked against the sha256 of Debian's ``.dsc`` and kept in the cache. No host is named here.
- The server writes each object to a memfd and reads it back (libtcc writes only to named files), so no file
  system is shared with the host.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import urllib.parse
from importlib import resources
from pathlib import Path
from typing import Final

from tinyhil._files import replacing
from tinyhil.cache import ArtifactError, ChecksumMismatch, cache_dir, cache_lock, fetch, file_sha256
from tinyhil.qemu.runner import ARCH2ELF_MACHINE, GuestRunner, Rootfs

__all__ = [
    "SERVER_SOURCE_NAME",
    "TCC_SOURCE_ARCHIVE",
    "TCC_SOURCE_ENV",
    "TCC_SOURCE_PACKAGE",
    "TCC_SOURCE_SHA256",
    "TCC_SOURCE_VERSION",
    "TccSourceUnavailable",
    "build_server",
    "elf_machine",
    "forget_apt_probe",
    "server_source",
    "tcc_source",
    "tcc_source_dir",
    "tcc_source_reason",
]

SERVER_SOURCE_NAME: Final = "ccserver.c"
# The Debian source package of the tcc in the rootfs (bookworm), fetched through the machine's apt sources; the
# digest of its upstream tarball is the one in the package's .dsc.
TCC_SOURCE_PACKAGE: Final = "tcc"
TCC_SOURCE_VERSION: Final = "0.9.27+git20200814.62c30a4a-1"
TCC_SOURCE_ARCHIVE: Final = "tcc_0.9.27+git20200814.62c30a4a.orig.tar.bz2"
TCC_SOURCE_SHA256: Final = "d63c113bcdd657f51c8ee197a0b0a24203603313e19a52b5f678d40ab7f5df35"
TCC_SOURCE_ENV: Final = "TINYHIL_TCC_SOURCE"  # "<path or URL> <sha256>" of another copy (an offline file)
APT_SOURCE_TIMEOUT_S: Final = 300.0
APT_PROBE_TIMEOUT_S: Final = 60.0
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


class TccSourceUnavailable(ArtifactError):
    """tcc's source could not be had: no override, nothing cached, and apt could not fetch the source package.

    The message carries apt's own words and how to get the source (the apt command, or :data:`TCC_SOURCE_ENV`).
    """

    def __init__(self, why: str) -> None:
        super().__init__(f"the tcc source is not available: {why}; {_HOW_TO_GET_SOURCE}")
        self.why = why


_APT_SOURCE_ARGS: Final = ("source", "--download-only", f"{TCC_SOURCE_PACKAGE}={TCC_SOURCE_VERSION}")
_HOW_TO_GET_SOURCE: Final = (
    f"it is Debian's source package {TCC_SOURCE_PACKAGE} {TCC_SOURCE_VERSION}, fetched with "
    f"'apt-get {' '.join(_APT_SOURCE_ARGS)}' through the machine's own apt sources, which needs deb-src entries: "
    "add deb-src to the Types: line of each /etc/apt/sources.list.d/*.sources file (or copy each 'deb' line of "
    "/etc/apt/sources.list as a 'deb-src' line) and run apt-get update (.ci/run does both); or set "
    f"{TCC_SOURCE_ENV}='<path or URL of {TCC_SOURCE_ARCHIVE}> <sha256>' "
    f"(this release's sha256 is {TCC_SOURCE_SHA256})"
)


def _override() -> tuple[str, str] | None:
    """``(path or URL, sha256)`` from :data:`TCC_SOURCE_ENV`, ``None`` when it is unset.

    Raises:
        ArtifactError: the variable is not two words.
    """
    override = os.environ.get(TCC_SOURCE_ENV, "").split()
    if not override:
        return None
    if len(override) != _OVERRIDE_FIELDS:
        raise ArtifactError(f"{TCC_SOURCE_ENV}={' '.join(override)!r}, expected '<path or URL> <sha256>'")
    return override[0], override[1]


def _apt_archive() -> Path:
    """Where the upstream tarball apt fetched is kept (it stays, like every download in the cache)."""
    return cache_dir() / "downloads" / "apt-source" / TCC_SOURCE_ARCHIVE


def _have_source() -> bool:
    """Whether the pinned source is in the cache already, as the tarball or its extracted tree."""
    return _apt_archive().is_file() or (cache_dir() / "extracted" / TCC_SOURCE_SHA256).is_dir()


def _apt_failure(done: subprocess.CompletedProcess[str]) -> str:
    """What ``apt-get`` said: its ``E:`` lines (not its progress), else its last line."""
    lines = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()
    said = "; ".join(line for line in lines if line.startswith("E:")) or lines[-1]
    return f"{' '.join(done.args)} failed (exit status {done.returncode}: {said})"


def _apt_reason() -> str | None:
    """Whether apt can fetch the source package (``--print-uris``: reads the package lists, downloads nothing)."""
    return _apt_reason_for(os.environ.get("PATH", ""), os.environ.get("APT_CONFIG", ""))


@functools.cache
def _apt_reason_for(path: str, apt_config: str) -> str | None:
    """:func:`_apt_reason`, remembered per ``PATH`` and ``APT_CONFIG``: the lists change only with apt-get update."""
    if shutil.which("apt-get", path=path) is None:
        return "apt-get is not installed (a Debian/Ubuntu tool)"
    args = ["apt-get", *_APT_SOURCE_ARGS[:1], "--print-uris", *_APT_SOURCE_ARGS[2:]]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=APT_PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return f"{' '.join(args)} ran longer than {APT_PROBE_TIMEOUT_S} s"
    if done.returncode != 0 or TCC_SOURCE_ARCHIVE not in done.stdout:
        return _apt_failure(done)
    return None


def forget_apt_probe() -> None:
    """Forget what apt answered, so that the next check asks again (after ``apt-get update`` changed its lists)."""
    _apt_reason_for.cache_clear()


def tcc_source_reason() -> str | None:
    """``None`` when :func:`tcc_source` can have the source here (cheap: downloads nothing), else why not and how.

    The override is checked first, then the cache, then whether apt can fetch the source package.
    """
    try:
        override = _override()
    except ArtifactError as exc:
        return str(exc)
    if override is not None:
        given = override[0]
        if not urllib.parse.urlsplit(given).scheme and not Path(given).expanduser().is_file():
            return f"{TCC_SOURCE_ENV} names {given!r}: no such file"
        return None
    if _have_source():
        return None
    why = _apt_reason()
    return None if why is None else str(TccSourceUnavailable(why))


def tcc_source() -> Path:
    """The extracted tcc source tree: the override's archive, else the Debian source package's upstream tarball.

    Raises:
        TccSourceUnavailable: no override, nothing cached, and apt could not fetch the source package.
        ChecksumMismatch: the tarball (the override's or apt's) does not have the expected sha256.
        ArtifactError: the override is malformed, or its file could not be had or extracted.
    """
    override = _override()
    if override is not None:
        return fetch(override[0], sha256=override[1], extract=True)
    archive = _apt_archive()
    if not _have_source():
        with cache_lock("tcc-source"):
            if not archive.is_file():
                _apt_download(archive)
    return fetch(archive, sha256=TCC_SOURCE_SHA256, extract=True)


def _apt_download(archive: Path) -> None:
    """``apt-get source --download-only`` into a scratch folder; keep the upstream tarball once its digest checks."""
    if shutil.which("apt-get") is None:
        raise TccSourceUnavailable("apt-get is not installed (a Debian/Ubuntu tool)")
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=archive.parent, prefix=".tmp-apt-") as scratch:
        command = ["apt-get", *_APT_SOURCE_ARGS]
        try:
            done = subprocess.run(
                command, cwd=scratch, capture_output=True, text=True, timeout=APT_SOURCE_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise TccSourceUnavailable(f"{' '.join(command)} ran longer than {APT_SOURCE_TIMEOUT_S} s") from None
        fetched = Path(scratch) / TCC_SOURCE_ARCHIVE
        if done.returncode != 0 or not fetched.is_file():
            raise TccSourceUnavailable(_apt_failure(done))
        actual = file_sha256(fetched)
        if actual != TCC_SOURCE_SHA256:
            raise ChecksumMismatch(f"{' '.join(command)}: {TCC_SOURCE_ARCHIVE}", TCC_SOURCE_SHA256, actual)
        os.replace(fetched, archive)


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
        TccSourceUnavailable: the tcc source is neither given, cached, nor fetchable through apt (says how to get it).
        ArtifactError: the tcc source could not be fetched, or tcc failed to build the server (its output attached).
    """
    if runner.arch not in ARCH2TCC:
        raise ArtifactError(f"no tcc target known for arch={runner.arch!r} (known: {sorted(ARCH2TCC)})")
    source = server_source()
    override = _override()
    tcc_sha256 = (override[1] if override is not None else TCC_SOURCE_SHA256).lower()
    key_material = f"{BUILD_RECIPE_VERSION}\0{rootfs.sha256}\0{tcc_sha256}\0{runner.arch}\0".encode() + source
    key = hashlib.sha256(key_material).hexdigest()[:_KEY_CHARS]
    binary = cache_dir() / "qemu-servers" / key / SERVER_BINARY_NAME
    if binary.is_file():
        return binary
    with cache_lock(f"ccserver-{key}"):
        if not binary.is_file():
            _build(rootfs, runner, source, tcc_source(), binary)
    return binary


def tcc_source_dir(tree: Path) -> Path:
    """The folder of an extracted tcc source ``tree`` (itself or a top folder) holding ``libtcc.c`` and ``tcc.h``."""
    for candidate in (tree, *sorted(p for p in tree.iterdir() if p.is_dir())):
        if (candidate / "libtcc.c").is_file() and (candidate / "tcc.h").is_file():
            return candidate
    raise ArtifactError(f"the tcc source archive extracted to {tree} has no libtcc.c and tcc.h")


def _build(rootfs: Rootfs, runner: GuestRunner, source: bytes, tcc_tree: Path, binary: Path) -> None:
    target_macro, triplet = ARCH2TCC[runner.arch]
    tcc_dir = tcc_source_dir(tcc_tree)
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
        with replacing(binary) as partial:
            partial.write(built)
            os.fchmod(partial.fileno(), 0o755)
