"""The real qemu toolchain for the tests that need it: built once per machine (cached), or a precise skip.

Every test that needs qemu-user-static (or a docker engine) and the Debian rootfs asks for ``qemucc_target`` (the
target name, once it can open here) or ``qemucc`` (its compiler); both skip through :func:`qemucc_skip_reason`, the
one place that turns the target's own availability probe into a skip. Tests that need none of it (the stand-in
compile server, the protocol, configuration errors) take neither and run everywhere.
"""

from __future__ import annotations

from typing import Final

import pytest

from tinyhil.qemu.compiler import QemuCompiler
from tinyhil.qemu.toolchains import qemucc_compiler
from tinyhil.registry import default_registry

QEMUCC_TARGET: Final = "NULL:QEMUCC:aarch64"


def qemucc_skip_reason(target: str = QEMUCC_TARGET) -> str | None:
    """``None`` when ``target`` can open here, else the skip reason: its probe's reason, naming the missing package.

    The probe is the one ``open_target`` consults, so a test skips exactly when opening the target would be refused.
    """
    reason = default_registry().resolve(target).unavailable_reason()
    return None if reason is None else f"target {target} is unavailable here: {reason}"


@pytest.fixture(scope="session")
def qemucc_target() -> str:
    """The name of the qemu-backed compile-only target, or a skip naming what is missing (e.g. qemu-user-static)."""
    reason = qemucc_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    return QEMUCC_TARGET


@pytest.fixture(scope="session")
def qemucc(qemucc_target: str) -> QemuCompiler:
    """Debian's tcc for aarch64 behind its compile server.

    Skips, naming the missing tool, where qemu-user (or a docker engine) or the Debian tools to build the rootfs
    are missing; where they are present, a failed build is an error, not a skip.
    """
    return qemucc_compiler("aarch64")
