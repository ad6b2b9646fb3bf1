"""The artifact cache: verified downloads, atomic and safe extraction, shared by concurrent processes."""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import stat
import subprocess
import sys
import tarfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tinyhil import cache
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
    (_absolute, "absolute path"),
    (_dotdot, "OutsideDestinationError"),
    (_symlink_absolute, "AbsoluteLinkError"),
    (_symlink_escaping, "LinkOutsideDestinationError"),
    (_write_through_symlink, "LinkOutsideDestinationError"),
    (_hardlink_escaping, "LinkOutsideDestinationError"),
    (_char_device, "SpecialFileError"),
    (_block_device, "SpecialFileError"),
    (_fifo, "SpecialFileError"),
    (_setuid, "setuid or setgid"),
    (_setgid, "setuid or setgid"),
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


CORRUPT = [
    ("w", _truncated_member),
    ("w:gz", _truncated_member),
    ("w:gz", _flipped_gzip_body),
    ("w:xz", _truncated_member),
    ("w", lambda data: b"this is not an archive at all" * 40),
]


@pytest.mark.parametrize(("mode", "damage"), CORRUPT)
def test_a_corrupt_archive_raises_and_leaves_no_partial_tree(
    tmp_path: Path, private_cache: Path, mode: str, damage: Callable[[bytes], bytes]
) -> None:
    archive = _write(tmp_path / "broken.tar", damage(_tar_bytes(_good_tree, mode)))
    with pytest.raises(ArtifactError, match="corrupt or unreadable"):
        fetch(archive, extract=True)
    assert _leftovers(private_cache) == []


def test_extraction_refuses_to_run_without_the_data_filter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _write(tmp_path / "tree.tar", _tar_bytes(_good_tree))
    monkeypatch.delattr(tarfile, "data_filter")
    with pytest.raises(ArtifactError, match=r"data_filter is missing"):
        fetch(archive, extract=True)


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

    monkeypatch.setattr(cache.os, "rename", winner_first)
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
