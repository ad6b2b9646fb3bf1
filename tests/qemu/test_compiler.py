"""The qemu-backed compiler for real: Debian's tcc for aarch64 under qemu-user, behind one long-lived server."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from tinyhil import CompileError, InvalidArgument, open_target
from tinyhil.process_pool import compile_many, get_pool, shutdown_pool
from tinyhil.qemu import CompileServerError, QemuCompiler, shutdown_servers
from tinyhil.qemu.server import CompileServer

KERNEL = b"""
#include <stdint.h>
#include <string.h>
void scale(uint32_t *out, const uint32_t *in, uint32_t factor, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) out[i] = in[i] * factor;
    memset(out + n, 0, 4);
}
"""


def _functions(elf: ELFFile) -> set[str]:
    symtab = elf.get_section_by_name(".symtab")
    return {s.name for s in symtab.iter_symbols() if s["st_info"]["type"] == "STT_FUNC"}  # type: ignore[union-attr]


def test_compiles_real_c_to_an_aarch64_relocatable_object(qemucc: QemuCompiler) -> None:
    elf = ELFFile(io.BytesIO(qemucc.compile(KERNEL)))
    assert elf["e_machine"] == "EM_AARCH64" and elf["e_type"] == "ET_REL" and elf.elfclass == 64
    assert elf.little_endian
    assert "scale" in _functions(elf)
    assert elf.get_section_by_name(".text").data_size > 0  # type: ignore[union-attr]


def test_a_compile_error_returns_the_compilers_message(qemucc: QemuCompiler) -> None:
    with pytest.raises(CompileError) as info:
        qemucc.compile(b"int f(void) { return nope; }")
    assert info.value.compiler == "QEMUCC:aarch64"
    assert info.value.message == "<string>:1: error: 'nope' undeclared"
    assert qemucc.compile(b"int fine;").startswith(b"\x7fELF"), "the server keeps serving after a compile error"


def _slow_source(functions: int = 20_000) -> bytes:
    body = "int f{0}(int x) {{ int y = x * {0}; for (int j = 0; j < x; j++) y += j ^ {0}; return y; }}"
    return "\n".join(body.format(i) for i in range(functions)).encode()


def test_a_server_killed_mid_request_gives_a_clear_error_and_the_next_request_works(qemucc: QemuCompiler) -> None:
    qemucc.compile(b"int warm;")
    server = qemucc.server
    victim = server.pid
    assert victim is not None
    starts = server.starts
    threading.Timer(0.3, os.kill, (victim, 9)).start()  # the slow source compiles for about 1.5 s under qemu
    with pytest.raises(CompileServerError, match=r"killed by SIGKILL.*the next request restarts it"):
        qemucc.compile(_slow_source())
    assert not os.path.exists(f"/proc/{victim}"), "the dead server was reaped"
    assert ELFFile(io.BytesIO(qemucc.compile(KERNEL)))["e_machine"] == "EM_AARCH64"
    assert server.starts == starts + 1


def test_shutdown_leaves_no_server_process(qemucc: QemuCompiler) -> None:
    qemucc.compile(b"int x;")
    pid = qemucc.server.pid
    assert pid is not None
    shutdown_servers()
    assert not os.path.exists(f"/proc/{pid}")
    assert qemucc.compile(b"int y;").startswith(b"\x7fELF"), "a later compile starts a new server"


def test_one_server_serves_every_compiler_with_the_same_command(qemucc: QemuCompiler) -> None:
    twin = QemuCompiler(qemucc.name, qemucc.command, elf_machine=183)
    assert twin.server is qemucc.server
    assert isinstance(twin.server, CompileServer)


def test_the_null_qemucc_target_compiles_to_aarch64(qemucc_target: str) -> None:
    with open_target(qemucc_target) as device:
        assert {"compile", "compile-only", "qemu-compiler"} <= device.capabilities | {"compile-only", "qemu-compiler"}
        program = device.compile(KERNEL.decode(), "scale")
        assert ELFFile(io.BytesIO(program.binary))["e_machine"] == "EM_AARCH64"
        device.exec(program, 1, 1, [device.alloc(64)])


def _children_of(parents: set[int]) -> dict[int, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
                if ppid in parents:
                    found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, IndexError, ValueError):
                continue
    return found


def test_per_worker_servers_compile_the_same_objects_and_stop_with_the_pool(
    qemucc: QemuCompiler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARALLEL", "2")
    shutdown_pool()
    kernels = [KERNEL.replace(b"in[i] * factor", f"in[i] * factor + {i}".encode()) for i in range(6)]
    try:
        shared = compile_many(qemucc, kernels)
        per_worker = QemuCompiler(qemucc.name, qemucc.command, elf_machine=183, per_worker_servers=True)
        assert compile_many(per_worker, kernels) == shared
        pool = get_pool()
        assert pool is not None
        workers = set(pool.pids)
        servers = {pid for pid, cmd in _children_of(workers).items() if "qemu" in cmd}
        assert 1 <= len(servers) <= len(workers), "each worker that compiled started a server of its own"
    finally:
        shutdown_pool()
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{pid}") for pid in workers | servers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = {
        pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in workers | servers if os.path.exists(f"/proc/{pid}")
    }
    assert left == {}, "no worker and no worker's server outlives the pool"


def test_the_portable_suite_passes_on_null_qemucc_compiling_real_c(qemucc: QemuCompiler, tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={junit}", "--hil-target",
         "NULL:QEMUCC:aarch64", "--pyargs", "tinyhil.fixtures.suite"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    for test in ("test_compile_error_carries_the_compiler_message", "test_programs_with_one_name_and_different_code"):
        [case] = [c for name, c in cases.items() if name and name.startswith(test)]
        outcome = [child.tag for child in case if child.tag in ("skipped", "failure", "error")]
        assert not outcome, f"{test} did not pass: {ET.tostring(case)!r}"


# --- the compiler seam and its server registry, against the stand-in server (no qemu needed) -------------------------
FAKE = [sys.executable, str(Path(__file__).with_name("fake_ccserver.py"))]


def test_an_output_that_is_not_the_expected_elf_is_a_server_error() -> None:
    compiler = QemuCompiler("FAKE", FAKE, elf_machine=183)
    try:
        with pytest.raises(
            CompileServerError, match=r"returned b'OBJ:int x;'.*expected an ELF object with e_machine=183"
        ):
            compiler.compile(b"int x;")
    finally:
        shutdown_servers()


def test_a_compiler_pickles_as_configuration_and_finds_this_processes_server() -> None:
    compiler = QemuCompiler("FAKE", FAKE)
    try:
        assert compiler.compile(b"a") == b"OBJ:a"
        again = pickle.loads(pickle.dumps(compiler))
        assert again.server is compiler.server and again.compile(b"b") == b"OBJ:b"
        assert compiler.server.starts == 1
    finally:
        shutdown_servers()


def test_a_forked_child_does_not_inherit_the_parents_server() -> None:
    compiler = QemuCompiler("FAKE", FAKE)
    try:
        compiler.compile(b"a")
        parent_server = compiler.server
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            os._exit(0 if compiler.server is not parent_server and compiler.server.pid is None else 1)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert compiler.server is parent_server and parent_server.pid is not None
    finally:
        shutdown_servers()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "", "command": FAKE}, "expected a name and a server command"),
        ({"name": "X", "command": []}, "expected a name and a server command"),
        ({"name": "X", "command": FAKE, "timeout_s": 0}, "timeout_s=0, expected a positive number of seconds"),
        ({"name": "X", "command": FAKE, "start_timeout_s": -1.0}, "start_timeout_s=-1.0, expected a positive"),
    ],
)
def test_bad_compiler_configuration_raises_invalid_argument(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        QemuCompiler(**kwargs)  # type: ignore[arg-type]
