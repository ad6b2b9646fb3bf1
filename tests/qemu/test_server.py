"""The host side of a compile server, against a stand-in server that misbehaves on request (no qemu needed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tinyhil.errors import CompileError, InvalidArgument, StateError
from tinyhil.qemu import CompileServer, CompileServerError, CompileServerTimeout, Status
from tinyhil.qemu.protocol import MAX_FRAME_BYTES

FAKE = Path(__file__).with_name("fake_ccserver.py")


def _server(mode: str = "normal", **kwargs: float) -> CompileServer:
    return CompileServer([sys.executable, str(FAKE), mode], name="FAKE", **kwargs)


@pytest.fixture
def server() -> Iterator[CompileServer]:
    with _server(timeout_s=10.0) as srv:
        yield srv


def _gone(pid: int) -> bool:
    return not os.path.exists(f"/proc/{pid}")


def test_requests_share_one_long_lived_server(server: CompileServer) -> None:
    assert server.pid is None, "started on demand"
    assert server.compile(b"int a;") == b"OBJ:int a;"
    pid = server.pid
    assert server.banner == "tinyhil-ccserver 1 fake"
    for index in range(5):
        assert server.compile(f"int k{index};".encode()) == f"OBJ:int k{index};".encode()
    assert server.pid == pid and server.starts == 1


def test_a_compile_error_carries_the_compiler_message(server: CompileServer) -> None:
    with pytest.raises(CompileError) as info:
        server.compile(b"bad source;")
    assert info.value.compiler == "FAKE"
    assert info.value.message == "<string>:1: error: bad source;"
    assert server.compile(b"fine") == b"OBJ:fine", "a compile error leaves the server serving"


def test_an_internal_error_is_not_a_compile_error(server: CompileServer) -> None:
    with pytest.raises(CompileServerError, match="internal error: out of memory") as info:
        server.compile(b"internal")
    assert not isinstance(info.value, CompileError)
    assert server.request(b"x").status is Status.OK


FAULTS = [
    ("crash-on-start", "x", CompileServerError, r"exited with status 3.*cannot load the compiler library"),
    ("bad-banner", "x", CompileServerError, r"banner OK 'something else 1', expected 'tinyhil-ccserver 1'"),
    ("silent", "x", CompileServerTimeout, r"gave no its start-up banner within 0.5 s; killed it"),
    ("normal", "unknown-status", CompileServerError, r"reply status 7, expected one of 0 \(OK\)"),
    ("normal", "huge-frame", CompileServerError, r"frame of 0xffffffff bytes, expected at most 0x4000000"),
    ("normal", "half-reply", CompileServerError, r"closed its output before sending a reply.*exited with status 0"),
    ("normal", "hang", CompileServerTimeout, r"gave no a reply within 0.5 s; killed it"),
    ("normal", "die", CompileServerError, r"was killed by SIGKILL; its stderr ends with: fake: dying mid-request"),
]


@pytest.mark.parametrize(("mode", "source", "error", "message"), FAULTS, ids=[f"{m}-{s}" for m, s, _, _ in FAULTS])
def test_server_faults_give_clear_errors_and_leave_no_process(
    mode: str, source: str, error: type[Exception], message: str
) -> None:
    with _server(mode, timeout_s=0.5, start_timeout_s=0.5) as srv:
        started = time.monotonic()
        with pytest.raises(error, match=message):
            srv.request(source.encode())
        assert time.monotonic() - started < 5.0, "a hung server is given up on within its timeout"
        assert srv.pid is None, "the failed server was killed and reaped"


def test_a_server_killed_mid_request_fails_that_request_and_the_next_one_restarts_it(server: CompileServer) -> None:
    first_pid = int(server.request(b"pid").payload)
    with pytest.raises(CompileServerError, match="the next request restarts it"):
        server.compile(b"die")
    assert _gone(first_pid)
    assert server.compile(b"after") == b"OBJ:after"
    assert server.starts == 2 and server.pid not in (None, first_pid)


def test_a_hung_server_is_killed_and_replaced() -> None:
    with _server(timeout_s=0.5) as srv:
        pid = int(srv.request(b"pid").payload)
        with pytest.raises(CompileServerTimeout):
            srv.compile(b"hang")
        assert _gone(pid)
        assert srv.compile(b"again") == b"OBJ:again" and srv.starts == 2


def _kill_and_wait(server: CompileServer, pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while server.pid is not None and time.monotonic() < deadline:  # .pid polls (and reaps) the process
        time.sleep(0.01)


def test_a_server_that_died_while_idle_is_restarted_transparently(server: CompileServer) -> None:
    _kill_and_wait(server, int(server.request(b"pid").payload))
    assert server.compile(b"x") == b"OBJ:x" and server.starts == 2


def test_restart_is_attempted_once_per_request_not_in_a_loop() -> None:
    with _server("crash-on-start") as srv:
        for attempt in range(1, 3):
            with pytest.raises(CompileServerError, match="cannot load the compiler library"):
                srv.compile(b"x")
            assert srv.starts == attempt


def test_close_stops_and_reaps_the_server_and_refuses_later_requests(server: CompileServer) -> None:
    pid = int(server.request(b"pid").payload)
    server.close()
    assert _gone(pid), "stopped and reaped: no zombie"
    server.close()  # closing twice is harmless
    with pytest.raises(StateError, match=r"request\(\) called, but the server is closed"):
        server.request(b"x")


ORPHAN_SCRIPT = """
import ctypes, os, subprocess, sys, time
PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphans of our child become ours: we can see them exit
owner = subprocess.Popen([sys.executable, "-c", {owner!r}], stdout=subprocess.PIPE, text=True)
server_pid = int(owner.stdout.readline())
owner.kill()  # the server's parent dies without closing anything
owner.wait()
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    pid, status = os.waitpid(server_pid, os.WNOHANG)
    if pid:
        print("server exited", os.waitstatus_to_exitcode(status))
        break
    time.sleep(0.02)
