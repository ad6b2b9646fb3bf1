"""Choosing how guest programs run: qemu-user first, the docker fallback only when an engine answers."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tinyhil.errors import InvalidArgument
from tinyhil.qemu.runner import GuestRunner, Rootfs, docker_engine_reason, find_runner, runner_unavailable_reason

ROOTFS = Rootfs(Path("/cache/extracted/abc"), "/cache/rootfs/tcc.tar", "ab" * 32)


def _fake_tool(folder: Path, name: str, script: str) -> Path:
    folder.mkdir(exist_ok=True)
    tool = folder / name
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(0o755)
    return tool


NO_ENGINE = 'echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2\nexit 1\n'
# A docker client whose engine answers: logs its arguments, has no images yet, imports succeed.
ENGINE = 'echo "$@" >> "${0%/*}/calls"\n[ "$1" = version ] && echo 24.0.7\n[ "$2" = inspect ] && exit 1\nexit 0\n'


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH holding only the tools a test puts there."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.delenv("TINYHIL_QEMU_RUNNER", raising=False)
    return folder


def test_the_qemu_command_runs_the_program_with_the_rootfs_as_prefix() -> None:
    runner = GuestRunner("qemu", "aarch64", "/usr/bin/qemu-aarch64-static")
    assert runner.command(ROOTFS, ROOTFS.tree / "usr/bin/tcc", ["-c", "x.c"]) == [
        "/usr/bin/qemu-aarch64-static", "-L", "/cache/extracted/abc", "/cache/extracted/abc/usr/bin/tcc", "-c", "x.c",
    ]  # fmt: skip


def test_the_docker_command_maps_rootfs_programs_and_mounts_host_ones() -> None:
    runner = GuestRunner("docker", "aarch64", "/usr/bin/docker")
    inside = runner.command(ROOTFS, ROOTFS.tree / "usr/bin/tcc", ["-v"], mounts=[Path("/tmp/work")])
    assert inside == [
        "/usr/bin/docker", "run", "--rm", "--interactive", "--platform=linux/arm64", "--network=none",
        "--volume=/tmp/work:/tmp/work", "tinyhil-rootfs:abababababababab", "/usr/bin/tcc", "-v",
    ]  # fmt: skip
    outside = runner.command(ROOTFS, Path("/cache/servers/k/ccserver"))
    assert outside[-3:] == ["--volume=/cache/servers/k:/cache/servers/k", "tinyhil-rootfs:abababababababab",
                            "/cache/servers/k/ccserver"]  # fmt: skip


def test_qemu_user_is_preferred(bin_dir: Path) -> None:
    qemu = _fake_tool(bin_dir, "qemu-aarch64-static", "exit 0\n")
    _fake_tool(bin_dir, "docker", ENGINE)
    assert find_runner("aarch64") == GuestRunner("qemu", "aarch64", str(qemu))
    assert runner_unavailable_reason("aarch64") is None


def test_without_qemu_or_docker_the_reason_names_both(bin_dir: Path) -> None:
    assert runner_unavailable_reason("aarch64") == (
        "qemu-aarch64-static not found on PATH (Debian/Ubuntu package qemu-user-static), and the docker fallback "
        "is unusable: no docker client on PATH"
    )


def test_a_docker_client_without_an_engine_is_reported_precisely(bin_dir: Path) -> None:
    docker = _fake_tool(bin_dir, "docker", NO_ENGINE)
    reason = runner_unavailable_reason("aarch64")
    assert reason is not None
    assert reason.endswith(
        f"docker fallback is unusable: docker client {docker} found, but no docker engine answers "
        "(Cannot connect to the Docker daemon at unix:///var/run/docker.sock.)"
    )


def test_the_docker_fallback_is_used_when_an_engine_answers(bin_dir: Path) -> None:
    docker = _fake_tool(bin_dir, "docker", ENGINE)
    runner = find_runner("aarch64")
    assert runner == GuestRunner("docker", "aarch64", str(docker))


def test_docker_prepare_imports_the_rootfs_archive_once_as_an_image(bin_dir: Path, tmp_path: Path) -> None:
    docker = _fake_tool(bin_dir, "docker", ENGINE)
    archive = tmp_path / "rootfs.tar"
    archive.write_bytes(b"not really a tar; docker is a fake here")
    rootfs = Rootfs(tmp_path / "tree", str(archive), hashlib.sha256(archive.read_bytes()).hexdigest())
    GuestRunner("docker", "aarch64", str(docker)).prepare(rootfs)
    calls = (bin_dir / "calls").read_text().splitlines()
    assert calls == [
        f"image inspect {rootfs.docker_image}",
        f"import --platform=linux/arm64 {archive} {rootfs.docker_image}",
    ]


def test_forcing_a_runner(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_tool(bin_dir, "qemu-aarch64-static", "exit 0\n")
    docker = _fake_tool(bin_dir, "docker", ENGINE)
    monkeypatch.setenv("TINYHIL_QEMU_RUNNER", "docker")
    assert find_runner("aarch64") == GuestRunner("docker", "aarch64", str(docker))
    (bin_dir / "qemu-aarch64-static").unlink()
    monkeypatch.setenv("TINYHIL_QEMU_RUNNER", "qemu")
    assert runner_unavailable_reason("aarch64") == (
        "qemu-aarch64-static not found on PATH (Debian/Ubuntu package qemu-user-static), and "
        "TINYHIL_QEMU_RUNNER=qemu rules out the docker fallback"
    )


BAD_INPUTS = [
    (lambda: find_runner("riscv64"), "arch='riscv64', expected one of \\['aarch64'\\]"),
    (lambda: GuestRunner("qemu", "mips", "q"), "arch='mips', expected one of"),
    (lambda: GuestRunner("podman", "aarch64", "p"), "kind='podman', expected 'qemu' or 'docker'"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("call", "message"), BAD_INPUTS)
def test_bad_input_raises_invalid_argument(call: object, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        call()  # type: ignore[operator]


def test_a_bad_forced_runner_is_invalid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYHIL_QEMU_RUNNER", "vmware")
    with pytest.raises(InvalidArgument, match="TINYHIL_QEMU_RUNNER='vmware', expected 'qemu', 'docker' or unset"):
        find_runner("aarch64")


def test_this_machines_docker_client_is_detected_precisely() -> None:
    client = shutil.which("docker")
    if client is None:
        assert docker_engine_reason() == "no docker client on PATH"
        return
    reason = docker_engine_reason()
    if reason is None:
        pytest.skip(f"a docker engine answers {client}: nothing unusable to report")
    assert reason.startswith(f"docker client {client} found, but ")
