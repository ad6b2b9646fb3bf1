"""The artifact cache: downloads and archive extractions shared by every tinyhil process of a user.

Layout under :func:`cache_dir` (``$TINYHIL_CACHE``, else ``$XDG_CACHE_HOME/tinyhil``, else ``~/.cache/tinyhil``)::

    downloads/<url hash>/<file name>         a fetched URL, renamed into place once complete and verified
    downloads/<url hash>/<file name>.sha256  the digest it was verified against
    extracted/<archive sha256>/              an archive's tree, renamed into place once complete
    locks/<name>.lock                        advisory locks for expensive builds (:func:`cache_lock`)

Every entry appears by one ``rename`` of a complete temporary sibling (a dot file), so a reader never sees a partial
file or tree, and concurrent processes need no lock: the loser of a rename race uses the winner's copy and deletes
its own. Archives are vetted member by member before anything is written (:mod:`tinyhil._archive` lists the
rules), never trusting tarfile's own filters, and extracted into a private ``.tmp-*`` directory that becomes the entry
only when complete. Their size and member count are bounded: :data:`MAX_ARCHIVE_BYTES` (``$TINYHIL_CACHE_MAX_BYTES``,
or ``fetch(..., max_bytes=N)``) and :data:`MAX_ARCHIVE_MEMBERS` (``$TINYHIL_CACHE_MAX_MEMBERS``, ``max_members=N``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

from tinyhil._archive import (
    MAX_ARCHIVE_BYTES,
    MAX_ARCHIVE_MEMBERS,
    MAX_BYTES_ENV,
    MAX_MEMBERS_ENV,
    ArchiveLimits,
    ArtifactError,
    UnsafeArchive,
    extract_archive,
)
from tinyhil._files import replacing, write_atomically
from tinyhil.errors import InvalidArgument

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "MAX_ARCHIVE_MEMBERS",
    "MAX_BYTES_ENV",
    "MAX_MEMBERS_ENV",
    "ArtifactError",
    "ChecksumMismatch",
    "UnsafeArchive",
    "cache_dir",
    "cache_lock",
    "fetch",
    "file_sha256",
]

CACHE_ENV: Final = "TINYHIL_CACHE"
DOWNLOAD_TIMEOUT_S: Final = 120.0
_CHUNK_BYTES: Final = 1 << 20
_URL_SCHEMES: Final = ("http", "https", "file")
_SHA256_RE: Final = re.compile(r"[0-9a-f]{64}")
_SHA256_SIDECAR_BYTES: Final = 64 + 1  # the hex digest and its newline
_URL_KEY_CHARS: Final = 16
_TMP_PREFIX: Final = ".tmp-"


class ChecksumMismatch(ArtifactError):
    """An artifact's sha256 is not the expected one; the artifact was not kept."""

    def __init__(self, source: str, expected: str, actual: str) -> None:
        super().__init__(f"{source}: sha256={actual}, expected {expected}; the artifact was not kept")
        self.source = source
        self.expected = expected
        self.actual = actual


