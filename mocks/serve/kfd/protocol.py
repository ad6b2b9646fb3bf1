"""The wire protocol between the interposer (``interpose.c``) and the server: fixed little-endian headers.

A ``SOCK_SEQPACKET`` Unix socket carries one message per packet: a header, then ``len`` payload bytes; a memfd
travels beside a message as ``SCM_RIGHTS``. docs/serve.md ("KFD", "The protocol") is the reference; the C side
declares the same numbers (a test compares them).

Request (client to server, 40 bytes): ``u32 op, u32 fd, u64 a, u64 b, u64 c, u32 len, u32 flags``.
Reply (server to client, 32 bytes): ``u32 op, i32 err, u64 a, u64 b, u32 len, u32 pad``; ``err`` is ``-errno``
or 0.
"""

from __future__ import annotations

import enum
import struct
from typing import Final

__all__ = ["MAX_PAYLOAD_BYTES", "REPLY", "REQUEST", "ArgFlag", "Op"]

REQUEST: Final = struct.Struct("<IIQQQII")
REPLY: Final = struct.Struct("<IiQQII")
MAX_PAYLOAD_BYTES: Final = 64 << 10  # a MEMREAD larger than this is split by the server


class Op(enum.IntEnum):
    """Message kinds. Client requests: ``OPEN`` (fd: the client's descriptor, a: open flags, payload: the path
    and a NUL), ``CLOSE`` (fd), ``IOCTL`` (fd, a: request, b: USERPTR address when a memfd rides along, flags:
    :class:`ArgFlag`, payload: the argument's ``_IOC_SIZE`` bytes), ``MMAP`` (fd, a: length, b: offset). Server
    calls back during an IOCTL: ``MEMREAD`` (a: address, b: bytes; answered with the bytes), ``MEMWRITE`` (a:
    address, payload: the bytes). Every request ends with ``DONE`` (err, a: the ioctl's result or the memfd offset
    of an MMAP, payload: the argument after an IOCTL; a memfd rides along an MMAP's)."""

    OPEN = 1
    CLOSE = 2
    IOCTL = 3
    MMAP = 4
    MEMREAD = 16
    MEMWRITE = 17
    DONE = 32


class ArgFlag(enum.IntFlag):
    """What the interposer could do with an ioctl's argument pointer, and what rides along."""

    READABLE = 1
    WRITABLE = 2
    USERPTR_FD = 4
