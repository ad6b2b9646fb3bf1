"""The artifact cache: verified downloads, atomic and safe extraction, shared by concurrent processes."""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import pickle
import stat
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tinyhil.cache import ArtifactError, ChecksumMismatch, UnsafeArchive, cache_dir, fetch, file_sha256
from tinyhil.errors import InvalidArgument

TREE = {f"pkg/dir{i % 7}/file{i}.txt": f"contents of file {i}\n".encode() * (i + 1) for i in range(60)}


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("TINYHIL_CACHE", str(root))
    return root


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tar_bytes(add: Callable[[tarfile.TarFile], None], mode: str = "w") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as tar:  # type: ignore[call-overload]
        add(tar)
    return out.getvalue()


def _add_file(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def _add_special(tar: tarfile.TarFile, name: str, kind: bytes, linkname: str = "", mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.mode = mode
    if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = 1, 3
    tar.addfile(info)


def _good_tree(tar: tarfile.TarFile) -> None:
    for name, data in TREE.items():
        _add_file(tar, name, data)
    _add_special(tar, "pkg/link-to-file0", tarfile.SYMTYPE, "dir0/file0.txt")


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _leftovers(root: Path) -> list[str]:
    """Everything in the cache except the lock folder: a failed fetch must leave nothing behind."""
    if not root.exists():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink())


def _read_tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


# --- the cache directory -------------------------------------------------------------------------------------------
def test_cache_dir_prefers_tinyhil_cache_then_xdg_then_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYHIL_CACHE", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("TINYHIL_CACHE")
    assert cache_dir() == tmp_path / "xdg" / "tinyhil"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec says relative values are invalid
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "tinyhil"


# --- plain fetches ---------------------------------------------------------------------------------------------------
def test_local_path_is_used_in_place_and_verified(tmp_path: Path) -> None:
    source = _write(tmp_path / "blob.bin", b"payload")
    assert fetch(source) == source.resolve()
    assert fetch(str(source), sha256=_sha(b"payload").upper()) == source.resolve()
    with pytest.raises(ChecksumMismatch) as info:
        fetch(source, sha256="0" * 64)
    assert info.value.expected == "0" * 64 and info.value.actual == _sha(b"payload")
    assert "0" * 64 in str(info.value) and _sha(b"payload") in str(info.value)


def test_url_is_downloaded_once_then_served_from_the_cache(tmp_path: Path, private_cache: Path) -> None:
    source = _write(tmp_path / "blob.bin", b"first version")
    got = fetch(source.as_uri(), sha256=_sha(b"first version"))
    assert got.read_bytes() == b"first version" and got.is_relative_to(private_cache)
    source.unlink()  # a second fetch must not touch the origin
    assert fetch(source.as_uri()) == got
    assert fetch(source.as_uri(), sha256=_sha(b"first version")) == got
    assert not [p for p in got.parent.iterdir() if p.name.startswith(".tmp-")]


def test_a_new_expected_digest_downloads_again(tmp_path: Path) -> None:
    source = _write(tmp_path / "blob.bin", b"v1")
    fetch(source.as_uri(), sha256=_sha(b"v1"))
    source.write_bytes(b"v2")
    assert fetch(source.as_uri(), sha256=_sha(b"v2")).read_bytes() == b"v2"


def test_digest_mismatch_on_download_leaves_nothing_behind(tmp_path: Path, private_cache: Path) -> None:
    source = _write(tmp_path / "blob.bin", b"tampered")
    with pytest.raises(ChecksumMismatch, match=f"sha256={_sha(b'tampered')}, expected {'a' * 64}"):
        fetch(source.as_uri(), sha256="a" * 64)
    assert _leftovers(private_cache) == []


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    served = tmp_path / "www"
    served.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: Quiet(*a, directory=str(served)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        server.shutdown()
        server.server_close()


def test_http_download_and_a_missing_url(http_root: tuple[str, Path], private_cache: Path) -> None:
    base, served = http_root
    _write(served / "artifact.tar", _tar_bytes(_good_tree))
    tree = fetch(f"{base}/artifact.tar", extract=True)
    assert _read_tree(tree / "pkg") == {k.removeprefix("pkg/"): v for k, v in TREE.items()}
    with pytest.raises(ArtifactError, match="404"):
        fetch(f"{base}/missing.tar")
    assert not [p for p in _leftovers(private_cache) if "missing" in p or ".tmp-" in p]


BAD_ARGUMENTS = [
    ({"url_or_path": "x", "sha256": "abc"}, InvalidArgument, "expected 64 hexadecimal digits"),
    ({"url_or_path": "x", "sha256": "g" * 64}, InvalidArgument, "expected 64 hexadecimal digits"),
    ({"url_or_path": "ftp://example.com/a.tar"}, InvalidArgument, "expected a local path or a http/https/file URL"),
    ({"url_or_path": "/no/such/artifact.tar"}, ArtifactError, "no such file"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_ARGUMENTS)
def test_bad_arguments_raise_typed_errors(kwargs: dict[str, str], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        fetch(**kwargs)  # type: ignore[arg-type]


# --- extraction ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["w", "w:gz", "w:bz2", "w:xz"])
def test_extract_gives_the_whole_tree_once(tmp_path: Path, private_cache: Path, mode: str) -> None:
    data = _tar_bytes(_good_tree, mode)
    archive = _write(tmp_path / "tree.tar", data)
    tree = fetch(archive, sha256=_sha(data), extract=True)
    assert tree == private_cache / "extracted" / _sha(data)
    assert _read_tree(tree) == TREE
    assert (tree / "pkg" / "link-to-file0").read_bytes() == TREE["pkg/dir0/file0.txt"]
    archive.unlink()  # with the digest known, a cached tree needs no archive
    assert fetch(archive, sha256=_sha(data), extract=True) == tree
    assert [p.name for p in tree.parent.iterdir()] == [_sha(data)]


def _absolute(tar: tarfile.TarFile) -> None:
    _add_file(tar, "/etc/evil", b"x")


def _dotdot(tar: tarfile.TarFile) -> None:
    _add_file(tar, "ok.txt", b"fine")
    _add_file(tar, "sub/../../evil", b"x")


def _symlink_absolute(tar: tarfile.TarFile) -> None:
    _add_special(tar, "passwd", tarfile.SYMTYPE, "/etc/passwd")


def _symlink_escaping(tar: tarfile.TarFile) -> None:
    _add_special(tar, "sub/up", tarfile.SYMTYPE, "../../outside")


def _write_through_symlink(tar: tarfile.TarFile) -> None:
    _add_special(tar, "escape", tarfile.SYMTYPE, "..")
    _add_file(tar, "escape/evil", b"x")


def _hardlink_escaping(tar: tarfile.TarFile) -> None:
    _add_special(tar, "hard", tarfile.LNKTYPE, "../outside")


def _char_device(tar: tarfile.TarFile) -> None:
    _add_special(tar, "null", tarfile.CHRTYPE)


def _block_device(tar: tarfile.TarFile) -> None:
    _add_special(tar, "disk", tarfile.BLKTYPE)


def _fifo(tar: tarfile.TarFile) -> None:
    _add_special(tar, "pipe", tarfile.FIFOTYPE)


def _setuid(tar: tarfile.TarFile) -> None:
    _add_file(tar, "bin/su", b"\x7fELF", mode=0o4755)


def _setgid(tar: tarfile.TarFile) -> None:
    _add_file(tar, "bin/sg", b"\x7fELF", mode=0o2755)


MALICIOUS = [
    (_absolute, "name '/etc/evil' is absolute"),
    (_dotdot, "climbs above the tree with '..'"),
    (_symlink_absolute, "symlink target '/etc/passwd' is absolute"),
    (_symlink_escaping, "symlink target '../../outside' leads outside the tree"),
    (_write_through_symlink, "passes through the symbolic link 'escape'"),
    (_hardlink_escaping, "hard link target '../outside' climbs above the tree"),
    (_char_device, "is a character device"),
    (_block_device, "is a block device"),
    (_fifo, "is a fifo"),
    (_setuid, "mode 0o4755 has the setuid, setgid or sticky bit"),
    (_setgid, "mode 0o2755 has the setuid, setgid or sticky bit"),
]


@pytest.mark.parametrize(("build", "reason"), MALICIOUS, ids=[b.__name__.strip("_") for b, _ in MALICIOUS])
def test_malicious_archives_are_rejected_and_leave_the_cache_clean(
    tmp_path: Path, private_cache: Path, build: Callable[[tarfile.TarFile], None], reason: str
) -> None:
    archive = _write(tmp_path / "evil.tar", _tar_bytes(build))
    with pytest.raises(UnsafeArchive, match=reason) as info:
        fetch(archive, extract=True)
    assert info.value.member and str(archive) in str(info.value)
    assert _leftovers(private_cache) == []
    assert not (tmp_path / "outside").exists() and not (tmp_path / "evil").exists()
    extracted = private_cache / "extracted"
    assert not extracted.exists() or list(extracted.iterdir()) == []


def _truncated_member(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flipped_gzip_body(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 64]) + data[middle + 64 :]


def _flipped_header(data: bytes) -> bytes:
    """A few bytes flipped just past the compressor's own header: the stream's first block is damaged."""
    return data[:16] + bytes(b ^ 0xFF for b in data[16:48]) + data[48:]


def _zip_of_the_tree(data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("a.txt", data[:100])
    return out.getvalue()


CORRUPT = [
    ("w", _truncated_member, ""),
    ("w:gz", _truncated_member, "EOFError"),
    ("w:gz", _flipped_gzip_body, ""),  # a CRC mismatch (or zlib.error, where the flip hits a block header)
    ("w:gz", _flipped_header, ""),
    ("w:xz", _truncated_member, "EOFError"),
    ("w:xz", _flipped_header, "LZMAError"),
    ("w:xz", _flipped_gzip_body, "LZMAError"),
    ("w:bz2", _truncated_member, "EOFError"),
    ("w:bz2", _flipped_header, "OSError"),
    ("w:bz2", _flipped_gzip_body, ""),
    ("w", lambda data: b"this is not an archive at all" * 40, "ReadError"),
    ("w", _zip_of_the_tree, "a zip archive, expected a tar archive"),
    ("w", lambda data: _zip_of_the_tree(data)[:40], "a zip archive, expected a tar archive"),
]


@pytest.mark.parametrize(("mode", "damage", "why"), CORRUPT)
def test_a_corrupt_archive_raises_and_leaves_no_partial_tree(
    tmp_path: Path, private_cache: Path, mode: str, damage: Callable[[bytes], bytes], why: str
) -> None:
    """Every decompressor's and tarfile's error on damaged input (lzma.LZMAError, zlib.error, bz2's OSError,
    EOFError on a truncated stream, tarfile.ReadError) is the cache's ArtifactError, naming the archive."""
    archive = _write(tmp_path / "broken.tar", damage(_tar_bytes(_good_tree, mode)))
    with pytest.raises(ArtifactError) as raised:
        fetch(archive, extract=True)
    assert type(raised.value) is ArtifactError
    assert str(raised.value).startswith(f"{archive} is corrupt or unreadable: {why}"), str(raised.value)
    assert _leftovers(private_cache) == []


def test_a_damaged_download_sidecar_means_download_again(tmp_path: Path, private_cache: Path) -> None:
    source = _write(tmp_path / "blob.bin", b"payload")
    url = source.as_uri()
    first = fetch(url)
    sidecar = first.with_name("blob.bin.sha256")
    for damage in (b"\xff\xfe" * 100, b"9" * 10_000_000, b""):
        sidecar.write_bytes(damage)
        assert fetch(url).read_bytes() == b"payload"
        assert sidecar.read_text() == _sha(b"payload")


def test_extraction_does_not_depend_on_tarfiles_filters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The members are vetted by tinyhil itself, so a Python without (or with a broken) data filter is as safe."""
    monkeypatch.delattr(tarfile, "data_filter")
    monkeypatch.delattr(tarfile, "tar_filter")
    tree = fetch(_write(tmp_path / "tree.tar", _tar_bytes(_good_tree)), extract=True)
    assert _read_tree(tree) == TREE
    with pytest.raises(UnsafeArchive, match="leads outside the tree"):
        fetch(_write(tmp_path / "evil.tar", _tar_bytes(_symlink_escaping)), extract=True)


def test_the_loser_of_a_rename_race_uses_the_winners_tree(
    tmp_path: Path, private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _tar_bytes(_good_tree)
    archive = _write(tmp_path / "tree.tar", data)
    target = private_cache / "extracted" / _sha(data)
    real_rename = os.rename

    def winner_first(src: str, dst: str) -> None:
        target.mkdir()
        (target / "winner").write_text("the other process got here first")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", winner_first)
    assert fetch(archive, extract=True) == target
    assert os.listdir(target) == ["winner"]
    assert sorted(os.listdir(target.parent)) == [target.name], "the loser removed its temporary tree"


EXTRACTOR = """
import hashlib, sys
from pathlib import Path
from tinyhil.cache import fetch
sys.stdin.readline()  # start together
tree = fetch(sys.argv[1], extract=True)
files = sorted(p for p in tree.rglob("*") if p.is_file())
print(tree, len(files), hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest())
"""


def test_eight_processes_extracting_at_once_end_with_one_complete_tree(tmp_path: Path, private_cache: Path) -> None:
    big = {f"pkg/part{i:03d}.bin": os.urandom(2048) for i in range(400)}

    def build(tar: tarfile.TarFile) -> None:
        for name, data in big.items():
            _add_file(tar, name, data)

    archive = _write(tmp_path / "big.tar.gz", _tar_bytes(build, "w:gz"))
    expected = hashlib.sha256(b"".join(big[name] for name in sorted(big))).hexdigest()
    env = {**os.environ, "TINYHIL_CACHE": str(private_cache)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", EXTRACTOR, str(archive)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(8)
    ]
    for proc in procs:  # wait until every interpreter is up before releasing them
        assert proc.stdin is not None
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = [proc.communicate(timeout=120) for proc in procs]
    for (_, err), proc in zip(outputs, procs, strict=True):
        assert proc.returncode == 0, err
    tree = private_cache / "extracted" / file_sha256(archive)
    assert {out.strip() for out, _ in outputs} == {f"{tree} {len(big)} {expected}"}
    assert os.listdir(tree.parent) == [tree.name], "no temporary trees are left behind"
    assert all(stat.S_ISREG(p.stat().st_mode) for p in (tree / "pkg").iterdir())


# --- vetting: every member is judged before anything is written ----------------------------------------------------
Spec = tuple[str, bytes, str]  # (name, tar type, link target or file contents)
REG, DIR, SYM, LNK = tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE


def _tar_of(specs: list[Spec], compression: str = "w", **attrs: object) -> bytes:
    def build(tar: tarfile.TarFile) -> None:
        for name, kind, text in specs:
            info = tarfile.TarInfo(name)
            info.type = kind
            for key, value in attrs.items():
                setattr(info, key, value)
            if kind == REG:
                info.size = len(text)
                tar.addfile(info, io.BytesIO(text.encode()))
            else:
                info.linkname = text
                tar.addfile(info)

    return _tar_bytes(build, compression)


REFUSED: list[tuple[str, list[Spec], str]] = [
    ("sticky", [("t", REG, "")], r"mode 0o1644 has the setuid, setgid or sticky bit"),
    ("unknown-type", [("v", b"V", "")], r"is of type b'V', expected a regular file"),
    ("hardlink-to-missing", [("h", LNK, "missing")], r"hard link target 'missing' is no earlier member"),
    ("hardlink-to-later", [("h", LNK, "f"), ("f", REG, "x")], r"'f' is no earlier member"),
    ("hardlink-to-symlink", [("s", SYM, "f"), ("f", REG, ""), ("h", LNK, "s")], r"is a symbolic link, expected a"),
    ("hardlink-to-directory", [("d", DIR, ""), ("h", LNK, "d")], r"'d' is a directory, expected a regular file"),
    ("file-over-symlink", [("x", SYM, "../out"), ("x", REG, "y")], r"with the name of an earlier symbolic link"),
    ("file-over-file", [("x", REG, "1"), ("./x", REG, "2")], r"regular file with the name of an earlier regular"),
    ("below-a-file", [("a", REG, ""), ("a/b", REG, "")], r"member 'a/b' rejected: lies below the regular file 'a'"),
    ("below-a-later-symlink", [("a/b", REG, ""), ("a", SYM, ".")], r"'a/b' rejected: passes through the symbolic"),
    ("dotdot-alone", [("..", DIR, "")], r"name '..' climbs above the tree"),
    ("replaces-the-root", [("./", REG, "x")], r"would replace the tree itself"),
    ("recursion-deep-name", [("y/" * 1100 + "z", REG, "")], r"name is 2201 bytes long, expected at most 1024"),
    ("deep-name", [("d/" * 70 + "f", REG, "")], r"name has 71 components, expected at most 64"),
    ("long-component", [("c" * 256, REG, "")], r"has a component longer than 255 bytes"),
    ("empty-symlink", [("e", SYM, "")], r"symlink target is empty"),
    ("dot-link-then-up", [("d", SYM, "."), ("e", SYM, "d/../sentinel")], r"'e' rejected: symlink target 'd/../sen"),
    ("up-then-dot-link", [("e", SYM, "d/../sentinel"), ("d", SYM, ".")], r"'e' rejected: symlink target 'd/../sen"),
    ("deep-link-then-up", [("a/b", SYM, "../x/y"), ("c", SYM, "a/b/../../../s")], r"'c' rejected: .* outside"),
    ("link-to-root-then-up", [("a/b/l", SYM, "../.."), ("e", SYM, "a/b/l/../x")], r"'e' rejected: .*'a/b/l/../x' lead"),
    (
        "symlink-loop",
        [("a", SYM, "b"), ("b", SYM, "a")],
        r"'a' rejected: .* more than 40 symbolic links \(or a loop\)",
    ),
    (
        "symlink-chain",
        [(f"l{i}", SYM, f"l{i + 1}") for i in range(41)],
        r"'l0' rejected: its target leads",
    ),
    ("resolves-too-deep", [("m", SYM, "x/" * 40 + "y"), ("l", SYM, "m/" + "z/" * 30)], r"deeper than 64"),
]


@pytest.mark.parametrize(("specs", "reason"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_members_breaking_a_rule_are_refused_before_anything_is_written(
    tmp_path: Path, private_cache: Path, specs: list[Spec], reason: str
) -> None:
    mode = 0o1644 if specs[0][0] == "t" else 0o644
    archive = _write(tmp_path / "evil.tar", _tar_of([("first.txt", REG, "written first"), *specs], mode=mode))
    with pytest.raises(UnsafeArchive, match=reason) as info:
        fetch(archive, extract=True)
    assert info.value.member and info.value.reason in str(info.value) and str(archive) in str(info.value)
    assert _leftovers(private_cache) == [], "nothing was extracted, not even the valid first member"


def test_links_inside_the_tree_work_through_each_other(tmp_path: Path) -> None:
    """A merged-/usr rootfs: links through a directory link, a chain, a hard link, and ``..`` that stays inside."""
    specs: list[Spec] = [
        ("./", DIR, ""),
        ("usr/lib/libc.so.6", REG, "libc"),
        ("usr/lib/x/../libm.so.6", REG, "libm"),  # lexically usr/lib/libm.so.6
        ("lib", SYM, "usr/lib"),
        ("usr/lib/libc.so", SYM, "libc.so.6"),
        ("usr/bin/cc-libc", SYM, "../../lib/libc.so"),  # through 'lib', then 'libc.so'
        ("usr/lib/hard", LNK, "./usr/lib/libc.so.6"),
        ("usr/lib", DIR, ""),  # a directory may repeat
        ("dangling", SYM, "usr/none/../../nowhere"),
    ]
    tree = fetch(_write(tmp_path / "usr.tar", _tar_of(specs, mtime=1_700_000_000)), extract=True)
    assert (tree / "usr/bin/cc-libc").read_text() == "libc" and (tree / "usr/lib/libm.so.6").read_text() == "libm"
    assert os.readlink(tree / "usr/bin/cc-libc") == "../../lib/libc.so"
    assert (tree / "usr/lib/hard").stat().st_ino == (tree / "usr/lib/libc.so.6").stat().st_ino
    assert (tree / "usr/lib/libc.so.6").stat().st_mtime == 1_700_000_000
    assert (tree / "dangling").is_symlink() and not (tree / "usr/lib/x").exists()


@pytest.mark.parametrize(("mode", "expected"), [(0o777, 0o755), (0o600, 0o600), (0o444, 0o644), (0o700, 0o700)])
def test_file_modes_lose_group_and_other_write(tmp_path: Path, mode: int, expected: int) -> None:
    tree = fetch(_write(tmp_path / "m.tar", _tar_of([("f", REG, "x")], mode=mode)), extract=True)
    assert stat.S_IMODE((tree / "f").stat().st_mode) == expected


# --- CVE-2025-4517: symlinks through deep directories past PATH_MAX ------------------------------------------------
def _sentinel_from_anywhere(tmp_path: Path) -> str:
    """A relative path to the sentinel that works from any directory of the tree: up to '/', then down."""
    return os.path.join(*[".."] * 32, str(tmp_path / "sentinel").lstrip("/"))


def _writes(first: bool, hardlink: bool, writes: bool) -> list[Spec]:
    """What goes through the escaping link 'escape': files written, a hard link to the victim then written."""
    specs: list[Spec] = [("escape/first", REG, "new")] if first else []
    specs += [("flaglink", LNK, "escape/victim")] if hardlink else []
    specs += [("flaglink", REG, "overwritten")] if hardlink and writes else []
    specs += [("escape/newfile", REG, "new"), ("escape/sub/deeper", REG, "new")] if writes else []
    return specs


def _realpath_limit_chain(tmp_path: Path, steps: int, component: int, *flags: bool) -> bytes:
    """The archive of gh-135034: a link past PATH_MAX that realpath leaves unresolved, then writes through it."""
    if not component:  # as CPython's test: long enough that the expanded path overflows PATH_MAX in the tree
        tree = tmp_path / "cache" / "extracted" / ".tmp-0123456789abcdef-01234567" / "tree"
        component = (os.pathconf(tmp_path, "PC_PATH_MAX") - len(str(tree)) - 1) // (steps + 1)
    names = [f"s{i}" for i in range(steps)]
    specs: list[Spec] = []
    path = ""
    for name in names:
        specs += [(os.path.join(path, "d" * component), DIR, ""), (os.path.join(path, name), SYM, "d" * component)]
        path = os.path.join(path, "d" * component)
    link = os.path.join(*names, "l" * 254)
    specs.append((link, SYM, os.path.join(*[".."] * steps)))
    # Lexically 'link/..' * (steps + 1) is the tree itself, so the target looks inside; really 'link' is the tree,
    # so the '..'s climb to '/' (the tree is far less deep), and the rest is the sentinel's absolute path.
    climb = os.path.join(link, *[".."] * (steps + 1), str(tmp_path / "sentinel").lstrip("/"))
    specs.append(("escape", SYM, climb))
    return _tar_of(specs + _writes(*flags))


def _dot_link_chain(tmp_path: Path, steps: int, component: int, *flags: bool) -> bytes:
    """The same escape without PATH_MAX: 'd' -> '.', so 'd/..' is the tree's parent while looking like the tree."""
    specs: list[Spec] = [("d", SYM, "."), ("escape", SYM, os.path.join("d", _sentinel_from_anywhere(tmp_path)))]
    return _tar_of(specs + _writes(*flags))


FLAGS = ("first", "hardlink", "writes")
ESCAPES = [  # (id, build, steps, component length (0: overflow PATH_MAX), write first, hard link, writes)
    ("cve-2025-4517", _realpath_limit_chain, 16, 0, False, True, True),
    ("deeper", _realpath_limit_chain, 24, 0, False, True, True),
    ("write-through-escape-first", _realpath_limit_chain, 16, 0, True, True, True),
    ("hardlink-only", _realpath_limit_chain, 16, 0, False, True, False),
    ("writes-only", _realpath_limit_chain, 16, 0, True, False, True),
    ("short-components", _realpath_limit_chain, 16, 8, True, True, True),
    ("short-components-writes-only", _realpath_limit_chain, 16, 8, True, False, True),
    ("short-components-links-only", _realpath_limit_chain, 16, 8, False, False, False),
    ("dot-link", _dot_link_chain, 0, 0, False, True, True),
    ("dot-link-writes-only", _dot_link_chain, 0, 0, True, False, True),
    ("dot-link-links-only", _dot_link_chain, 0, 0, False, False, False),
]


def _outside(tmp_path: Path) -> dict[str, tuple[int, int, int, bytes]]:
    """Everything next to the cache: the listing, and each sentinel entry's mode, link count, mtime and contents."""
    state = {"listing": (0, 0, 0, "\n".join(sorted(p.name for p in tmp_path.iterdir() if p.name != "cache")).encode())}
    for path in sorted((tmp_path / "sentinel").rglob("*")):
        st = path.lstat()
        data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes() if path.is_file() else b""
        state[str(path.relative_to(tmp_path))] = (st.st_mode, st.st_nlink, st.st_mtime_ns, data)
    return state


@pytest.mark.parametrize(("build", "steps", "component", *FLAGS), [e[1:] for e in ESCAPES], ids=[e[0] for e in ESCAPES])
def test_escaping_link_chains_change_nothing_outside_the_cache(
    tmp_path: Path,
    private_cache: Path,
    build: Callable[..., bytes],
    steps: int,
    component: int,
    first: bool,
    hardlink: bool,
    writes: bool,
) -> None:
    sentinel = tmp_path / "sentinel"
    (sentinel / "sub").mkdir(parents=True)
    _write(sentinel / "victim", b"original")
    archive = _write(tmp_path / "chain.tar", build(tmp_path, steps, component, first, hardlink, writes))
    before = _outside(tmp_path)
    with pytest.raises(UnsafeArchive):
        fetch(archive, extract=True)
    assert _outside(tmp_path) == before
    assert _leftovers(private_cache) == []


# --- headers that loop, recurse or claim unbounded sizes ------------------------------------------------------------
def _number(value: int, width: int) -> bytes:
    """A tar number field: octal when it fits, else GNU base-256 (two's complement, so negative values too)."""
    if 0 <= value < 1 << 3 * (width - 1):
        return b"%0*o\0" % (width - 1, value)
    return (b"\x80" if value >= 0 else b"\xff") + (value % (1 << 8 * (width - 1))).to_bytes(width - 1, "big")


def _fix_checksum(block: bytearray) -> bytearray:
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block[:512])
    return block


def _header(name: str, kind: bytes = REG, size: int = 0, linkname: str = "") -> bytearray:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    block = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    block[124:136] = _number(size, 12)
    return _fix_checksum(block)


def _pax(records: dict[str, str], kind: bytes = tarfile.XHDTYPE) -> bytes:
    body = b""
    for key, value in records.items():
        line = f" {key}={value}\n".encode()
        size = len(line) + len(str(len(line)))
        size += len(str(size)) - len(str(len(line)))
        body += str(size).encode() + line
    body += b"\0" * (-len(body) % tarfile.BLOCKSIZE)
    return bytes(_header("././@PaxHeader", kind, len(body.rstrip(b"\0")))) + body


END = b"\0" * (tarfile.BLOCKSIZE * 2)
HEADERS = [
    # A hard link tarfile would resolve by loading every member, then a header whose negative size (base-256) points
    # back to the hard link: tarfile re-reads the two forever, members growing without bound (CVE-2025-8194 family).
    (
        "negative-size-loop",
        _header("pad") + _header("h", LNK, 0, "missing") + _header("f", REG, -1024),
        "is no earlier",
    ),
    ("negative-size", _header("pad") + _header("ok") + _header("f", REG, -1024), r"'f' \(header at 0x400.* size >= 0"),
    (
        "negative-pax-size",
        _header("pad") + _pax({"size": "-1024"}) + _header("f"),
        r"member 'f' .*expected a size >= 0",
    ),
    ("data-past-the-end", _header("pad") + _header("big", REG, 1 << 20), r"'big' .* ending by the archive's end 0x800"),
    ("pax-chain", _pax({"comment": "x"}) * 9 + _header("f"), r"more than 8 extended headers in a row"),
    ("huge-pax-header", _header("././@PaxHeader", tarfile.XHDTYPE, 1 << 30), r"extended header of 0x40000000 bytes"),
    ("negative-longname", _header("././@LongLink", tarfile.GNUTYPE_LONGNAME, -512), r"extended header of -0x200"),
    ("gnu-sparse", _header("s", tarfile.GNUTYPE_SPARSE, 0), r"member 's' rejected: is a sparse file"),
    ("pax-sparse", _pax({"GNU.sparse.major": "1", "GNU.sparse.minor": "0"}) + _header("s"), r"is a sparse file"),
    ("pax-nul-path", _pax({"path": "a\x00b"}) + _header("f"), r"contains a NUL byte"),
    ("pax-mtime", _pax({"mtime": "-5"}) + _header("f"), r"mtime -5.0 is outside \[0, 0x400000000\) seconds"),
]


@pytest.mark.parametrize(("data", "reason"), [h[1:] for h in HEADERS], ids=[h[0] for h in HEADERS])
def test_hostile_headers_end_in_a_typed_error_at_once(
    tmp_path: Path, private_cache: Path, data: bytes, reason: str
) -> None:
    """Each finishes by construction: the header is refused before tarfile is asked for the next one."""
    archive = _write(tmp_path / "hostile.tar", bytes(data) + END)
    with pytest.raises(ArtifactError, match=reason):
        fetch(archive, extract=True)
    assert _leftovers(private_cache) == []


def test_plain_archives_that_look_compressed_and_short_header_chains_extract(tmp_path: Path) -> None:
    looks_bz2 = _write(tmp_path / "a.tar", _tar_of([("BZh-notes.txt", REG, "not bzip2")]))
    assert (fetch(looks_bz2, extract=True) / "BZh-notes.txt").read_text() == "not bzip2"
    chain = _write(tmp_path / "b.tar", _pax({"comment": "x"}) * 8 + _header("eight") + END)
    assert (fetch(chain, extract=True) / "eight").is_file()


# --- limits ----------------------------------------------------------------------------------------------------------
def _bomb(tmp_path: Path, size: int = 4 << 20) -> Path:
    return _write(tmp_path / "bomb.tar.gz", _tar_bytes(lambda tar: _add_file(tar, "zeros", bytes(size)), "w:gz"))


def test_a_decompression_bomb_stops_at_max_bytes(
    tmp_path: Path, private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bomb = _bomb(tmp_path)
    assert bomb.stat().st_size < 64 << 10
    message = r"uncompressed size \(more than 0x100000 bytes\) exceeds max_bytes=1048576 .*TINYHIL_CACHE_MAX_BYTES=N"
    with pytest.raises(UnsafeArchive, match=message):
        fetch(bomb, extract=True, max_bytes=1 << 20)
    monkeypatch.setenv("TINYHIL_CACHE_MAX_BYTES", str(1 << 20))
    with pytest.raises(UnsafeArchive, match=r"fetch\(\.\.\., max_bytes=N\)"):
        fetch(bomb, extract=True)
    assert _leftovers(private_cache) == []
    assert fetch(bomb, extract=True, max_bytes=8 << 20).joinpath("zeros").stat().st_size == 4 << 20  # argument wins


def test_a_plain_archive_over_max_bytes_is_refused_unread(tmp_path: Path) -> None:
    archive = _write(tmp_path / "big.tar", _tar_of([("f", REG, "x" * 5000)]))
    with pytest.raises(UnsafeArchive, match=rf"its size \({len(archive.read_bytes()):#x} bytes\) exceeds max_bytes"):
        fetch(archive, extract=True, max_bytes=4096)


def test_member_count_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _write(tmp_path / "many.tar", _tar_of([(f"f{i}", REG, "") for i in range(10)]))
    with pytest.raises(UnsafeArchive, match=r"member 'f5' rejected: the member count \(6 so far\) exceeds max_memb"):
        fetch(archive, extract=True, max_members=5)
    monkeypatch.setenv("TINYHIL_CACHE_MAX_MEMBERS", "9")
    with pytest.raises(UnsafeArchive, match=r"max_members=9 .* or TINYHIL_CACHE_MAX_MEMBERS=N"):
        fetch(archive, extract=True)
    assert len(os.listdir(fetch(archive, extract=True, max_members=10))) == 10


BAD_LIMITS = [
    ({"max_bytes": 0}, {}, r"max_bytes=0, expected an int >= 1"),
    ({"max_members": True}, {}, r"max_members=True, expected an int"),
    ({"max_bytes": "1"}, {}, r"max_bytes='1', expected an int"),
    ({}, {"TINYHIL_CACHE_MAX_BYTES": "lots"}, r"TINYHIL_CACHE_MAX_BYTES='lots', expected a positive integer"),
    ({}, {"TINYHIL_CACHE_MAX_MEMBERS": "-3"}, r"TINYHIL_CACHE_MAX_MEMBERS='-3', expected a positive integer"),
]


@pytest.mark.parametrize(("kwargs", "env", "message"), BAD_LIMITS)
def test_bad_limits_are_invalid_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, object], env: dict[str, str], message: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(InvalidArgument, match=message):
        fetch(_write(tmp_path / "t.tar", _tar_bytes(_good_tree)), extract=True, **kwargs)  # type: ignore[arg-type]


def test_unsafe_archive_survives_pickling() -> None:
    error = UnsafeArchive("a.tar", "m", "why")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.member, copy.reason) == (UnsafeArchive, str(error), "m", "why")
