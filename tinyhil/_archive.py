"""Vetted tar extraction for the artifact cache: every member is checked before anything is written.

tarfile's own ``data`` filter is not trusted: before CPython 3.11.13/3.12.11 it decides with ``os.path.realpath``,
which stops resolving once a path exceeds ``PATH_MAX``, so a chain of symbolic links through deep directories could
write outside the tree (gh-135034, CVE-2025-4517), and a header with a negative size sent ``tarfile`` back to an
earlier header forever (CVE-2025-8194). Here the whole archive is read and judged first, by path arithmetic alone
over the set of members, then extracted by this module (never by ``extractall``):

- a name or link target is at most :data:`MAX_NAME_BYTES` bytes, :data:`MAX_DEPTH` components of at most
  :data:`MAX_COMPONENT_BYTES` bytes each, with no NUL; it is relative, and ``..`` never climbs above the tree;
- members are regular files, directories, symbolic links or hard links: no devices, fifos, sparse files or
  unknown types, and no setuid, setgid or sticky bit; each name appears once (a directory may repeat);
- no member lies below a symbolic link or a non-directory member (so no write is ever redirected);
- a symbolic link's target, resolved against the tree and through every other link in the archive (at most
  :data:`MAX_SYMLINK_HOPS` deep), stays inside the tree; a hard link names a regular file earlier in the archive;
- the uncompressed archive is at most ``max_bytes`` and holds at most ``max_members`` members
  (:class:`ArchiveLimits`); headers must move strictly forward, and extended headers are small and few in a row.

Extraction then creates the directories, the files and hard links (opened ``O_EXCL | O_NOFOLLOW``), and only last
the symbolic links, so no write can pass through a link even if a rule above had a gap.
"""

from __future__ import annotations

import bz2
import contextvars
import enum
import gzip
import io
import lzma
import os
import shutil
import stat
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Self

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument, TinyHilError

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "MAX_ARCHIVE_MEMBERS",
    "MAX_BYTES_ENV",
    "MAX_COMPONENT_BYTES",
    "MAX_DEPTH",
    "MAX_MEMBERS_ENV",
    "MAX_NAME_BYTES",
    "MAX_SYMLINK_HOPS",
    "ArchiveLimits",
    "ArtifactError",
    "UnsafeArchive",
    "extract_archive",
]

MAX_ARCHIVE_BYTES: Final = 4 << 30  # default bound on an archive's uncompressed size (headers and data)
MAX_ARCHIVE_MEMBERS: Final = 250_000  # default bound on its member count
MAX_BYTES_ENV: Final = "TINYHIL_CACHE_MAX_BYTES"
MAX_MEMBERS_ENV: Final = "TINYHIL_CACHE_MAX_MEMBERS"
MAX_NAME_BYTES: Final = 1024  # a member name or link target; far below PATH_MAX (4096) even under a long cache path
MAX_COMPONENT_BYTES: Final = 255  # NAME_MAX
MAX_DEPTH: Final = 64  # components of a name, a link target, or a resolved link
MAX_SYMLINK_HOPS: Final = 40  # Linux's MAXSYMLINKS
_MAX_EXTENDED_HEADER_BYTES: Final = 1 << 16  # a pax or GNU long-name header (names are at most 1 KiB)
_MAX_HEADER_CHAIN: Final = 8  # extended headers in a row before one member (tarfile recurses through them)
_MTIME_LIMIT_S: Final = 1 << 34  # mtimes beyond the year 2514 are corrupt
_CHUNK_BYTES: Final = 1 << 20

_REGULAR_TYPES: Final = frozenset({tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE})
_PAX_TYPES: Final = frozenset({tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE})
_EXTENDED_TYPES: Final = _PAX_TYPES | {tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK}
_TYPE2NAME: Final = {
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a fifo",
}
_SPECIAL_MODE_BITS: Final = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
# The data filter's file modes: no group/other write; no execute bits unless the owner's; the owner reads and writes.
_FILE_MODE_MASK: Final = stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
_EXEC_BITS: Final = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
_OWNER_RW: Final = stat.S_IRUSR | stat.S_IWUSR
_CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_MAGIC2OPEN: Final[dict[bytes, Callable[[Path], io.BufferedIOBase]]] = {
    b"\x1f\x8b": gzip.GzipFile,
    b"BZh": bz2.BZ2File,
    b"\xfd7zXZ\x00": lzma.LZMAFile,
}
# What tarfile and the decompressors raise on malformed or truncated input (bz2's and gzip's are OSErrors).
_CORRUPT_ERRORS: Final = (tarfile.TarError, EOFError, OSError, ValueError, OverflowError, LookupError, zlib.error,
                          lzma.LZMAError)  # fmt: skip
