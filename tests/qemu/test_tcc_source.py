"""Where the compile server's tcc source comes from: the override, the cache, or apt's source package.

No network: apt-get is a stand-in script on PATH that does what the real one does with and without deb-src entries,
and the pinned digest is that of a small archive made here (the real tarball is fetched only by the tests that
build the server, through the qemucc fixture).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tinyhil.cache import ArtifactError, ChecksumMismatch
from tinyhil.qemu import ccserver
from tinyhil.qemu.ccserver import (
    TCC_SOURCE_ARCHIVE,
    TCC_SOURCE_ENV,
    TCC_SOURCE_VERSION,
    TccSourceUnavailable,
    tcc_source,
    tcc_source_reason,
)

NO_DEB_SRC = "E: You must put some 'deb-src' URIs in your sources.list"
# apt-get source --print-uris / --download-only as the real apt does them, for the one package this module asks for
FAKE_APT = """#!/bin/sh
echo "$*" >> "{log}"
[ "$1" = source ] && [ "$3" = "tcc={version}" ] || {{ echo "E: unexpected arguments $*" >&2; exit 100; }}
[ -n "{fail}" ] && {{ echo "Reading package lists..."; echo "{fail}" >&2; exit 100; }}
case "$2" in
    --print-uris) echo "'file:/nowhere/{archive}' {archive} 708943 SHA256:0" ;;
    --download-only) /bin/cp "{payload}" "./{archive}"; echo "Download complete and in download only mode" ;;
