"""A stand-in compile server for the host-side tests: speaks tinyhil's protocol, misbehaves on request.

Usage: ``python fake_ccserver.py [MODE]``; MODE is ``normal`` (default), ``crash-on-start``, ``bad-banner`` or
``silent``. Requests whose source is one of the words below trigger the matching fault; any other source
"compiles" to ``OBJ:`` + source.
"""

from __future__ import annotations

import os
import signal
import struct
import sys
import time

HEADER = struct.Struct("<I")
OK, COMPILE_ERROR, INTERNAL_ERROR = 0, 1, 2


def send(status: int, payload: bytes) -> None:
    sys.stdout.buffer.write(HEADER.pack(len(payload) + 1) + bytes([status]) + payload)
    sys.stdout.buffer.flush()


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else "normal"
    if mode == "crash-on-start":
        sys.stderr.write("fake: cannot load the compiler library\n")
        return 3
    if mode == "silent":
        time.sleep(3600)
    send(OK, b"something else 1" if mode == "bad-banner" else b"tinyhil-ccserver 1 fake")
    while True:
        header = sys.stdin.buffer.read(HEADER.size)
        if len(header) < HEADER.size:
            return 0
        source = sys.stdin.buffer.read(HEADER.unpack(header)[0])
        if source == b"hang":
            time.sleep(3600)
        elif source == b"die":
            sys.stderr.write("fake: dying mid-request\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        elif source.startswith(b"bad"):
            send(COMPILE_ERROR, b"<string>:1: error: " + source)
        elif source == b"internal":
            send(INTERNAL_ERROR, b"out of memory")
        elif source == b"unknown-status":
            send(7, b"")
        elif source == b"huge-frame":
            sys.stdout.buffer.write(HEADER.pack(0xFFFF_FFFF))
            sys.stdout.buffer.flush()
        elif source == b"half-reply":
            sys.stdout.buffer.write(HEADER.pack(100) + b"\x00partial")
            sys.stdout.buffer.flush()
            return 0
        elif source == b"pid":
            send(OK, str(os.getpid()).encode())
        else:
            send(OK, b"OBJ:" + source)


if __name__ == "__main__":
    sys.exit(main())
