"""The loopback cluster of :mod:`tinyhil.device_farm.cluster.loopback` for tests, and ``tinyhil farm run`` to
completion."""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import subprocess
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path

import pytest

from tinyhil.device_farm.cluster.loopback import TINYHIL, LoopbackCluster, emulated_board, loopback_cluster

__all__ = ["LoopbackCluster", "emulated_board", "farm_run", "listening", "loopback_cluster", "needs_dask",
           "session_pids"]  # fmt: skip

needs_dask = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None, reason="needs Dask distributed (pip install 'tinyhil[farm]')"
)


def farm_run(*args: str, cwd: Path, env: Mapping[str, str] | None = None,
             timeout_s: float = 300) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``tinyhil farm run ARGS`` to completion."""
    return subprocess.run([*TINYHIL, "farm", "run", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout_s, env={**os.environ, **(env or {})}, check=False)  # fmt: skip


_TCP_LISTEN = "0A"  # the LISTEN state in /proc/net/tcp{,6} (include/net/tcp_states.h)


def session_pids(session: int) -> list[int]:
    """Every live process of the session ``session`` (a farm process started with ``start_new_session``: its
    nanny, worker and shards)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp session ...
        if int(fields[3]) == session:
            pids.append(int(entry.name))
    return pids


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    with suppress(OSError):
        for fd in (Path("/proc") / str(pid) / "fd").iterdir():
            with suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(int(target[len("socket:[") : -1]))
    return inodes


def _address(hex_address: str) -> str:
    """A /proc/net/tcp{,6} address: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def listening(session: int) -> list[tuple[str, int]]:
    """The (address, port) of every TCP socket in LISTEN that a process of ``session`` holds."""
    inodes = set().union(*(_socket_inodes(pid) for pid in session_pids(session)))
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            columns = line.split()
            local, state, inode = columns[1], columns[3], int(columns[9])
            if state == _TCP_LISTEN and inode in inodes:
                address, port = local.split(":")
                found.append((_address(address), int(port, 16)))
    return sorted(found)
