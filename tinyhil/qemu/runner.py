"""How a foreign-architecture program runs here: under qemu-user, or in a docker container as the fallback.

- **qemu-user** (preferred): ``qemu-<arch>-static -L ROOTFS PROGRAM ARGS``. ``-L`` makes the guest's absolute
  paths (its dynamic loader, libraries, headers) resolve inside ROOTFS first and on the host otherwise, so host
  paths (the cache, temporary directories) stay visible to the guest as they are.
- **docker** (when no qemu-user binary is on ``PATH`` and a docker engine answers): the rootfs archive is
  imported once as an image (``docker import``, tagged by its sha256) and the program runs in it with
  ``docker run --platform linux/<arch>``; host directories the program needs are bind-mounted at the same paths.
  The engine needs binfmt_misc support for the arch (Docker Desktop has it; on Linux, ``qemu-user-static``).

``TINYHIL_QEMU_RUNNER=qemu|docker`` forces one of them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from tinyhil.cache import fetch
from tinyhil.errors import InvalidArgument

__all__ = [
    "ARCH2DOCKER_PLATFORM",
    "ARCH2ELF_MACHINE",
    "RUNNER_ENV",
    "GuestRunner",
    "Rootfs",
    "docker_engine_reason",
    "find_runner",
    "runner_unavailable_reason",
]

RUNNER_ENV: Final = "TINYHIL_QEMU_RUNNER"
# Guest architectures tinyhil can run, with docker's platform name and the ELF e_machine of their objects.
ARCH2DOCKER_PLATFORM: Final = {"aarch64": "linux/arm64"}
ARCH2ELF_MACHINE: Final = {"aarch64": 183}  # EM_AARCH64
DOCKER_PROBE_TIMEOUT_S: Final = 10.0
DOCKER_IMAGE_REPOSITORY: Final = "tinyhil-rootfs"
_IMAGE_TAG_CHARS: Final = 16

RunnerKind = Literal["qemu", "docker"]


@dataclass(frozen=True, slots=True)
class Rootfs:
    """An extracted root file system: its tree, the archive it came from (path or URL), and its sha256."""

    tree: Path
    source: str
    sha256: str

    @property
    def docker_image(self) -> str:
        return f"{DOCKER_IMAGE_REPOSITORY}:{self.sha256[:_IMAGE_TAG_CHARS]}"


@dataclass(frozen=True, slots=True)
class GuestRunner:
    """Runs programs of one guest ``arch`` through ``executable`` (a qemu-user binary or the docker client)."""

    kind: RunnerKind
    arch: str
    executable: str

    def __post_init__(self) -> None:
        if self.arch not in ARCH2DOCKER_PLATFORM:
            raise InvalidArgument(f"arch={self.arch!r}, expected one of {sorted(ARCH2DOCKER_PLATFORM)}")
        if self.kind not in ("qemu", "docker"):
            raise InvalidArgument(f"kind={self.kind!r}, expected 'qemu' or 'docker'")

    def command(
        self, rootfs: Rootfs, program: str | os.PathLike[str], args: Sequence[str] = (), mounts: Sequence[Path] = ()
    ) -> list[str]:
        """The argv that runs ``program`` (a host path, inside or outside the rootfs) with ``args``.

        ``mounts`` are host directories the program reads or writes (docker bind-mounts them; qemu sees them).
        """
        program_path = Path(program)
        if self.kind == "qemu":
            return [self.executable, "-L", str(rootfs.tree), str(program_path), *args]
        if program_path.is_relative_to(rootfs.tree):
            guest_program = "/" + str(program_path.relative_to(rootfs.tree))
            extra: list[Path] = []
        else:
            guest_program, extra = str(program_path), [program_path.parent]
        volumes = [f"--volume={m}:{m}" for m in sorted({*map(Path, mounts), *extra})]
        platform = ARCH2DOCKER_PLATFORM[self.arch]
        return [
            self.executable, "run", "--rm", "--interactive", f"--platform={platform}", "--network=none",
            *volumes, rootfs.docker_image, guest_program, *args,
        ]  # fmt: skip

    def prepare(self, rootfs: Rootfs) -> None:
        """Make ``rootfs`` runnable: nothing for qemu; for docker, import the archive as an image once.

        Raises:
            OSError: the docker import failed (its message is attached).
        """
        if self.kind == "qemu":
            return
        image = rootfs.docker_image
        found = subprocess.run([self.executable, "image", "inspect", image], capture_output=True, check=False)
        if found.returncode == 0:
            return
        platform = ARCH2DOCKER_PLATFORM[self.arch]
        archive = fetch(rootfs.source, sha256=rootfs.sha256)
        done = subprocess.run(
            [self.executable, "import", f"--platform={platform}", str(archive), image],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise OSError(f"docker import of {archive} as {image} failed: {done.stderr.strip()}")


def docker_engine_reason(docker: str | None = None) -> str | None:
    """``None`` when a docker client is installed and its engine answers, else precisely what is missing."""
    client = docker or shutil.which("docker")
    if client is None:
        return "no docker client on PATH"
    try:
        done = subprocess.run(
            [client, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=DOCKER_PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"docker client {client} found, but its engine gave no answer within {DOCKER_PROBE_TIMEOUT_S} s"
    except OSError as exc:
        return f"docker client {client} cannot run: {exc}"
    if done.returncode != 0 or not done.stdout.strip():
        said = (done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}").splitlines()[0]
        return f"docker client {client} found, but no docker engine answers ({said})"
    return None


def _qemu_binary(arch: str) -> str:
    return f"qemu-{arch}-static"


def find_runner(arch: str) -> GuestRunner | str:
    """The runner for ``arch`` guests here, or the precise reason there is none.

    Raises:
        InvalidArgument: unknown ``arch``, or ``TINYHIL_QEMU_RUNNER`` is neither ``qemu`` nor ``docker``.
    """
    if arch not in ARCH2DOCKER_PLATFORM:
        raise InvalidArgument(f"arch={arch!r}, expected one of {sorted(ARCH2DOCKER_PLATFORM)}")
    forced = os.environ.get(RUNNER_ENV, "").strip().lower()
    if forced not in ("", "qemu", "docker"):
        raise InvalidArgument(f"{RUNNER_ENV}={forced!r}, expected 'qemu', 'docker' or unset (try qemu, then docker)")
    qemu = _qemu_binary(arch)
    qemu_path = shutil.which(qemu)
    if forced != "docker" and qemu_path is not None:
        return GuestRunner("qemu", arch, qemu_path)
    qemu_missing = f"{qemu} not found on PATH (Debian/Ubuntu package qemu-user-static)"
    if forced == "qemu":
        return f"{qemu_missing}, and {RUNNER_ENV}=qemu rules out the docker fallback"
    docker_reason = docker_engine_reason()
    if docker_reason is None:
        return GuestRunner("docker", arch, shutil.which("docker") or "docker")
    if forced == "docker":
        return f"{RUNNER_ENV}=docker, but the docker fallback is unusable: {docker_reason}"
    return f"{qemu_missing}, and the docker fallback is unusable: {docker_reason}"


def runner_unavailable_reason(arch: str) -> str | None:
    """``None`` when ``arch`` programs can run here, else why not (see :func:`find_runner`)."""
    found = find_runner(arch)
    return found if isinstance(found, str) else None
