"""The host side of a compile server: one long-lived process, framed requests, bounded waits, one restart.

Lifecycle::

    (not started) --request--> starting --banner--> ready --request--> ready
                                   |                  |  \\-- died / timed out --> dead --request--> starting
                                   \\-- no banner --> error (raised)               (one restart per request)
    any state --close--> closed (stdin closed; terminate, then kill, after a grace period; always reaped)

- A request that finds the server dead restarts it once; if the restarted server does not come up, the request
  fails with the start-up error. A server that dies *during* a request fails that request (the source may be
  what kills it, so it is not retried) and is restarted by the next one.
- Every wait has a deadline: a hung server is killed and the request raises :class:`CompileServerTimeout`.
- The server runs in a session of its own, so a terminal's Ctrl-C reaches tinyhil (which decides) rather than
  the server; and it exits by itself when its stdin closes, so it cannot outlive a parent that was killed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Final

from tinyhil.errors import CompileError, InvalidArgument, StateError
from tinyhil.qemu.protocol import (
    BANNER_PREFIX,
    FRAME_HEADER,
    MAX_FRAME_BYTES,
    CompileServerError,
    CompileServerTimeout,
    Reply,
    Status,
    decode_reply,
    encode_frame,
)

__all__ = ["DEFAULT_START_TIMEOUT_S", "DEFAULT_TIMEOUT_S", "CompileServer"]

DEFAULT_TIMEOUT_S: Final = 60.0
DEFAULT_START_TIMEOUT_S: Final = 60.0
CLOSE_GRACE_S: Final = 5.0
_STDERR_TAIL_BYTES: Final = 2000
_READ_CHUNK_BYTES: Final = 1 << 16


class CompileServer:
    """A compile server process speaking :mod:`tinyhil.qemu.protocol`; see the module docstring.

    ``command`` starts the server (e.g. ``qemu-aarch64-static -L ROOTFS SERVER``); ``name`` is the compiler name
    used in errors. Thread-safe: requests from several threads are served one at a time.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        name: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.command = list(command)
        self.name = name
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.env = dict(env) if env is not None else None
        self.banner: str | None = None
        self.starts = 0
        self.closed = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._buffer = bytearray()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<CompileServer {self.name} pid={self.pid} starts={self.starts}{' closed' if self.closed else ''}>"

    def __enter__(self) -> CompileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The running server's process id, or ``None`` when none is running."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    # --- public operations -----------------------------------------------------------------------------------------
    def request(self, payload: bytes) -> Reply:
        """Send one request and return the server's reply (starting or restarting the server as needed).

        Raises:
            CompileServerError: the server could not start, died during the request, or broke the protocol.
            CompileServerTimeout: no complete reply within ``timeout_s`` (the server was killed).
            InvalidArgument: ``payload`` is longer than the protocol's frame limit.
            StateError: the server was closed.
        """
        if len(payload) > MAX_FRAME_BYTES:
            raise InvalidArgument(
                f"request of {len(payload):#x} bytes to {self.name}, expected at most {MAX_FRAME_BYTES:#x}"
            )
        with self._lock:
            if self.closed:
                raise StateError(f"{self!r}.request() called, but the server is closed")
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            deadline = time.monotonic() + self.timeout_s
            self._write(encode_frame(payload), deadline)
            return self._decode(self._read_frame(deadline, "a reply"))

    def compile(self, source: bytes) -> bytes:
        """Compile ``source``; returns the server's binary.

        Raises:
            CompileError: the compiler rejected the source (its message is attached).
            CompileServerError: the server failed (see :meth:`request`).
        """
        reply = self.request(source)
        if reply.status is Status.OK:
            return reply.payload
        if reply.status is Status.COMPILE_ERROR:
            raise CompileError(self.name, reply.text.strip())
        raise CompileServerError(self.name, f"internal error: {reply.text.strip()}")

    def start(self) -> None:
        """Start the server now (requests start it on demand); a running server is left alone."""
        with self._lock:
            if self.closed:
                raise StateError(f"{self!r}.start() called, but the server is closed")
            if self._proc is None or self._proc.poll() is not None:
                self._start()

    def close(self) -> None:
        """Stop the server: close its stdin, wait, then terminate and kill; the process is always reaped."""
        with self._lock:
            self.closed = True
            self._stop(graceful=True)

    # --- process management ----------------------------------------------------------------------------------------
    def _start(self) -> None:
        self._stop(graceful=False)  # reap a dead predecessor
        self._stderr = tempfile.TemporaryFile(prefix="tinyhil-ccserver-stderr-")  # noqa: SIM115  # closed in _stop
        try:
            proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=self.env,
                start_new_session=True,
            )
        except OSError as exc:
            self._stop(graceful=False)  # closes the stderr file
            raise CompileServerError(self.name, f"cannot start {self.command[0]!r}: {exc}") from exc
        self._proc = proc
        self.starts += 1
        assert proc.stdin is not None and proc.stdout is not None  # both are pipes
        flags = fcntl.fcntl(proc.stdin.fileno(), fcntl.F_GETFL)
        fcntl.fcntl(proc.stdin.fileno(), fcntl.F_SETFL, flags | os.O_NONBLOCK)
        self._buffer.clear()
        deadline = time.monotonic() + self.start_timeout_s
        reply = self._decode(self._read_frame(deadline, "its start-up banner"))
        if reply.status is not Status.OK or not reply.text.startswith(BANNER_PREFIX):
            self._stop(graceful=False)
            raise CompileServerError(
                self.name, f"start-up banner {reply.status.name} {reply.text!r}, expected {BANNER_PREFIX!r}"
            )
        self.banner = reply.text

    def _decode(self, frame: bytes) -> Reply:
        """Decode a reply; a server that breaks the protocol is stopped (it cannot be trusted any more)."""
        try:
            return decode_reply(frame, compiler=self.name)
        except CompileServerError as exc:
            self._stop(graceful=False)
            message = f"{exc.message}; stopped the server (the next request restarts it)"
            raise CompileServerError(self.name, message) from None

    def _stop(self, *, graceful: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()  # end of input: a healthy server exits by itself
            if graceful and proc.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(CLOSE_GRACE_S)
            for sig in (signal.SIGTERM, signal.SIGKILL):
                if proc.poll() is not None:
                    break
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(CLOSE_GRACE_S)
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _failure(self, what: str, *, timed_out: bool = False) -> CompileServerError:
        """Kill and reap the server, then describe why it failed (exit status and the tail of its stderr)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        status = proc.wait() if proc is not None else None
        tail = b""
        if self._stderr is not None:
            self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, self._stderr.tell() - _STDERR_TAIL_BYTES))
            tail = self._stderr.read()
        self._stop(graceful=False)
        if status is not None and status < 0:
            exited = f"was killed by {signal.Signals(-status).name}"
        else:
            exited = f"exited with status {status}"
        detail = f"; its stderr ends with: {tail.decode(errors='replace').strip()}" if tail.strip() else ""
        if timed_out:
            return CompileServerTimeout(self.name, f"{what}; killed it{detail} (the next request starts a new one)")
        return CompileServerError(self.name, f"{what}: the server {exited}{detail} (the next request restarts it)")

    # --- framed I/O with deadlines -----------------------------------------------------------------------------------
    def _write(self, data: bytes, deadline: float) -> None:
        proc = self._proc
        assert proc is not None and proc.stdin is not None  # _start ran
        fd = proc.stdin.fileno()
        view = memoryview(data)
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._failure(f"accepted no request within {self.timeout_s} s", timed_out=True)
            if not poller.poll(remaining * 1000):
                continue
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                raise self._failure("the server closed its input while a request was sent") from None
            view = view[written:]

    def _read_frame(self, deadline: float, what: str) -> bytes:
        header = self._read_exact(FRAME_HEADER.size, deadline, what)
        (length,) = FRAME_HEADER.unpack(header)
        if length > MAX_FRAME_BYTES:
            raise self._failure(f"announced a frame of {length:#x} bytes, expected at most {MAX_FRAME_BYTES:#x}")
        return self._read_exact(length, deadline, what)

    def _read_exact(self, count: int, deadline: float, what: str) -> bytes:
        proc = self._proc
        assert proc is not None and proc.stdout is not None  # _start ran
        fd = proc.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while len(self._buffer) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                limit = self.start_timeout_s if "banner" in what else self.timeout_s
                raise self._failure(f"gave no {what} within {limit} s", timed_out=True)
            if not poller.poll(remaining * 1000):
                continue
            chunk = os.read(fd, max(_READ_CHUNK_BYTES, count - len(self._buffer)))
            if not chunk:
                raise self._failure(f"closed its output before sending {what}")
            self._buffer += chunk
        out = bytes(self._buffer[:count])
        del self._buffer[:count]
        return out
