"""Fuzzing ``fetch(..., extract=True)``: random and adversarial archives either extract to a tree whose every path and
link stays inside the entry, or raise :class:`ArtifactError`; never another exception, and nothing outside the cache
changes. Each example is a tiny archive in its own temporary directory; ``HYPOTHESIS_PROFILE=nightly`` runs more.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tinyhil.cache import ArtifactError, fetch

ABSOLUTE = "@ABS@"  # replaced by the sentinel's absolute path once the example's directory exists
CLIMB = "@CLIMB@"  # replaced by '../' up to '/' then the sentinel's absolute path: an escape from any depth
REG, DIR, SYM, LNK = tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE
COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "none": lambda data: data,
    "gz": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
}

# Benign archives (plain kinds and modes, short relative names) reach the link rules; hostile ones add everything.
short_components = st.sampled_from(["a", "b", "c", "sub", ".", "a", "b", "c", "sub", ".."])
short_names = st.lists(short_components, min_size=1, max_size=4).map("/".join)
up_targets = st.tuples(st.integers(1, 6), short_names).map(lambda t: "../" * t[0] + t[1])
benign_targets = st.one_of(short_names, up_targets, short_names.map(lambda name: f"{name}/{CLIMB}"), st.just(CLIMB))
components = st.sampled_from(["a", "b", "sub", "..", ".", "", "sentinel", "victim", "l" * 254, "x" * 256])
relative_names = st.lists(components, min_size=1, max_size=8).map("/".join)
hostile_names = st.one_of(
    relative_names,
    relative_names.map(lambda name: f"{ABSOLUTE}/{name}"),
    st.integers(1, 6).map(lambda up: "../" * up + "sentinel/victim"),
    st.integers(60, 70).map(lambda depth: "y/" * depth + "z"),
    st.just("y/" * 1100 + "z"),
)
hostile_targets = st.one_of(hostile_names, benign_targets)
LINK_KINDS = [REG, REG, REG, DIR, SYM, SYM, LNK]
ODD_TYPES = [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE, tarfile.CONTTYPE, b"V", b"D"]
PLAIN_MODES = [0o644, 0o755, 0o600, 0o777]
SPECIAL_MODES = [0o4755, 0o2755, 0o1777]
STRATEGIES = {  # hostile -> (names, link targets, kinds, modes)
    False: (short_names, benign_targets, st.sampled_from(LINK_KINDS), st.sampled_from(PLAIN_MODES)),
    True: (
        hostile_names,
        hostile_targets,
        st.sampled_from(LINK_KINDS + ODD_TYPES),
        st.sampled_from(PLAIN_MODES + SPECIAL_MODES),
    ),
}


@dataclass(frozen=True, slots=True)
class Member:
    name: str
    kind: bytes
    target: str
    data: bytes
    mode: int


@dataclass(frozen=True, slots=True)
class Archive:
    members: tuple[Member, ...]
    format: int

    def build(self, sentinel: Path) -> bytes:
        """The uncompressed tar, with the placeholders made into real paths to the sentinel."""

        def real(text: str) -> str:
            climb = os.path.join(*[".."] * 32, str(sentinel).lstrip("/"))
            return text.replace(ABSOLUTE, str(sentinel)).replace(CLIMB, climb)

        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=self.format) as tar:
            for member in self.members:
                info = tarfile.TarInfo(real(member.name))
                info.type, info.mode, info.linkname = member.kind, member.mode, real(member.target)
                if member.kind == REG:
                    info.size = len(member.data)
                    tar.addfile(info, io.BytesIO(member.data))
                else:
                    tar.addfile(info)
        return out.getvalue()


@st.composite
def archives(draw: st.DrawFn) -> Archive:
    """Members that point at each other: link targets are often other members' names."""
    names, targets, kinds, modes = STRATEGIES[draw(st.booleans())]
    chosen = draw(st.lists(names, min_size=1, max_size=10))
    members = [
        Member(name, draw(kinds), draw(st.sampled_from(chosen) | targets), draw(st.binary(max_size=64)), draw(modes))
        for name in chosen
    ]
    return Archive(tuple(members), draw(st.sampled_from([tarfile.PAX_FORMAT, tarfile.GNU_FORMAT])))


@dataclass(frozen=True, slots=True)
class HeaderPatch:
    """Rewrite one field of the 512-byte block ``block`` (modulo the block count) and fix its checksum."""

    block: int
    field: str
    value: int


FIELD2SLICE = {"mode": slice(100, 108), "size": slice(124, 136), "mtime": slice(136, 148), "type": slice(156, 157)}
header_patches = st.builds(
    HeaderPatch,
    st.integers(0, 64),
    st.sampled_from(sorted(FIELD2SLICE)),
    st.one_of(st.integers(-(1 << 20), 1 << 20), st.integers(-(1 << 80), 1 << 80)),
)


