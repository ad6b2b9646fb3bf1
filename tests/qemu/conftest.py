"""The real qemu toolchain for the tests that need it: built once per machine (cached), or a precise skip."""

from __future__ import annotations

import pytest

from tinyhil.qemu.compiler import QemuCompiler
from tinyhil.qemu.toolchains import qemucc_compiler, qemucc_unavailable_reason


@pytest.fixture(scope="session")
def qemucc() -> QemuCompiler:
    """Debian's tcc for aarch64 behind its compile server.

    Skips, naming the missing tool, where qemu-user (or a docker engine) or the Debian tools to build the rootfs
    are missing; where they are present, a failed build is an error, not a skip.
    """
    reason = qemucc_unavailable_reason("aarch64")
    if reason is not None:
        pytest.skip(f"target NULL:QEMUCC:aarch64 is unavailable here: {reason}")
    return qemucc_compiler("aarch64")