# Archives the cache does not extract, by their magic bytes: refused by name rather than as a corrupt tar.
_FOREIGN_MAGICS: Final = {b"PK\x03\x04": "a zip archive", b"PK\x05\x06": "an empty zip archive",
                          b"7z\xbc\xaf\x27\x1c": "a 7z archive", b"(\xb5/\xfd": "a zstd stream"}  # fmt: skip


class ArtifactError(TinyHilError, OSError):
    """A download or an extraction failed; nothing partial was left in the cache."""


class UnsafeArchive(ArtifactError):
    """An archive member breaks a vetting rule (escapes the tree, special file, over a limit); nothing was extracted."""

    def __init__(self, archive: str, member: str, reason: str) -> None:
        where = f"member {member!r} rejected" if member else "rejected"
        super().__init__(f"{archive}: {where}: {reason}; nothing was extracted")
        self.archive = archive
        self.member = member
        self.reason = reason

    def __reduce__(self) -> tuple[type[UnsafeArchive], tuple[str, str, str]]:
        return type(self), (self.archive, self.member, self.reason)


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    """Bounds on one extraction: ``max_bytes`` of uncompressed archive and ``max_members`` members."""

    max_bytes: int = MAX_ARCHIVE_BYTES
    max_members: int = MAX_ARCHIVE_MEMBERS

    def __post_init__(self) -> None:
        check_int("max_bytes", self.max_bytes, min_value=1)
        check_int("max_members", self.max_members, min_value=1)

    @classmethod
    def resolve(cls, max_bytes: int | None, max_members: int | None) -> ArchiveLimits:
        """The limits for one call: the argument if given, else the environment variable, else the default.

        Raises:
            InvalidArgument: an argument or environment value is not a positive integer.
        """
        return cls(
            _limit("max_bytes", max_bytes, MAX_BYTES_ENV, MAX_ARCHIVE_BYTES),
            _limit("max_members", max_members, MAX_MEMBERS_ENV, MAX_ARCHIVE_MEMBERS),
        )


def _limit(name: str, value: int | None, env: str, default: int) -> int:
    if value is not None:
        return check_int(name, value, min_value=1)
    text = os.environ.get(env, "").strip()
    if not text:
        return default
    try:
        number = int(text, 10)
    except ValueError:
        number = 0
    if number < 1:
        raise InvalidArgument(f"{env}={text!r}, expected a positive integer (the {name} for archive extraction)")
    return number


def _over_limit(archive: Path, member: str, what: str, name: str, limit: int, env: str) -> UnsafeArchive:
    return UnsafeArchive(
        str(archive),
        member,
        f"{what} exceeds {name}={limit} ({limit:#x}); if the archive is trusted, raise the limit with "
        f"fetch(..., {name}=N) or {env}=N",
    )


