"""Root file systems for the compile server: built from Debian packages, or fetched from a pinned archive.

The tcc rootfs is built from the Debian archive without root and without a chroot: ``apt-get download`` of the
packages for the guest's Debian architecture (which ``dpkg --add-architecture`` must have enabled), ``dpkg-deb -x``
of each into one tree, then a deterministic tar archive of that tree (sorted, owner 0, fixed times) so that the
same packages give the same sha256. While building it:

- absolute symbolic links (``libc6-dev`` ships ``libm.so -> /lib/...``) become relative ones: an absolute link in
  an archive is refused by tar's ``data`` filter, and a relative one resolves the same inside the tree;
- documentation, locales, gconv modules and static libraries are left out (the compiler needs none of them);
- setuid and setgid bits are cleared (a compiler needs none, and the cache refuses them).

The archive lands in the artifact cache once (``rootfs/<name>.tar``); :func:`tinyhil.cache.fetch` then extracts
it once, keyed by its sha256, for every process.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from tinyhil._files import replacing, write_atomically
from tinyhil.cache import ArtifactError, cache_dir, cache_lock, fetch, file_sha256
from tinyhil.qemu.runner import Rootfs

__all__ = [
    "ARCH2DEBIAN",
    "TCC_ROOTFS_PACKAGES",
    "build_rootfs_archive",
    "debian_rootfs",
    "debian_rootfs_reason",
    "pinned_rootfs",
    "relativize_symlinks",
]

ARCH2DEBIAN: Final = {"aarch64": "arm64"}
# tcc itself; the C library it links against; the headers and start files the compile server is built with.
TCC_ROOTFS_PACKAGES: Final = ("tcc", "libc6", "libc6-dev", "linux-libc-dev")
ROOTFS_RECIPE_VERSION: Final = 1  # bump when the recipe changes, so caches rebuild
DROPPED_PATHS: Final = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian")
DROPPED_GLOBS: Final = ("usr/lib/*/gconv", "usr/lib/*/*.a", "usr/share/gdb")
KEPT_STATIC_LIBS: Final = ("libc_nonshared.a",)  # libc.so's linker script names it
APT_TIMEOUT_S: Final = 600.0
_SPECIAL_MODE_BITS: Final = stat.S_ISUID | stat.S_ISGID


def relativize_symlinks(tree: Path) -> int:
    """Rewrite every absolute symbolic link under ``tree`` as the relative link to the same place in the tree.

    Returns the number of links rewritten.
    """
    count = 0
    for link in sorted(p for p in tree.rglob("*") if p.is_symlink()):
        target = os.readlink(link)
        if not target.startswith("/"):
            continue
        inside = tree / target.lstrip("/")
        link.unlink()
        link.symlink_to(os.path.relpath(inside, link.parent))
        count += 1
    return count


def _trim(tree: Path) -> None:
    doomed = [tree / p for p in DROPPED_PATHS] + [p for g in DROPPED_GLOBS for p in tree.glob(g)]
    for path in doomed:
        if path.name in KEPT_STATIC_LIBS:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def _normalized(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    info.mode &= ~_SPECIAL_MODE_BITS
    return info


def build_rootfs_archive(debs: Sequence[Path], out: Path) -> None:
    """Unpack ``debs`` into one tree and write it to ``out`` as a deterministic, cache-safe tar archive.

    Raises:
        ArtifactError: ``dpkg-deb`` is missing or failed on a package.
    """
    dpkg_deb = shutil.which("dpkg-deb")
    if dpkg_deb is None:
        raise ArtifactError("dpkg-deb not found on PATH (Debian package dpkg); it unpacks the rootfs packages")
    with tempfile.TemporaryDirectory(prefix="tinyhil-rootfs-") as scratch:
        tree = Path(scratch) / "tree"
        tree.mkdir()
        for deb in debs:
            done = subprocess.run([dpkg_deb, "-x", str(deb), str(tree)], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise ArtifactError(f"dpkg-deb -x {deb} failed: {done.stderr.strip()}")
        _trim(tree)
        relativize_symlinks(tree)
        with replacing(out) as partial, tarfile.open(fileobj=partial, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(tree.rglob("*"), key=lambda p: p.relative_to(tree).parts):
                tar.add(path, arcname=str(path.relative_to(tree)), recursive=False, filter=_normalized)


def debian_rootfs_reason(arch: str, packages: Sequence[str] = TCC_ROOTFS_PACKAGES) -> str | None:
    """``None`` when the rootfs is built already or can be built here (cheap: no download), else why not."""
    if _archive_path(arch, packages).is_file():
        return None
    debian_arch = ARCH2DEBIAN.get(arch)
    if debian_arch is None:
        return f"no Debian architecture known for arch={arch!r} (known: {sorted(ARCH2DEBIAN)})"
    missing = [tool for tool in ("apt-get", "dpkg", "dpkg-deb") if shutil.which(tool) is None]
    if missing:
        return f"the rootfs is not built yet and building it needs {', '.join(missing)} (Debian/Ubuntu tools)"
    done = subprocess.run(["dpkg", "--print-foreign-architectures"], capture_output=True, text=True, check=False)
    if debian_arch not in done.stdout.split() and debian_arch != _native_debian_arch():
        return (
            f"the rootfs is not built yet and Debian architecture {debian_arch} is not enabled "
            f"(run: dpkg --add-architecture {debian_arch} && apt-get update)"
        )
    return None


def _native_debian_arch() -> str:
    done = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def _archive_path(arch: str, packages: Sequence[str]) -> Path:
    name = "-".join(["debian", ARCH2DEBIAN.get(arch, arch), *packages, f"r{ROOTFS_RECIPE_VERSION}"])
    return cache_dir() / "rootfs" / f"{name}.tar"


def debian_rootfs(arch: str, packages: Sequence[str] = TCC_ROOTFS_PACKAGES) -> Rootfs:
    """The rootfs of Debian ``packages`` for ``arch``: built once per user (downloads on first use), extracted once.

    Raises:
        ArtifactError: a tool is missing, or downloading or unpacking the packages failed.
    """
    archive = _archive_path(arch, packages)
    if not archive.is_file():
        reason = debian_rootfs_reason(arch, packages)
        if reason is not None:
            raise ArtifactError(reason)
        with cache_lock(archive.stem):
            if not archive.is_file():
                _download_and_build(ARCH2DEBIAN[arch], packages, archive)
    sidecar = archive.with_name(archive.name + ".sha256")
    digest = sidecar.read_text().strip() if sidecar.is_file() else ""
    if not digest:  # an archive from before sidecars, or a build interrupted between the two renames
        digest = file_sha256(archive)
        write_atomically(sidecar, digest)
    return Rootfs(fetch(archive, sha256=digest, extract=True), str(archive), digest)


def _download_and_build(debian_arch: str, packages: Sequence[str], archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tinyhil-debs-") as scratch:
        wanted = [f"{package}:{debian_arch}" for package in packages]
        try:
            done = subprocess.run(
                ["apt-get", "download", *wanted],
                cwd=scratch,
                capture_output=True,
                text=True,
                timeout=APT_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ArtifactError(f"apt-get download {' '.join(wanted)} ran longer than {APT_TIMEOUT_S} s") from None
        debs = sorted(Path(scratch).glob("*.deb"))
        if done.returncode != 0 or len(debs) != len(packages):
            raise ArtifactError(f"apt-get download {' '.join(wanted)} failed: {done.stderr.strip()}")
        build_rootfs_archive(debs, archive)
    write_atomically(archive.with_name(archive.name + ".sha256"), file_sha256(archive))


def pinned_rootfs(url_or_path: str, sha256: str) -> Rootfs:
    """A rootfs archive given by the user (local path or URL), checked against ``sha256`` and extracted once.

    Raises:
        ChecksumMismatch, UnsafeArchive, ArtifactError: see :func:`tinyhil.cache.fetch`.
    """
    return Rootfs(fetch(url_or_path, sha256=sha256, extract=True), url_or_path, sha256.lower())
