"""Building rootfs archives from Debian packages: relative links, trimmed, deterministic, safe to extract."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tinyhil.cache import fetch, file_sha256
from tinyhil.qemu.rootfs import build_rootfs_archive, debian_rootfs_reason, relativize_symlinks


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TINYHIL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_absolute_links_become_relative_links_to_the_same_place(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "lib/x").mkdir(parents=True)
    (tree / "usr/lib/x").mkdir(parents=True)
    (tree / "lib/x/libm.so.6").write_text("m")
    (tree / "usr/lib/x/libm.so").symlink_to("/lib/x/libm.so.6")
    (tree / "usr/lib/x/kept").symlink_to("libm.so")
    assert relativize_symlinks(tree) == 1
    assert os.readlink(tree / "usr/lib/x/libm.so") == "../../../lib/x/libm.so.6"
    assert (tree / "usr/lib/x/libm.so").read_text() == "m"
    assert os.readlink(tree / "usr/lib/x/kept") == "libm.so"


def _fake_deb(tmp_path: Path, name: str) -> Path:
    dpkg_deb = shutil.which("dpkg-deb")
    if dpkg_deb is None:
        pytest.skip("dpkg-deb not found on PATH (Debian package dpkg): cannot build a test package")
    root = tmp_path / name
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.com>\nDescription: test\n"
    )
    for folder in ("usr/lib/x", "usr/bin", "usr/share/doc/" + name, "lib/x"):
        (root / folder).mkdir(parents=True)
    (root / "lib/x/libfoo.so.1").write_bytes(b"\x7fELF library")
    (root / "usr/lib/x/libfoo.so").symlink_to("/lib/x/libfoo.so.1")
    (root / "usr/lib/x/libfoo.a").write_bytes(b"!<arch>\n")
    (root / "usr/lib/x/libc_nonshared.a").write_bytes(b"!<arch>\n")
    (root / f"usr/share/doc/{name}/README").write_text("docs")
    tool = root / "usr/bin/tool"
    tool.write_bytes(b"\x7fELF tool")
    tool.chmod(0o4755)
    deb = tmp_path / f"{name}.deb"
    subprocess.run([dpkg_deb, "--root-owner-group", "--build", str(root), str(deb)], check=True, capture_output=True)
    return deb


def test_a_package_archive_is_trimmed_safe_and_deterministic(tmp_path: Path) -> None:
    deb = _fake_deb(tmp_path, "fake")
    first, second = tmp_path / "one.tar", tmp_path / "two.tar"
    build_rootfs_archive([deb], first)
    build_rootfs_archive([deb], second)
    assert file_sha256(first) == file_sha256(second), "the same packages give the same archive"
    tree = fetch(first, extract=True)  # the cache's data filter accepts it
    assert os.readlink(tree / "usr/lib/x/libfoo.so") == "../../../lib/x/libfoo.so.1"
    assert (tree / "usr/lib/x/libfoo.so").read_bytes() == b"\x7fELF library"
    assert not (tree / "usr/share/doc").exists() and not (tree / "usr/lib/x/libfoo.a").exists()
    assert (tree / "usr/lib/x/libc_nonshared.a").exists(), "libc.so's linker script needs it"
    mode = (tree / "usr/bin/tool").stat().st_mode
    assert stat.S_IMODE(mode) == 0o755, "setuid cleared"


def _fake_tools(folder: Path, foreign: str) -> None:
    folder.mkdir()
    scripts = {
        "apt-get": "exit 0\n",
        "dpkg-deb": "exit 0\n",
        "dpkg": f'[ "$1" = --print-foreign-architectures ] && echo "{foreign}"\n'
        '[ "$1" = --print-architecture ] && echo amd64\nexit 0\n',
    }
    for name, script in scripts.items():
        (folder / name).write_text("#!/bin/sh\n" + script)
        (folder / name).chmod(0o755)


@pytest.mark.parametrize(
    ("tools", "foreign", "expected"),
    [
        (False, "", "the rootfs is not built yet and building it needs apt-get, dpkg, dpkg-deb (Debian/Ubuntu tools)"),
        (
            True,
            "i386",
            "the rootfs is not built yet and Debian architecture arm64 is not enabled "
            "(run: dpkg --add-architecture arm64 && apt-get update)",
        ),
        (True, "i386\narm64", None),
    ],
)
def test_the_rootfs_probe_names_the_missing_tool_or_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tools: bool, foreign: str, expected: str | None
) -> None:
    bin_dir = tmp_path / "bin"
    if tools:
        _fake_tools(bin_dir, foreign)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert debian_rootfs_reason("aarch64") == expected


def test_an_unknown_arch_has_no_debian_rootfs() -> None:
    assert debian_rootfs_reason("sparc") == "no Debian architecture known for arch='sparc' (known: ['aarch64'])"
