"""The artifact cache: downloads and archive extractions shared by every tinyhil process of a user.

Layout under :func:`cache_dir` (``$TINYHIL_CACHE``, else ``$XDG_CACHE_HOME/tinyhil``, else ``~/.cache/tinyhil``)::

    downloads/<url hash>/<file name>         a fetched URL, renamed into place once complete and verified
    downloads/<url hash>/<file name>.sha256  the digest it was verified against
    extracted/<archive sha256>/              an archive's tree, renamed into place once complete
    locks/<name>.lock                        advisory locks for expensive builds (:func:`cache_lock`)

Every entry appears by one ``rename`` of a complete temporary sibling (``.tmp-*``), so a reader never sees a partial
file or tree, and concurrent processes need no lock: the loser of a rename race uses the winner's copy and deletes
its own. Extraction applies tar's ``data`` filter (Python >= 3.11.4) and also refuses setuid/setgid members, which
that filter would only strip.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import lzma
import os
import re
import shutil
import stat
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

from tinyhil.errors import InvalidArgument, TinyHilError

__all__ = [
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
_URL_KEY_CHARS: Final = 16
_TMP_PREFIX: Final = ".tmp-"


class ArtifactError(TinyHilError, OSError):
    """A download or an extraction failed; nothing partial was left in the cache."""


class ChecksumMismatch(ArtifactError):
    """An artifact's sha256 is not the expected one; the artifact was not kept."""

    def __init__(self, source: str, expected: str, actual: str) -> None:
        super().__init__(f"{source}: sha256={actual}, expected {expected}; the artifact was not kept")
        self.source = source
        self.expected = expected
        self.actual = actual


class UnsafeArchive(ArtifactError):
    """An archive member is absolute, would escape the tree, or carries special powers (device, setuid)."""

    def __init__(self, archive: str, member: str, reason: str) -> None:
        super().__init__(f"{archive}: member {member!r} rejected: {reason}; nothing was extracted")
        self.archive = archive
        self.member = member
        self.reason = reason


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


def fetch(url_or_path: str | os.PathLike[str], sha256: str | None = None, extract: bool = False) -> Path:
    """Return a local path for an artifact, downloading, verifying and extracting it once per user.

    ``url_or_path`` is a local path or an ``http``, ``https`` or ``file`` URL. A URL is downloaded into the cache;
    a local path is used where it is. With ``sha256`` the artifact must have that digest. With ``extract=True``
    the artifact is a tar archive (optionally gzip, bzip2 or xz compressed) and the result is the directory it
    extracts to, shared by every process that asks for the same archive contents.

    Raises:
        InvalidArgument: malformed ``sha256`` or unsupported URL scheme.
        ChecksumMismatch: the artifact's digest differs from ``sha256`` (names both digests).
        UnsafeArchive: a member is absolute, escapes the tree (``..``, links), is a device or fifo, or setuid/setgid.
        ArtifactError: the download failed or the archive is corrupt.
    """
    expected = _check_sha256(sha256)
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
    return _extract(artifact, expected or file_sha256(artifact))


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
        recorded = sidecar.read_text().strip()
        if expected is None or recorded == expected:
            return target
    folder.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=folder, prefix=_TMP_PREFIX)
    try:
        with open(fd, "wb") as handle:
            actual = _copy_url(url, handle)
        if expected is not None and actual != expected:
            raise ChecksumMismatch(url, expected, actual)
        _write_atomically(sidecar, actual.encode())
        os.replace(partial, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise
    return target


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


def _write_atomically(path: Path, data: bytes) -> None:
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=_TMP_PREFIX, delete=False) as handle:
        handle.write(data)
    os.replace(handle.name, path)


def _extract(archive: Path, digest: str) -> Path:
    target = _extracted_path(digest)
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=f"{_TMP_PREFIX}{digest[:_URL_KEY_CHARS]}-"))
    try:
        _safe_extractall(archive, scratch)
        try:
            os.rename(scratch, target)  # atomic; fails when another process already renamed its complete tree
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # the loser's tree, or a partial one after an error
    return target


def _safe_extractall(archive: Path, dest: Path) -> None:
    data_filter = getattr(tarfile, "data_filter", None)
    if data_filter is None:  # added in 3.11.4; extracting without it would trust the archive
        raise ArtifactError(f"tarfile.data_filter is missing from this Python; refusing to extract {archive}")

    def member_filter(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        if member.name.startswith("/"):  # the data filter would strip the slash; the spec says reject
            raise UnsafeArchive(str(archive), member.name, "absolute path")
        if member.mode & (stat.S_ISUID | stat.S_ISGID):
            raise UnsafeArchive(str(archive), member.name, f"mode {member.mode:#o} has the setuid or setgid bit")
        try:
            filtered: tarfile.TarInfo | None = data_filter(member, path)
        except tarfile.FilterError as exc:
            raise UnsafeArchive(str(archive), member.name, f"{type(exc).__name__}: {exc}") from None
        return filtered

    try:
        with tarfile.open(archive, "r:*") as tar:
            tar.errorlevel = 2  # every extraction problem is an error, not a debug message
            tar.extractall(dest, filter=member_filter)
            # Read the compressed stream to its end: gzip, bzip2 and xz check their CRCs only there, and a tar
            # reader stops at the end-of-archive blocks.
            while tar.fileobj is not None and tar.fileobj.read(_CHUNK_BYTES):
                pass
    except UnsafeArchive:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError, zlib.error, lzma.LZMAError) as exc:
        raise ArtifactError(f"{archive} is corrupt or unreadable: {type(exc).__name__}: {exc}") from exc
