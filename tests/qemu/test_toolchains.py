"""The QEMUCC and QCOMCL toolchains: precise reasons when unusable, and a configured QCOMCL rootfs end to end."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from tinyhil import TargetUnavailable, open_target
from tinyhil.qemu import QemuCompiler, shutdown_servers
from tinyhil.qemu.toolchains import qcomcl_unavailable_reason, qemucc_unavailable_reason

QCOMCL_ENV = ("TINYHIL_QCOMCL_ROOTFS", "TINYHIL_QCOMCL_ROOTFS_SHA256", "TINYHIL_QCOMCL_SERVER")
QEMUCC_ENV = ("TINYHIL_QEMUCC_ROOTFS", "TINYHIL_QEMUCC_ROOTFS_SHA256")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*QCOMCL_ENV, *QEMUCC_ENV, "TINYHIL_QEMU_RUNNER"):
        monkeypatch.delenv(name, raising=False)


def test_qcomcl_is_unavailable_until_configured_and_says_how() -> None:
    reason = qcomcl_unavailable_reason()
    assert reason == (
        "not configured: set TINYHIL_QCOMCL_ROOTFS to the Adreno compiler's aarch64 rootfs archive (path or URL) "
        "and TINYHIL_QCOMCL_ROOTFS_SHA256 to its sha256; its compile server is TINYHIL_QCOMCL_SERVER "
        "(default /usr/bin/tinyhil-ccserver)"
    )
    with pytest.raises(TargetUnavailable, match="not configured: set TINYHIL_QCOMCL_ROOTFS"):
        open_target("NULL:QCOMCL:a630")


PROBES = [("TINYHIL_QCOMCL", qcomcl_unavailable_reason), ("TINYHIL_QEMUCC", qemucc_unavailable_reason)]
MISSING = "{tmp}/rootfs.tar"
# Each unusable pinning, as (the variables set, the reason): the same with or without qemu on PATH.
BAD_CONFIGURATIONS = [
    ({"ROOTFS": MISSING}, "{p}_ROOTFS is set but {p}_ROOTFS_SHA256 is not: a rootfs must be pinned by its sha256"),
    ({"ROOTFS_SHA256": "0" * 64}, "{p}_ROOTFS_SHA256 is set but {p}_ROOTFS is not: set {p}_ROOTFS to the rootfs "
     "archive it pins"),
    ({"ROOTFS": MISSING, "ROOTFS_SHA256": "0" * 64}, "{p}_ROOTFS='{tmp}/rootfs.tar': no such file"),
]  # fmt: skip


def _path_with(tmp_path: Path, *, qemu: bool) -> str:
    """A PATH holding only a stand-in qemu-aarch64-static (when ``qemu``), so the probe's runner check is fixed."""
    folder = tmp_path / "bin"
    folder.mkdir(parents=True)
    if qemu:
        tool = folder / "qemu-aarch64-static"
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(0o755)
    return str(folder)


@pytest.mark.parametrize("qemu", [True, False], ids=["with-qemu", "without-qemu"])
@pytest.mark.parametrize(("settings", "expected"), BAD_CONFIGURATIONS)
@pytest.mark.parametrize(("prefix", "reason_of"), PROBES)
def test_a_configuration_error_is_reported_whether_or_not_qemu_is_present(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    prefix: str,
    reason_of: Callable[[], str | None],
    settings: dict[str, str],
    expected: str,
    qemu: bool,
) -> None:
    monkeypatch.setenv("PATH", _path_with(tmp_path, qemu=qemu))
    for suffix, value in settings.items():
        monkeypatch.setenv(f"{prefix}_{suffix}", value.format(tmp=tmp_path))
    assert reason_of() == expected.format(p=prefix, tmp=tmp_path)


@pytest.mark.parametrize(("prefix", "reason_of"), PROBES)
def test_a_well_pinned_rootfs_then_needs_a_runner(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, prefix: str, reason_of: Callable[[], str | None]
) -> None:
    monkeypatch.setenv(f"{prefix}_ROOTFS", "https://example.com/rootfs.tar")  # URLs are not fetched by a probe
    monkeypatch.setenv(f"{prefix}_ROOTFS_SHA256", "0" * 64)
    monkeypatch.setenv("TINYHIL_TCC_SOURCE", f"https://example.com/tcc.tar.bz2 {'0' * 64}")  # QEMUCC's server source
    monkeypatch.setenv("PATH", _path_with(tmp_path, qemu=False))
    assert reason_of() == (
        "qemu-aarch64-static not found on PATH (Debian/Ubuntu package qemu-user-static), and the docker fallback "
        "is unusable: no docker client on PATH"
    )
    monkeypatch.setenv("PATH", _path_with(tmp_path / "again", qemu=True))
    assert reason_of() is None


def _normalized(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def test_a_configured_qcomcl_rootfs_runs_its_own_compile_server(
    qemucc: QemuCompiler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in for the Adreno rootfs: the tcc rootfs with the compile server installed inside it."""
    rootfs_dir, server = Path(qemucc.command[2]), Path(qemucc.command[3])
    archive = tmp_path / "qcom-rootfs.tar"
    with tarfile.open(archive, "w") as tar:
        for path in sorted(rootfs_dir.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(rootfs_dir)), recursive=False, filter=_normalized)
        info = tar.gettarinfo(str(server), arcname="opt/qcom/bin/compile-server")
        with open(server, "rb") as handle:
            tar.addfile(_normalized(info), handle)
    monkeypatch.setenv("TINYHIL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TINYHIL_QCOMCL_ROOTFS", archive.as_uri())
    monkeypatch.setenv("TINYHIL_QCOMCL_ROOTFS_SHA256", hashlib.sha256(archive.read_bytes()).hexdigest())
    monkeypatch.setenv("TINYHIL_QCOMCL_SERVER", "/opt/qcom/bin/compile-server")
    assert qcomcl_unavailable_reason() is None
    try:
        with open_target("NULL:QCOMCL:a630") as device:
            program = device.compile("int kernel(int x) { return x << 2; }", "kernel")
            assert ELFFile(io.BytesIO(program.binary))["e_machine"] == "EM_AARCH64"
    finally:
        shutdown_servers()
