"""The client's memory as MOCKKFD's ioctls see it: ``copy_from_user`` / ``copy_to_user`` across the socket.

Pointers inside ioctl arguments (``events_ptr``, ``device_ids_array_ptr``, the apertures array) are the client's
addresses. While an ioctl is served, the client's interposer answers ``MEMREAD`` / ``MEMWRITE`` calls on them,
copying with ``process_vm_readv`` / ``process_vm_writev`` on itself, so a bad pointer is ``EFAULT`` as from the
kernel. A USERPTR allocation's range is made shared by the interposer (a memfd mapped over the range, contents kept),
and its memfd rides along the ALLOC_MEMORY_OF_GPU request; :meth:`ClientMemory.view` maps it here.
"""

from __future__ import annotations

import errno
import mmap
import socket
from typing import Final

from tinyhil.align import round_up
from tinyhil.mocks.kfd._errno import fail
from tinyhil.mocks.kfd.usermem import UserMemory
from tinyhil.mocks.serve.kfd.protocol import MAX_PAYLOAD_BYTES, REPLY, Op

__all__ = ["ClientMemory", "receive"]

_FD_BYTES: Final = 4


def receive(sock: socket.socket, nbytes: int) -> tuple[bytes, list[int]]:
    """One packet of at most ``nbytes`` and the descriptors passed with it.

    Raises:
        ConnectionError: the peer closed the socket.
    """
    data, ancillary, _, _ = sock.recvmsg(nbytes, socket.CMSG_SPACE(_FD_BYTES))
    if not data:
        raise ConnectionError("the client closed its connection")
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(int.from_bytes(payload[i : i + _FD_BYTES], "little") for i in range(0, len(payload), _FD_BYTES))
    return data, fds


class ClientMemory(UserMemory):
    """Checked access to the client's memory through its interposer (the base class's interface)."""

    def __init__(self, sock: socket.socket) -> None:  # no /proc/self/maps: this is not our memory
        self.sock = sock
        self.userptr: tuple[int, int] | None = None  # (client address, memfd) riding along the current request

    def _call(self, op: Op, address: int, count: int, payload: bytes = b"") -> bytes:
        self.sock.sendmsg([REPLY.pack(op, 0, address, count, len(payload), 0), payload])
        data, fds = receive(self.sock, REPLY.size + MAX_PAYLOAD_BYTES)
        for fd in fds:
            socket.close(fd)
        kind, err, _, _, length, _ = REPLY.unpack_from(data)
        if kind != op or err:
            raise OSError(errno.EFAULT, "")
        return data[REPLY.size : REPLY.size + length]

    def check(self, what: str, address: int, nbytes: int, *, writable: bool = False) -> None:
        data = self.read(what, address, nbytes)
        if writable:
            self.write(what, address, data)

    def read(self, what: str, address: int, nbytes: int) -> bytes:
        pieces = []
        try:
            for offset in range(0, nbytes, MAX_PAYLOAD_BYTES):
                count = min(MAX_PAYLOAD_BYTES, nbytes - offset)
                pieces.append(self._call(Op.MEMREAD, address + offset, count))
        except OSError:
            fail(errno.EFAULT, f"{what} {address:#x}+{nbytes:#x} is not readable memory of the client")
        return b"".join(pieces)

    def write(self, what: str, address: int, data: bytes) -> None:
        view = memoryview(data)
        try:
            for offset in range(0, len(view), MAX_PAYLOAD_BYTES):
                self._call(Op.MEMWRITE, address + offset, 0, bytes(view[offset : offset + MAX_PAYLOAD_BYTES]))
        except OSError:
            fail(errno.EFAULT, f"{what} {address:#x}+{len(data):#x} is not writable memory of the client")

    def view(self, what: str, address: int, nbytes: int) -> memoryview:
        if self.userptr is None or self.userptr[0] != address:
            fail(errno.EFAULT, f"{what} {address:#x}+{nbytes:#x}: the interposer could not share that range (a "
                               "page-aligned, writable mapping of the client is needed)")  # fmt: skip
        try:
            mapping = mmap.mmap(self.userptr[1], round_up(nbytes, mmap.PAGESIZE), mmap.MAP_SHARED)
        except (OSError, ValueError):
            fail(errno.EFAULT, f"{what} {address:#x}+{nbytes:#x}: the client's memfd for it cannot be mapped")
        return memoryview(mapping)[:nbytes]