class _Refused(Exception):
    """A vetting rule failed; ``member`` is set when the culprit is not the member being added."""

    def __init__(self, reason: str, member: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.member = member


_Parts = tuple[str, ...]  # a path inside the tree, one component per item; () is the tree itself
_SPARSE_REASON: Final = "is a sparse file, expected a regular file, directory or link"
_header_chain: contextvars.ContextVar[int] = contextvars.ContextVar("_header_chain", default=0)


class _VettedTarInfo(tarfile.TarInfo):
    """tarfile's header parser, refusing per header block what it would otherwise read without bound."""

    @classmethod
    def frombuf(cls, buf: bytes | bytearray, encoding: str, errors: str) -> Self:
        info = super().frombuf(buf, encoding, errors)
        if info.type == tarfile.GNUTYPE_SPARSE:  # its extension blocks are read in a loop with no bound
            raise _Refused(_SPARSE_REASON, info.name)
        if info.type in _EXTENDED_TYPES and not 0 <= info.size <= _MAX_EXTENDED_HEADER_BYTES:
            raise _Refused(
                f"extended header of {info.size:#x} bytes, expected at most {_MAX_EXTENDED_HEADER_BYTES:#x}", info.name
            )
        return info

    @classmethod
    def fromtarfile(cls, tar: tarfile.TarFile) -> Self:
        depth = _header_chain.get()
        if depth > _MAX_HEADER_CHAIN:  # tarfile recurses once per extended header before the member it describes
            raise _Refused(f"more than {_MAX_HEADER_CHAIN} extended headers in a row before one member")
        start = tar.fileobj.tell()
        header = cls.frombuf(tar.fileobj.read(tarfile.BLOCKSIZE), tar.encoding, tar.errors)
        if header.type in _PAX_TYPES and b"GNU.sparse." in tar.fileobj.read(header.size):
            raise _Refused(_SPARSE_REASON, header.name)  # pax sparse maps are read in a loop with no bound
        tar.fileobj.seek(start)
        token = _header_chain.set(depth + 1)
        try:
            return super().fromtarfile(tar)
        finally:
            _header_chain.reset(token)


class _Kind(enum.Enum):
    DIRECTORY = "directory"
    FILE = "regular file"
    HARDLINK = "hard link"
    SYMLINK = "symbolic link"


_TYPE2KIND: Final = {
    **dict.fromkeys(_REGULAR_TYPES, _Kind.FILE),
    tarfile.DIRTYPE: _Kind.DIRECTORY,
    tarfile.LNKTYPE: _Kind.HARDLINK,
    tarfile.SYMTYPE: _Kind.SYMLINK,
}


def _split(text: str, what: str) -> list[str]:
    """The components of a relative name or link target, without empty and ``.`` ones; checks the length limits."""
    if not text:
        raise _Refused(f"{what} is empty")
    if "\x00" in text:
        raise _Refused(f"{what} {text!r} contains a NUL byte")
    try:
        encoded = os.fsencode(text)
    except UnicodeEncodeError:
        raise _Refused(f"{what} {text!r} is not a valid file name") from None
    if len(encoded) > MAX_NAME_BYTES:
        raise _Refused(f"{what} is {len(encoded)} bytes long, expected at most {MAX_NAME_BYTES}")
    if text.startswith("/"):
        raise _Refused(f"{what} {text!r} is absolute, expected a path relative to the tree")
    if max(map(len, encoded.split(b"/"))) > MAX_COMPONENT_BYTES:
        raise _Refused(f"{what} {text!r} has a component longer than {MAX_COMPONENT_BYTES} bytes")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if len(parts) > MAX_DEPTH:
        raise _Refused(f"{what} has {len(parts)} components, expected at most {MAX_DEPTH}")
    return parts


def _member_path(text: str, what: str) -> _Parts:
    """A member name (or hard link target, which names a member) normalized lexically; ``..`` may not leave the tree."""
    parts: list[str] = []
    for part in _split(text, what):
        if part != "..":
            parts.append(part)
        elif parts:
            parts.pop()
        else:
            raise _Refused(f"{what} {text!r} climbs above the tree with '..'")
    return tuple(parts)


def _file_mode(mode: int) -> int:
    kept = mode & _FILE_MODE_MASK
    if not kept & stat.S_IXUSR:
        kept &= ~_EXEC_BITS
    return kept | _OWNER_RW


class _Plan:
    """An archive's members, vetted one at a time as they are read (:meth:`add`), then as a whole (:meth:`finish`)."""

    def __init__(self) -> None:
        self.path2member: dict[_Parts, tuple[_Kind, tarfile.TarInfo]] = {}
        self.files: list[tuple[_Parts, tarfile.TarInfo]] = []
        self.hardlinks: list[tuple[_Parts, _Parts]] = []  # (link, an earlier file or hard link)
        self.symlinks: dict[_Parts, list[str]] = {}  # link -> the components of its target, '..' included
        self.directories: set[_Parts] = set()  # every directory to create, explicit or implied by a member
        self._resolved: dict[_Parts, tuple[_Parts, int]] = {}  # link -> (where it leads, chain length)

    def add(self, member: tarfile.TarInfo) -> None:
        """Vet ``member`` on its own and against the members before it."""
        try:
            self._add(member)
        except _Refused as refused:
            refused.member = refused.member or member.name
            raise

    def _add(self, member: tarfile.TarInfo) -> None:
        kind = _TYPE2KIND.get(member.type)
        if kind is None:
            found = _TYPE2NAME.get(member.type, f"of type {member.type!r}")
            raise _Refused(f"is {found}, expected a regular file, directory, symbolic link or hard link")
        if member.mode & _SPECIAL_MODE_BITS:
            raise _Refused(f"mode {member.mode:#o} has the setuid, setgid or sticky bit")
        if not 0 <= member.mtime < _MTIME_LIMIT_S:
            raise _Refused(f"mtime {member.mtime!r} is outside [0, {_MTIME_LIMIT_S:#x}) seconds")
        path = _member_path(member.name, "name")
        if not path:
            if kind is _Kind.DIRECTORY:
                return  # "./": the tree itself
            raise _Refused(f"a {kind.value} named {member.name!r} would replace the tree itself")
        previous = self.path2member.get(path)
        if previous is not None:
            if previous[0] is kind is _Kind.DIRECTORY:
                return
            raise _Refused(f"is a {kind.value} with the name of an earlier {previous[0].value}")
        if kind is _Kind.FILE:
            self.files.append((path, member))
        elif kind is _Kind.DIRECTORY:
            self.directories.add(path)
        elif kind is _Kind.HARDLINK:
            target = _member_path(member.linkname, "hard link target")
            source = self.path2member.get(target)
            if source is None or source[0] not in (_Kind.FILE, _Kind.HARDLINK):
                found = "no earlier member" if source is None else f"a {source[0].value}"
                raise _Refused(f"hard link target {member.linkname!r} is {found}, expected a regular file before it")
            self.hardlinks.append((path, target))
        else:
            self.symlinks[path] = _split(member.linkname, "symlink target")
        self.path2member[path] = (kind, member)

    def finish(self) -> None:
        """Vet the members against each other: no member below a link or a file; every symlink leads inside."""
        for path, (_, member) in self.path2member.items():
            parent = path[:-1]
            while parent and parent not in self.directories:
                if (found := self.path2member.get(parent)) is not None:  # a directory member is in directories
                    how = "passes through" if found[0] is _Kind.SYMLINK else "lies below"
                    raise _Refused(f"{how} the {found[0].value} {found[1].name!r}", member.name)
                self.directories.add(parent)
                parent = parent[:-1]
        for link in self.symlinks:
            try:
                self._resolve(link, 0)
            except _Refused as refused:
                refused.member = refused.member or self.path2member[link][1].name
                raise

    def _resolve(self, link: _Parts, hops: int) -> tuple[_Parts, int]:
        """Where ``link`` leads, walking its target as the kernel would, through every link in the archive."""
        name = self.path2member[link][1].name
        target = self.path2member[link][1].linkname
        known = self._resolved.get(link)
        if hops + (1 if known is None else known[1]) > MAX_SYMLINK_HOPS:  # blame the link that starts the chain
            raise _Refused(
                f"its target leads through a chain of more than {MAX_SYMLINK_HOPS} symbolic links (or a loop)"
            )
        if known is not None:
            return known
        stack, chain = list(link[:-1]), 1
        for part in self.symlinks[link]:
            if part == "..":
                if not stack:
                    raise _Refused(f"symlink target {target!r} leads outside the tree", name)
                stack.pop()
                continue
            stack.append(part)
            if len(stack) > MAX_DEPTH:
                raise _Refused(f"symlink target {target!r} leads deeper than {MAX_DEPTH} components", name)
            if (key := tuple(stack)) in self.symlinks:
                inner, inner_chain = self._resolve(key, hops + 1)
                stack, chain = list(inner), max(chain, inner_chain + 1)
        self._resolved[link] = (tuple(stack), chain)
        return self._resolved[link]


def extract_archive(archive: Path, tree: Path, scratch_tar: Path, limits: ArchiveLimits) -> None:
    """Vet every member of ``archive`` (tar; gzip, bzip2 or xz compressed or not), then extract it into ``tree``.

    ``tree`` must not exist. A compressed archive is first decompressed to ``scratch_tar`` (up to
    ``limits.max_bytes``), which also checks its CRC; the caller removes ``scratch_tar`` and, on error, ``tree``.

    Raises:
        UnsafeArchive: a member breaks a rule in the module docstring, or the archive exceeds ``limits``.
        ArtifactError: the archive is corrupt or unreadable, or the tree could not be written.
    """
    try:
        plain = _decompress(archive, scratch_tar, limits)
        with tarfile.open(plain, "r:", tarinfo=_VettedTarInfo) as tar:
            plan = _read_plan(archive, tar, plain.stat().st_size, limits)
            _write_tree(archive, tar, plan, tree)
    except _Refused as refused:
        raise UnsafeArchive(str(archive), refused.member, refused.reason) from None
    except ArtifactError:
        raise
    except _CORRUPT_ERRORS as exc:  # tarfile and the decompressors raise all of these on malformed input
        raise ArtifactError(f"{archive} is corrupt or unreadable: {type(exc).__name__}: {exc}") from exc


def _decompress(archive: Path, out: Path, limits: ArchiveLimits) -> Path:
    with open(archive, "rb") as raw:
        first = raw.read(tarfile.BLOCKSIZE)
    plain = _is_tar_header(first)
    foreign = None if plain else next((what for m, what in _FOREIGN_MAGICS.items() if first.startswith(m)), None)
    if foreign is not None:
        raise ArtifactError(f"{archive} is corrupt or unreadable: {foreign}, expected a tar archive (plain, gzip, "
                            "bzip2 or xz compressed)")  # fmt: skip
    opener = None if plain else next((o for m, o in _MAGIC2OPEN.items() if first.startswith(m)), None)
    if opener is None:
        size = archive.stat().st_size
        if size > limits.max_bytes:
            raise _over_limit(archive, "", f"its size ({size:#x} bytes)", "max_bytes", limits.max_bytes, MAX_BYTES_ENV)
        return archive
    written = 0
    with opener(archive) as source, open(out, "xb") as sink:
        while chunk := source.read(min(_CHUNK_BYTES, limits.max_bytes + 1 - written)):
            written += len(chunk)
            if written > limits.max_bytes:
                what = f"its uncompressed size (more than {limits.max_bytes:#x} bytes)"
                raise _over_limit(archive, "", what, "max_bytes", limits.max_bytes, MAX_BYTES_ENV)
            sink.write(chunk)
    return out


def _is_tar_header(block: bytes) -> bool:
    """Whether ``block`` is a tar header with a valid checksum (a plain archive whose first name starts 'BZh')."""
    try:
        tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
    except (tarfile.HeaderError, ValueError):
        return False
    return True


def _read_plan(archive: Path, tar: tarfile.TarFile, size_bytes: int, limits: ArchiveLimits) -> _Plan:
    """Read every header, bounded: at most ``max_members``, each strictly after the last, its data inside the file."""
    plan = _Plan()
    count, last_offset = 0, -1
    while (member := tar.next()) is not None:
        count += 1
        if count > limits.max_members:
            what = f"the member count ({count} so far)"
            raise _over_limit(archive, member.name, what, "max_members", limits.max_members, MAX_MEMBERS_ENV)
        end = member.offset_data + member.size
        if member.size < 0 or member.offset <= last_offset or end > size_bytes:
            raise ArtifactError(
                f"{archive} is corrupt or unreadable: member {member.name!r} (header at {member.offset:#x}, after "
                f"one at {last_offset:#x}) has data {member.offset_data:#x}+{member.size:#x}, expected a size >= 0 "
                f"ending by the archive's end {size_bytes:#x}"
            )
        last_offset = member.offset
        plan.add(member)
    plan.finish()
    return plan


def _write_tree(archive: Path, tar: tarfile.TarFile, plan: _Plan, tree: Path) -> None:
    """Create the vetted members: directories, then files and hard links, then symbolic links, then mtimes."""
    root = os.fspath(tree)
    current = ""
    try:
        os.mkdir(root)
        for path in sorted(plan.directories, key=len):  # parents first
            current = "/".join(path)
            os.mkdir(os.path.join(root, *path))
        for path, member in plan.files:
            current = member.name
            _write_file(tar, member, os.path.join(root, *path))
        for path, target in plan.hardlinks:
            current = plan.path2member[path][1].name
            os.link(os.path.join(root, *target), os.path.join(root, *path), follow_symlinks=False)
        for path in plan.symlinks:  # last: nothing is written after a link exists
            current = plan.path2member[path][1].name
            os.symlink(plan.path2member[path][1].linkname, os.path.join(root, *path))
        for path in sorted(plan.directories, key=len, reverse=True):  # children first: creating one touches its parent
            if (found := plan.path2member.get(path)) is not None:
                current = found[1].name
                os.utime(os.path.join(root, *path), (found[1].mtime, found[1].mtime), follow_symlinks=False)
    except OSError as exc:
        raise ArtifactError(f"{archive}: extracting member {current!r} into {tree} failed: {exc}") from exc


def _write_file(tar: tarfile.TarFile, member: tarfile.TarInfo, path: str) -> None:
    source = tar.extractfile(member)
    assert source is not None, "tarfile gives every regular member a data stream"
    fd = os.open(path, _CREATE_FLAGS, _OWNER_RW)
    with source, open(fd, "wb") as sink:
        shutil.copyfileobj(source, sink, _CHUNK_BYTES)
        sink.flush()
        os.chmod(fd, _file_mode(member.mode))
        os.utime(fd, (member.mtime, member.mtime))
