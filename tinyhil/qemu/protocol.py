"""The compile-server protocol: length-prefixed frames over the server's stdin and stdout.

Every message is a frame: a u32 little-endian payload length, then the payload (at most :data:`MAX_FRAME_BYTES`).

========== ============================================== ===================================================
direction  payload                                        meaning
========== ============================================== ===================================================
server ->  ``Status.OK`` + banner                         sent once at start-up: ``tinyhil-ccserver 1 ...``
host ->    program source                                 one compile request
server ->  ``Status.OK`` + binary                         the compiler's output
server ->  ``Status.COMPILE_ERROR`` + message             the compiler rejected the source: its own message
server ->  ``Status.INTERNAL_ERROR`` + message            the server failed (out of memory, broken frame)
========== ============================================== ===================================================

Upstream's protocol signalled a compile error with a zero length and no message, and had no timeout; tinyhil's
replies carry a status byte and the message, and the host side (:mod:`tinyhil.qemu.server`) bounds every wait.
The guest side is ``ccserver.c`` next to this module.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from tinyhil.errors import TinyHilError

__all__ = [
    "BANNER_PREFIX",
    "FRAME_HEADER",
    "MAX_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "CompileServerError",
    "CompileServerTimeout",
    "Reply",
    "Status",
    "decode_reply",
    "encode_frame",
    "encode_reply",
]

FRAME_HEADER: Final = struct.Struct("<I")
MAX_FRAME_BYTES: Final = 64 << 20
PROTOCOL_VERSION: Final = 1
BANNER_PREFIX: Final = f"tinyhil-ccserver {PROTOCOL_VERSION}"


class Status(IntEnum):
    """The first byte of every reply (``ccserver.c``: ``STATUS_*``)."""

    OK = 0
    COMPILE_ERROR = 1
    INTERNAL_ERROR = 2


class CompileServerError(TinyHilError, RuntimeError):
    """The compile server failed (died, broke the protocol, reported an internal error): not the source's fault."""

    def __init__(self, compiler: str, message: str) -> None:
        super().__init__(f"{compiler} compile server: {message}")
        self.compiler = compiler
        self.message = message

    def __reduce__(self) -> tuple[type[CompileServerError], tuple[str, str]]:
        return type(self), (self.compiler, self.message)


class CompileServerTimeout(CompileServerError, TimeoutError):
    """The compile server gave no complete reply within the timeout; it was killed."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A decoded reply frame: its status and the rest of the payload."""

    status: Status
    payload: bytes

    @property
    def text(self) -> str:
        """The payload as text (messages and the banner), undecodable bytes replaced."""
        return self.payload.decode(errors="replace")


def encode_frame(payload: bytes) -> bytes:
    """``payload`` with its u32 little-endian length in front.

    Raises:
        CompileServerError: the payload is longer than :data:`MAX_FRAME_BYTES`.
    """
    if len(payload) > MAX_FRAME_BYTES:
        raise CompileServerError("host", f"frame of {len(payload):#x} bytes, expected at most {MAX_FRAME_BYTES:#x}")
    return FRAME_HEADER.pack(len(payload)) + payload


def encode_reply(status: Status, payload: bytes) -> bytes:
    """A whole reply frame (what a server writes)."""
    return encode_frame(bytes([status]) + payload)


def decode_reply(payload: bytes, *, compiler: str = "host") -> Reply:
    """Split a reply frame's payload into status and body.

    Raises:
        CompileServerError: the payload is empty or its status byte is unknown.
    """
    if not payload:
        raise CompileServerError(compiler, "empty reply frame, expected a status byte")
    try:
        status = Status(payload[0])
    except ValueError:
        known = ", ".join(f"{s.value} ({s.name})" for s in Status)
        raise CompileServerError(compiler, f"reply status {payload[0]}, expected one of {known}") from None
    return Reply(status, bytes(payload[1:]))