def cache_dir() -> Path:
    """The per-user cache directory (created on demand by the functions that write to it)."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"  # XDG: ignore relative values
    return base / "tinyhil"


@contextlib.contextmanager
def cache_lock(name: str) -> Iterator[None]:
    """Hold an exclusive advisory lock named ``name`` across processes (for builds too costly to race)."""
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise InvalidArgument(f"name={name!r}, expected letters, digits, '.', '_' or '-'")
    folder = cache_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of a file's contents, as 64 lowercase hex digits."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(
    url_or_path: str | os.PathLike[str],
    sha256: str | None = None,
    extract: bool = False,
    *,
    max_bytes: int | None = None,
    max_members: int | None = None,
) -> Path:
    """Return a local path for an artifact, downloading, verifying and extracting it once per user.

    ``url_or_path`` is a local path or an ``http``, ``https`` or ``file`` URL. A URL is downloaded into the cache;
    a local path is used where it is. With ``sha256`` the artifact must have that digest. With ``extract=True``
    the artifact is a tar archive (optionally gzip, bzip2 or xz compressed) and the result is the directory it
    extracts to, shared by every process that asks for the same archive contents. ``max_bytes`` (the archive's
    uncompressed size) and ``max_members`` bound a new extraction; unset, they come from ``$TINYHIL_CACHE_MAX_BYTES``
    and ``$TINYHIL_CACHE_MAX_MEMBERS``, else :data:`MAX_ARCHIVE_BYTES` and :data:`MAX_ARCHIVE_MEMBERS`.

    Raises:
        InvalidArgument: malformed ``sha256``, unsupported URL scheme, or a limit (or its variable) not a positive int.
        ChecksumMismatch: the artifact's digest differs from ``sha256`` (names both digests).
        UnsafeArchive: a member breaks a vetting rule (absolute, escapes the tree through ``..`` or links, a device,
            fifo or sparse file, setuid/setgid/sticky, too long or deep), or the archive exceeds a limit; the
            message names the member, the rule, and for a limit how to raise it.
        ArtifactError: the download failed, the archive is corrupt, or the tree could not be written.
    """
    expected = _check_sha256(sha256)
    limits = ArchiveLimits.resolve(max_bytes, max_members)
    text = os.fspath(url_or_path)
    scheme = "" if isinstance(url_or_path, os.PathLike) else urllib.parse.urlsplit(text).scheme
    if scheme:
        if scheme not in _URL_SCHEMES:
            raise InvalidArgument(f"url_or_path={text!r}, expected a local path or a {'/'.join(_URL_SCHEMES)} URL")
        if extract and expected is not None and (tree := _extracted_path(expected)).is_dir():
            return tree
        artifact = _download(text, expected)
    else:
        artifact = Path(text).expanduser().resolve()
        if extract and expected is not None and (tree := _extracted_path(expected)).is_dir():
            return tree
        if not artifact.is_file():
            raise ArtifactError(f"url_or_path={text!r}: no such file")
        if expected is not None:
            actual = file_sha256(artifact)
            if actual != expected:
                raise ChecksumMismatch(text, expected, actual)
    if not extract:
        return artifact
    return _extract(artifact, expected or file_sha256(artifact), limits)


def _check_sha256(sha256: str | None) -> str | None:
    if sha256 is None:
        return None
    if not isinstance(sha256, str) or not _SHA256_RE.fullmatch(sha256.lower()):
        raise InvalidArgument(f"sha256={sha256!r}, expected 64 hexadecimal digits")
    return sha256.lower()


def _extracted_path(digest: str) -> Path:
    return cache_dir() / "extracted" / digest


def _download(url: str, expected: str | None) -> Path:
    url_key = hashlib.sha256(url.encode()).hexdigest()[:_URL_KEY_CHARS]
    name = Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path)).name or "download"
    folder = cache_dir() / "downloads" / url_key
    target = folder / name
    sidecar = folder / f"{name}.sha256"
    if target.is_file() and sidecar.is_file():
        recorded = _read_sidecar(sidecar)
        if recorded is not None and (expected is None or recorded == expected):
            return target
    with replacing(target) as handle:  # renamed into place after its sidecar, once verified
        actual = _copy_url(url, handle)
        if expected is not None and actual != expected:
            raise ChecksumMismatch(url, expected, actual)
        write_atomically(sidecar, actual)
    return target


def _read_sidecar(path: Path) -> str | None:
    """The digest a download was verified against, or ``None`` when the sidecar is damaged (the URL is fetched
    again): read no further than a digest and a newline."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(_SHA256_SIDECAR_BYTES + 1).decode("ascii", "replace").strip()
    except OSError:
        return None
    return text if _SHA256_RE.fullmatch(text) else None


def _copy_url(url: str, out: BinaryIO) -> str:
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
            while chunk := response.read(_CHUNK_BYTES):
                digest.update(chunk)
                out.write(chunk)
    except OSError as exc:  # URLError, HTTPError, timeouts and local file errors are all OSErrors
        raise ArtifactError(f"downloading {url} failed: {exc}") from exc
    return digest.hexdigest()


def _extract(archive: Path, digest: str, limits: ArchiveLimits) -> Path:
    target = _extracted_path(digest)
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=f"{_TMP_PREFIX}{digest[:_URL_KEY_CHARS]}-"))
    try:
        tree = scratch / "tree"
        extract_archive(archive, tree, scratch / "archive.tar", limits)
        try:
            os.rename(tree, target)  # atomic; fails when another process already renamed its complete tree
        except OSError as exc:
            if not target.is_dir():
                raise ArtifactError(f"moving the extracted tree of {archive} to {target} failed: {exc}") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # the decompressed archive, and the loser's or a partial tree
    return target
