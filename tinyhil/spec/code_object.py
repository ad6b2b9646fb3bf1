"""The host-native code-object container the emulated GPU's kernel executor runs (docs/amdgpu.md "Kernel executor").

A program in GPU memory is this container; ``COMPUTE_PGM_LO/HI`` point at its first byte (256-byte aligned).
All integers are little-endian.

| offset | size | field |
|---|---|---|
| 0x00 | 8 | magic ``b"THILCODE"`` |
| 0x08 | 2 | format version (1) |
| 0x0A | 2 | entry-point name length in bytes (1..255) |
| 0x0C | 2 | argument slots (0..256) |
| 0x0E | 2 | reserved, 0 |
| 0x10 | 8 | shared-object length in bytes |
| 0x18 | name length | entry-point name (ASCII C identifier) |
| ... | slots | signature: one byte per 8-byte argument slot, 0 value, 1 GPU pointer |
| ... | 0..7 | zero padding to a multiple of 8 |
| ... | shared-object length | the shared object, as the compiler seam built it |

The entry point's C ABI: ``void NAME(uint64_t *args, const uint32_t group_id[3], const uint32_t group_size[3])``,
``args[i]`` being the host pointer a GPU-pointer slot translates to, or the slot's value; the function loops over
the threads of its workgroup itself.
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from tinyhil.align import round_up
from tinyhil.errors import InvalidArgument

__all__ = [
    "CODE_OBJECT_ALIGN",
    "CODE_OBJECT_HEADER_BYTES",
    "CODE_OBJECT_MAGIC",
    "CODE_OBJECT_VERSION",
    "MAX_ARG_SLOTS",
    "MAX_ENTRY_NAME_BYTES",
    "MAX_SHARED_OBJECT_BYTES",
    "ArgKind",
    "CodeObject",
    "code_object_size",
    "pack_code_object",
    "unpack_code_object",
]

CODE_OBJECT_MAGIC: Final = b"THILCODE"
CODE_OBJECT_VERSION: Final = 1
CODE_OBJECT_HEADER_BYTES: Final = 0x18
CODE_OBJECT_ALIGN: Final = 256  # COMPUTE_PGM_LO/HI hold address >> 8
MAX_ENTRY_NAME_BYTES: Final = 255
MAX_ARG_SLOTS: Final = 256
MAX_SHARED_OBJECT_BYTES: Final = 256 << 20
_HEADER: Final = struct.Struct("<8sHHHHQ")
_PAD: Final = 8
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ArgKind(IntEnum):
    """What one 8-byte argument slot holds."""

    VALUE = 0
    POINTER = 1  # a GPU virtual address, translated to a host pointer before the call


def _check_entry(entry: object) -> str:
    if not isinstance(entry, str) or not _IDENTIFIER.fullmatch(entry) or len(entry) > MAX_ENTRY_NAME_BYTES:
        raise InvalidArgument(f"entry={entry!r}, expected a C identifier of 1..{MAX_ENTRY_NAME_BYTES} ASCII characters")
    return entry


@dataclass(frozen=True, slots=True)
class CodeObject:
    """An entry point, its argument signature and the host shared object that defines it."""

    entry: str
    signature: tuple[ArgKind, ...]
    shared_object: bytes

    def __post_init__(self) -> None:
        _check_entry(self.entry)
        if not isinstance(self.signature, tuple) or len(self.signature) > MAX_ARG_SLOTS:
            raise InvalidArgument(f"signature={self.signature!r}, expected a tuple of at most {MAX_ARG_SLOTS} ArgKind")
        try:
            object.__setattr__(self, "signature", tuple(ArgKind(kind) for kind in self.signature))
        except ValueError:
            raise InvalidArgument(
                f"signature={self.signature!r}, expected ArgKind values (0 value, 1 pointer)"
            ) from None
        if not isinstance(self.shared_object, bytes) or not 0 < len(self.shared_object) <= MAX_SHARED_OBJECT_BYTES:
            raise InvalidArgument(
                f"shared_object of {type(self.shared_object).__name__}, expected 1..{MAX_SHARED_OBJECT_BYTES:#x} bytes"
            )

    @property
    def key(self) -> str:
        """SHA-256 of the packed container: the executor's cache key."""
        return hashlib.sha256(pack_code_object(self)).hexdigest()