esac
"""


def _tarball(path: Path, *, with_source: bool = True) -> str:
    """A bzip2 tar shaped like tcc's upstream tarball (one top folder holding libtcc.c and tcc.h); its sha256."""
    with tarfile.open(path, "w:bz2") as tar:
        names = ["libtcc.c", "tcc.h"] if with_source else ["README"]
        for name in names:
            data = f"/* {name} */\n".encode()
            info = tarfile.TarInfo(f"tcc-0.9.27/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("TINYHIL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(TCC_SOURCE_ENV, raising=False)
    monkeypatch.delenv("APT_CONFIG", raising=False)
    ccserver.forget_apt_probe()
    yield
    ccserver.forget_apt_probe()


class FakeApt:
    """A stand-in apt-get alone on PATH; ``calls`` are the argument lines it was run with."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, fail: str = "", payload: Path) -> None:
        folder = tmp_path / "bin"
        folder.mkdir()
        self.log = tmp_path / "apt-calls.txt"
        script = folder / "apt-get"
        script.write_text(
            FAKE_APT.format(log=self.log, version=TCC_SOURCE_VERSION, fail=fail, archive=TCC_SOURCE_ARCHIVE,
                            payload=payload)
        )  # fmt: skip
        script.chmod(0o755)
        monkeypatch.setenv("PATH", str(folder))

    @property
    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.is_file() else []


def _pin(monkeypatch: pytest.MonkeyPatch, digest: str) -> None:
    """Pin the stand-in tarball's digest in place of the real release's."""
    monkeypatch.setattr(ccserver, "TCC_SOURCE_SHA256", digest)


def test_apt_fetches_the_source_package_once_and_the_digest_is_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    payload = tmp_path / "payload.tar.bz2"
    _pin(monkeypatch, _tarball(payload))
    apt = FakeApt(tmp_path, monkeypatch, payload=payload)
    assert tcc_source_reason() is None
    assert apt.calls == [f"source --print-uris tcc={TCC_SOURCE_VERSION}"]
    tree = tcc_source()
    assert sorted(p.name for p in tree.rglob("*") if p.is_file()) == ["libtcc.c", "tcc.h"]
    kept = tmp_path / "cache" / "downloads" / "apt-source" / TCC_SOURCE_ARCHIVE
    assert kept.read_bytes() == payload.read_bytes()
    assert tcc_source() == tree  # from the cache: apt is not asked again
    assert apt.calls[1:] == [f"source --download-only tcc={TCC_SOURCE_VERSION}"]
    assert [p.name for p in kept.parent.iterdir()] == [TCC_SOURCE_ARCHIVE]  # no scratch folder left


def test_a_tarball_from_apt_with_another_digest_is_refused_and_not_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    payload = tmp_path / "payload.tar.bz2"
    actual = _tarball(payload)
    _pin(monkeypatch, "0" * 64)
    FakeApt(tmp_path, monkeypatch, payload=payload)
    with pytest.raises(ChecksumMismatch, match=f"sha256={actual}, expected {'0' * 64}") as caught:
        tcc_source()
    assert f"apt-get source --download-only tcc={TCC_SOURCE_VERSION}" in str(caught.value)
    assert list((tmp_path / "cache" / "downloads" / "apt-source").iterdir()) == []


def test_without_deb_src_the_error_says_how_to_get_the_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    FakeApt(tmp_path, monkeypatch, fail=NO_DEB_SRC, payload=tmp_path / "unused")
    reason = tcc_source_reason()
    with pytest.raises(TccSourceUnavailable) as caught:
        tcc_source()
    message = str(caught.value)
    assert reason is not None
    assert reason.replace("--print-uris", "--download-only") == message
    for needed in (
        NO_DEB_SRC,  # apt's own words
        f"Debian's source package tcc {TCC_SOURCE_VERSION}",
        f"'apt-get source --download-only tcc={TCC_SOURCE_VERSION}'",
        "deb-src",
        "apt-get update",
        f"{TCC_SOURCE_ENV}='<path or URL of {TCC_SOURCE_ARCHIVE}> <sha256>'",
        ccserver.TCC_SOURCE_SHA256,
    ):
        assert needed in message
    assert "Reading package lists" not in message
    assert isinstance(caught.value, ArtifactError)


def test_without_apt_get_the_reason_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert tcc_source_reason() == str(TccSourceUnavailable("apt-get is not installed (a Debian/Ubuntu tool)"))
    with pytest.raises(TccSourceUnavailable, match="apt-get is not installed"):
        tcc_source()


def test_the_override_is_used_without_asking_apt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    apt = FakeApt(tmp_path, monkeypatch, fail=NO_DEB_SRC, payload=tmp_path / "unused")
    offline = tmp_path / "offline.tar.bz2"
    digest = _tarball(offline)
    monkeypatch.setenv(TCC_SOURCE_ENV, f"{offline} {digest}")
    assert tcc_source_reason() is None
    assert (tcc_source() / "tcc-0.9.27" / "libtcc.c").is_file()
    monkeypatch.setenv(TCC_SOURCE_ENV, f"{offline.as_uri()} {digest}")  # a URL too (file: needs no network)
    assert (tcc_source() / "tcc-0.9.27" / "tcc.h").is_file()
    assert apt.calls == []


def test_a_wrong_or_malformed_override_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    offline = tmp_path / "offline.tar.bz2"
    actual = _tarball(offline)
    monkeypatch.setenv(TCC_SOURCE_ENV, f"{offline} {'1' * 64}")
    with pytest.raises(ChecksumMismatch, match=f"sha256={actual}, expected {'1' * 64}"):
        tcc_source()
    monkeypatch.setenv(TCC_SOURCE_ENV, f"{tmp_path / 'absent.tar.bz2'} {actual}")
    assert tcc_source_reason() == f"{TCC_SOURCE_ENV} names {str(tmp_path / 'absent.tar.bz2')!r}: no such file"
    monkeypatch.setenv(TCC_SOURCE_ENV, str(offline))
    expected = f"{TCC_SOURCE_ENV}='{offline}', expected '<path or URL> <sha256>'"
    assert tcc_source_reason() == expected
    with pytest.raises(ArtifactError, match="expected '<path or URL> <sha256>'"):
        tcc_source()


def test_a_tarball_without_tcc_source_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    offline = tmp_path / "not-tcc.tar.bz2"
    monkeypatch.setenv(TCC_SOURCE_ENV, f"{offline} {_tarball(offline, with_source=False)}")
    with pytest.raises(ArtifactError, match=r"has no libtcc\.c and tcc\.h"):
        ccserver.tcc_source_dir(tcc_source())