else:
    os.kill(server_pid, 9)
    print("server outlived its parent")
"""

OWNER_SCRIPT = """
import sys
from tinyhil.qemu import CompileServer
server = CompileServer([sys.executable, {fake!r}], name="FAKE")
print(int(server.request(b"pid").payload), flush=True)
import time; time.sleep(3600)
"""


def test_a_server_whose_parent_is_killed_exits_by_itself() -> None:
    owner = textwrap.dedent(OWNER_SCRIPT).format(fake=str(FAKE))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(ORPHAN_SCRIPT).format(owner=owner)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.strip() == "server exited 0", done.stdout + done.stderr


class ServerLifecycle(RuleBasedStateMachine):
    """Requests, compile errors, deaths and hangs in any order: every outcome is the expected one."""

    def __init__(self) -> None:
        super().__init__()
        self.server = _server(timeout_s=0.3)
        self.expected_starts = 0
        self.alive = False

    def _expect_start(self) -> None:
        if not self.alive:
            self.expected_starts += 1
            self.alive = True

    @rule(text=st.text(alphabet="abcdefxyz ;", min_size=1, max_size=12))
    def compile_ok(self, text: str) -> None:
        source = ("ok " + text).encode()
        self._expect_start()
        assert self.server.compile(source) == b"OBJ:" + source

    @rule()
    def compile_error(self) -> None:
        self._expect_start()
        with pytest.raises(CompileError, match="bad"):
            self.server.compile(b"bad")

    @rule(fault=st.sampled_from([b"die", b"hang"]))
    def server_fails_mid_request(self, fault: bytes) -> None:
        self._expect_start()
        with pytest.raises(CompileServerError):
            self.server.compile(fault)
        self.alive = False

    @rule()
    def killed_while_idle(self) -> None:
        pid = self.server.pid
        if pid is not None:
            _kill_and_wait(self.server, pid)
            self.alive = False

    @invariant()
    def starts_only_when_needed(self) -> None:
        assert self.server.starts == self.expected_starts

    def teardown(self) -> None:
        pid = self.server.pid
        self.server.close()
        assert pid is None or _gone(pid)


TestServerLifecycle = ServerLifecycle.TestCase
TestServerLifecycle.settings = settings(max_examples=8, stateful_step_count=6, deadline=None)


def test_sources_beyond_the_frame_limit_are_refused_before_sending(server: CompileServer) -> None:
    with pytest.raises(InvalidArgument, match="request of 0x4000001 bytes to FAKE, expected at most 0x4000000"):
        server.request(bytes(MAX_FRAME_BYTES + 1))
    assert server.starts == 0, "nothing was started for a request that could never be sent"


def test_a_missing_server_program_is_a_clear_start_error() -> None:
    srv = CompileServer(["/nonexistent/qemu-aarch64-static"], name="FAKE")
    with pytest.raises(CompileServerError, match="cannot start '/nonexistent/qemu-aarch64-static'"):
        srv.compile(b"x")
    srv.close()