def _body_offset(name_bytes: int, slots: int) -> int:
    unpadded = CODE_OBJECT_HEADER_BYTES + name_bytes + slots
    return round_up(unpadded, _PAD)


def pack_code_object(code: CodeObject) -> bytes:
    """The container bytes of ``code``."""
    name = code.entry.encode("ascii")
    header = _HEADER.pack(
        CODE_OBJECT_MAGIC, CODE_OBJECT_VERSION, len(name), len(code.signature), 0, len(code.shared_object)
    )
    prefix = header + name + bytes(code.signature)
    return prefix + bytes(_body_offset(len(name), len(code.signature)) - len(prefix)) + code.shared_object


def code_object_size(header: bytes | memoryview) -> int:
    """Total container size announced by its first :data:`CODE_OBJECT_HEADER_BYTES` bytes.

    Raises:
        InvalidArgument: the bytes are not a code-object header (wrong magic or version, bad counts).
    """
    if len(header) < CODE_OBJECT_HEADER_BYTES:
        raise InvalidArgument(f"code object header of {len(header)} bytes, expected {CODE_OBJECT_HEADER_BYTES}")
    magic, version, name_bytes, slots, reserved, so_bytes = _HEADER.unpack_from(header)
    if magic != CODE_OBJECT_MAGIC:
        raise InvalidArgument(f"code object magic={bytes(magic)!r}, expected {CODE_OBJECT_MAGIC!r}")
    if version != CODE_OBJECT_VERSION:
        raise InvalidArgument(f"code object version={version}, expected {CODE_OBJECT_VERSION}")
    if not 1 <= name_bytes <= MAX_ENTRY_NAME_BYTES or slots > MAX_ARG_SLOTS or reserved:
        raise InvalidArgument(
            f"code object header name_bytes={name_bytes} slots={slots} reserved={reserved}, "
            f"expected 1..{MAX_ENTRY_NAME_BYTES}, 0..{MAX_ARG_SLOTS} and 0"
        )
    if not 0 < so_bytes <= MAX_SHARED_OBJECT_BYTES:
        raise InvalidArgument(f"code object shared-object size={so_bytes:#x}, expected 1..{MAX_SHARED_OBJECT_BYTES:#x}")
    return int(_body_offset(name_bytes, slots) + so_bytes)


def unpack_code_object(data: bytes | memoryview) -> CodeObject:
    """Parse a container (trailing bytes past its announced size are ignored).

    Raises:
        InvalidArgument: malformed header, truncated data, a non-identifier entry name or an unknown slot kind.
    """
    size = code_object_size(data)
    if len(data) < size:
        raise InvalidArgument(f"code object of {len(data)} bytes, expected {size} as its header announces")
    _, _, name_bytes, slots, _, so_bytes = _HEADER.unpack_from(data)
    name_end = CODE_OBJECT_HEADER_BYTES + name_bytes
    try:
        entry = bytes(data[CODE_OBJECT_HEADER_BYTES:name_end]).decode("ascii")
    except UnicodeDecodeError:
        raise InvalidArgument("code object entry name is not ASCII") from None
    kinds = bytes(data[name_end : name_end + slots])
    bad = [kind for kind in kinds if kind not in ArgKind._value2member_map_]
    if bad:
        raise InvalidArgument(f"code object signature slot kind={bad[0]}, expected 0 (value) or 1 (pointer)")
    body = _body_offset(name_bytes, slots)
    return CodeObject(_check_entry(entry), tuple(ArgKind(k) for k in kinds), bytes(data[body : body + so_bytes]))
