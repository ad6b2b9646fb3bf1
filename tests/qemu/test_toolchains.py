"""The QEMUCC and QCOMCL toolchains: precise reasons when unusable, and a configured QCOMCL rootfs end to end."""

from __future__ import annotations

import hashlib
import io
import tarfile
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


@pytest.mark.parametrize(
    ("prefix", "reason_of"),
    [("TINYHIL_QCOMCL", qcomcl_unavailable_reason), ("TINYHIL_QEMUCC", qemucc_unavailable_reason)],
)
def test_a_pinned_rootfs_needs_its_digest_and_an_existing_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, prefix: str, reason_of: object
) -> None:
    monkeypatch.setenv(f"{prefix}_ROOTFS", str(tmp_path / "rootfs.tar"))
    assert reason_of() == (  # type: ignore[operator]
        f"{prefix}_ROOTFS is set but {prefix}_ROOTFS_SHA256 is not: a rootfs must be pinned by its sha256"
    )
    monkeypatch.setenv(f"{prefix}_ROOTFS_SHA256", "0" * 64)
    assert reason_of() == f"{prefix}_ROOTFS={str(tmp_path / 'rootfs.tar')!r}: no such file"  # type: ignore[operator]
    monkeypatch.setenv(f"{prefix}_ROOTFS", "https://example.com/rootfs.tar")  # URLs are not fetched by a probe
    monkeypatch.setenv("PATH", str(tmp_path))
    reason = reason_of()  # type: ignore[operator]
    assert reason is not None and reason.startswith("qemu-aarch64-static not found on PATH")


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
