"""The host-native code-object container: layout, round trip, and one table of malformed containers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.errors import InvalidArgument
from tinyhil.spec.code_object import (
    CODE_OBJECT_HEADER_BYTES,
    ArgKind,
    CodeObject,
    code_object_size,
    pack_code_object,
    unpack_code_object,
)

identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,40}", fullmatch=True)
code_objects = st.builds(
    CodeObject,
    identifiers,
    st.lists(st.sampled_from(ArgKind), max_size=20).map(tuple),
    st.binary(min_size=1, max_size=300),
)


@given(code=code_objects)
def test_pack_then_unpack_is_the_identity(code: CodeObject) -> None:
    packed = pack_code_object(code)
    assert code_object_size(packed[:CODE_OBJECT_HEADER_BYTES]) == len(packed)
    assert unpack_code_object(packed + b"trailing bytes are ignored") == code


def test_the_layout_field_by_field() -> None:
    code = CodeObject("vadd", (ArgKind.POINTER, ArgKind.POINTER, ArgKind.VALUE), b"\x7fELF...")
    packed = pack_code_object(code)
    assert packed[0:8] == b"THILCODE"
    assert struct.unpack_from("<HHHHQ", packed, 8) == (1, 4, 3, 0, 7)
    assert packed[0x18:0x1C] == b"vadd" and packed[0x1C:0x1F] == b"\x01\x01\x00"
    assert packed[0x1F:0x20] == b"\x00", "padded to 8 bytes before the shared object"
    assert packed[0x20:] == b"\x7fELF..."
    assert len(code.key) == 64 and code.key == CodeObject("vadd", code.signature, b"\x7fELF...").key


GOOD = pack_code_object(CodeObject("f", (ArgKind.POINTER,), b"so"))
MALFORMED = [
    (b"short", "code object header of 5 bytes, expected 24"),
    (b"XHILCODE" + GOOD[8:], "magic=b'XHILCODE', expected b'THILCODE'"),
    (GOOD[:8] + b"\x02\x00" + GOOD[10:], "version=2, expected 1"),
    (GOOD[:10] + b"\x00\x00" + GOOD[12:], "name_bytes=0"),
    (GOOD[:12] + b"\xff\xff" + GOOD[14:], "slots=65535"),
    (GOOD[:14] + b"\x01\x00" + GOOD[16:], "reserved=1"),
    (GOOD[:16] + struct.pack("<Q", 0) + GOOD[24:], "shared-object size=0x0"),
    (GOOD[:-1], "code object of 33 bytes, expected 34"),
    (GOOD[:0x18] + b"9" + GOOD[0x19:], "entry='9', expected a C identifier"),
    (GOOD[:0x18] + b"\xff" + GOOD[0x19:], "entry name is not ASCII"),
    (GOOD[:0x19] + b"\x02" + GOOD[0x1A:], "slot kind=2, expected 0 .value. or 1 .pointer."),
]


@pytest.mark.parametrize(("data", "message"), MALFORMED)
def test_malformed_containers_are_refused_naming_the_field(data: bytes, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        unpack_code_object(data)


@pytest.mark.parametrize(
    ("entry", "signature", "shared_object", "message"),
    [
        ("has space", (), b"x", "entry='has space'"),
        ("f", (3,), b"x", "signature=.3,., expected ArgKind values"),
        ("f", (), b"", "expected 1.."),
        ("f", [ArgKind.VALUE], b"x", "expected a tuple"),
    ],
)
def test_bad_code_objects_are_refused(entry: str, signature: object, shared_object: bytes, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        CodeObject(entry, signature, shared_object)  # type: ignore[arg-type]