def _number(value: int, width: int) -> bytes:
    """A tar number field: octal when it fits, else GNU base-256 (two's complement, so negative values too)."""
    if 0 <= value < 1 << 3 * (width - 1):
        return b"%0*o\0" % (width - 1, value)
    return (b"\x80" if value >= 0 else b"\xff") + (value % (1 << 8 * (width - 1))).to_bytes(width - 1, "big")


def _patched(data: bytes, patches: list[HeaderPatch], flips: list[tuple[int, int]], keep: float) -> bytes:
    blocks = bytearray(data)
    count = len(blocks) // tarfile.BLOCKSIZE
    for patch in patches:
        start = patch.block % count * tarfile.BLOCKSIZE
        block = blocks[start : start + tarfile.BLOCKSIZE]
        where = FIELD2SLICE[patch.field]
        if patch.field == "type":
            block[where] = bytes([patch.value % 256])
        else:
            width = where.stop - where.start
            bound = (1 << 8 * (width - 1)) - 1
            block[where] = _number(max(min(patch.value, bound), -bound), width)
        block[148:156] = b" " * 8
        block[148:156] = b"%06o\0 " % sum(block)
        blocks[start : start + tarfile.BLOCKSIZE] = block
    for offset, mask in flips:
        blocks[offset % len(blocks)] ^= mask
    return bytes(blocks[: max(1, int(len(blocks) * keep))])


def _state(root: Path) -> dict[str, tuple[int, int, int, bytes]]:
    """Every entry under ``root`` except the cache: mode, link count, mtime and contents (or link target)."""
    state = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if Path(folder, d) != root / "cache"]
        for name in sorted(dirs + files):
            path = Path(folder, name)
            st_ = path.lstat()
            data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes() if path.is_file() else b""
            state[str(path.relative_to(root))] = (st_.st_mode, st_.st_nlink, st_.st_mtime_ns, data)
    return state


def _assert_inside(tree: Path) -> None:
    """Every path of the tree is in it, and every link in it resolves (as far as it exists) inside it."""
    real_tree = os.path.realpath(tree)
    for folder, dirs, files in os.walk(tree):
        for name in dirs + files:
            path = os.path.join(folder, name)
            assert os.path.commonpath([real_tree, os.path.realpath(os.path.dirname(path))]) == real_tree
            if os.path.islink(path):
                resolved = os.path.realpath(path)
                assert os.path.commonpath([real_tree, resolved]) == real_tree, f"{path} -> {resolved}"


def _extract_and_check(
    build: Callable[[Path], bytes], compression: str, max_members: int | None, max_bytes: int | None
) -> None:
    with tempfile.TemporaryDirectory(prefix="tinyhil-fuzz-") as scratch:
        root = Path(scratch)
        (root / "sentinel" / "sub").mkdir(parents=True)
        (root / "sentinel" / "victim").write_bytes(b"original")
        archive = root / "fuzz.tar"
        archive.write_bytes(COMPRESSORS[compression](build(root / "sentinel")))
        before = _state(root)
        cache = root / "cache"
        with mock.patch.dict(os.environ, {"TINYHIL_CACHE": str(cache)}):
            try:
                tree: Path | None = fetch(archive, extract=True, max_members=max_members, max_bytes=max_bytes)
            except ArtifactError as error:
                event(f"{type(error).__name__}: {getattr(error, 'reason', 'corrupt or unwritable')[:24]}")
                tree = None
        assert _state(root) == before, "something outside the cache changed"
        entries = sorted(os.listdir(cache / "extracted")) if (cache / "extracted").exists() else []
        if tree is None:
            assert entries == [], "a failed extraction left something behind"
        else:
            event("extracted")
            assert tree.parent == cache / "extracted" and entries == [tree.name]
            _assert_inside(tree)


limits = st.one_of(st.none(), st.integers(1, 16))
byte_limits = st.one_of(st.none(), st.integers(1 << 12, 1 << 18))


@pytest.mark.fuzz
@given(archives(), st.sampled_from(sorted(COMPRESSORS)), limits, byte_limits)
def test_random_archives_extract_inside_or_raise_artifact_error(
    archive: Archive, compression: str, max_members: int | None, max_bytes: int | None
) -> None:
    _extract_and_check(archive.build, compression, max_members, max_bytes)


@pytest.mark.fuzz
@given(
    archives(),
    st.lists(header_patches, max_size=4),
    st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), max_size=3),
    st.sampled_from([1.0, 1.0, 0.75, 0.5, 0.1]),
    st.sampled_from(sorted(COMPRESSORS)),
)
def test_archives_with_hostile_headers_never_crash_hang_or_escape(
    archive: Archive, patches: list[HeaderPatch], flips: list[tuple[int, int]], keep: float, compression: str
) -> None:
    """Negative and huge sizes (base-256), odd types, modes and mtimes, flipped bytes and truncation, compressed."""
    _extract_and_check(
        lambda sentinel: _patched(archive.build(sentinel), patches, flips, keep), compression, None, None
    )
