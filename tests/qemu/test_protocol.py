"""The compile-server protocol: frames, reply statuses, and the C server's constants agreeing with Python's."""

from __future__ import annotations

import re
from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.qemu.protocol import (
    BANNER_PREFIX,
    FRAME_HEADER,
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    CompileServerError,
    CompileServerTimeout,
    Reply,
    Status,
    decode_reply,
    encode_frame,
    encode_reply,
)


@given(st.sampled_from(Status), st.binary(max_size=512))
def test_a_reply_frame_round_trips(status: Status, payload: bytes) -> None:
    frame = encode_reply(status, payload)
    (length,) = FRAME_HEADER.unpack(frame[: FRAME_HEADER.size])
    assert length == len(frame) - FRAME_HEADER.size == len(payload) + 1
    assert decode_reply(frame[FRAME_HEADER.size :]) == Reply(status, payload)


def test_frames_are_u32_little_endian_length_then_payload() -> None:
    assert encode_frame(b"abc") == b"\x03\x00\x00\x00abc"
    assert encode_reply(Status.COMPILE_ERROR, b"msg") == b"\x04\x00\x00\x00\x01msg"


BAD_REPLIES = [
    (b"", "empty reply frame, expected a status byte"),
    (b"\x03oops", r"reply status 3, expected one of 0 \(OK\), 1 \(COMPILE_ERROR\), 2 \(INTERNAL_ERROR\)"),
    (b"\xffxx", "reply status 255"),
]


@pytest.mark.parametrize(("payload", "message"), BAD_REPLIES)
def test_malformed_replies_raise_server_errors_naming_what_was_received(payload: bytes, message: str) -> None:
    with pytest.raises(CompileServerError, match=message):
        decode_reply(payload, compiler="QEMUCC:aarch64")


def test_oversized_frames_are_refused_before_sending() -> None:
    with pytest.raises(CompileServerError, match=f"expected at most {MAX_FRAME_BYTES:#x}"):
        encode_frame(bytes(MAX_FRAME_BYTES + 1))


def test_server_errors_survive_pickling_for_pool_workers() -> None:
    import pickle

    for error in (CompileServerError("QEMUCC:aarch64", "died"), CompileServerTimeout("QEMUCC:aarch64", "hung")):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error) and again.message == error.message


def test_the_c_server_uses_the_same_constants() -> None:
    source = (resources.files("tinyhil.qemu") / "ccserver.c").read_text()
    defines = dict(re.findall(r"#define (\w+) \(?([^)\n]+)\)?", source))
    assert int(defines["PROTOCOL_VERSION"]) == PROTOCOL_VERSION
    mantissa, shift = re.fullmatch(r"(\d+)u << (\d+)", defines["MAX_FRAME_BYTES"]).groups()  # type: ignore[union-attr]
    assert int(mantissa) << int(shift) == MAX_FRAME_BYTES
    statuses = dict(re.findall(r"STATUS_(\w+) = (\d+)", source))
    assert {name: int(value) for name, value in statuses.items()} == {s.name: s.value for s in Status}
    assert f'"{BANNER_PREFIX.split()[0]} %d' in source
