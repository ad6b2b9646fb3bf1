"""Single-TLP encoding for the 0xF0 engine and decoding of its 8-byte completion."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.asm2464 import TlpCompletion, byte_enables, encode_tlp, is_posted
from tinyhil.asm2464.tlp import describe_fmt_type, has_data, lane_offset
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm2464 import CplStatus, FmtType, RetStatus


@pytest.mark.parametrize(
    ("offset", "size", "enables"),
    [(0, 4, 0b1111), (0, 1, 0b0001), (1, 1, 0b0010), (3, 1, 0b1000), (2, 2, 0b1100), (1, 3, 0b1110), (0, 3, 0b0111)],
)
def test_byte_enables(offset: int, size: int, enables: int) -> None:
    assert byte_enables(offset, size) == enables
    assert lane_offset(enables) == (offset, size)


@given(st.integers(0, 3), st.integers(1, 4))
def test_byte_enables_round_trip_through_trailing_zeros_and_popcount(offset: int, size: int) -> None:
    if offset + size > 4:
        with pytest.raises(InvalidArgument, match="crosses a dword boundary"):
            byte_enables(offset, size)
    else:
        assert lane_offset(byte_enables(offset, size)) == (offset, size)


@pytest.mark.parametrize(
    ("fmt_type", "posted"),
    [
        (FmtType.MRD32, False),
        (FmtType.MRD64, False),
        (FmtType.MWR32, True),
        (FmtType.MWR64, True),
        (FmtType.CFGRD0, False),
        (FmtType.CFGRD1, False),
        (FmtType.CFGWR0, False),
        (FmtType.CFGWR1, False),
        (0x30, True),  # Msg, routed to root complex
        (0x34, True),  # Msg, local
        (0x74, True),  # MsgD
    ],
)
def test_posted_requests_are_memory_writes_and_messages(fmt_type: int, posted: bool) -> None:
    assert is_posted(fmt_type) is posted


def test_encoding_puts_data_in_its_byte_lanes_and_aligns_the_address() -> None:
    value, data = encode_tlp(FmtType.MWR32, 0x1000_0003, 1, 0xAB)
    assert value == 0x40 | 0b1000 << 8
    assert struct.unpack("<III", data) == (0x1000_0000, 0, 0xAB00_0000)
    value, data = encode_tlp(FmtType.MRD64, 0x12_3456_7896, 2, None)
    assert value == 0x20 | 0b1100 << 8
    assert struct.unpack("<III", data) == (0x3456_7894, 0x12, 0)
    value, data = encode_tlp(FmtType.CFGWR1, 0x0400_0010, 4, 0xFFFF_FFFF)
    assert (value, struct.unpack("<III", data)) == (0x45 | 0xF << 8, (0x0400_0010, 0, 0xFFFF_FFFF))
    assert has_data(FmtType.CFGWR0) and not has_data(FmtType.CFGRD0)


BAD_TLPS = [
    ((0x100, 0, 4, None), "fmt_type=256"),
    ((FmtType.MRD32, -1, 4, None), "address=-1"),
    ((FmtType.MRD32, 1 << 64, 4, None), "address=18446744073709551616"),
    ((FmtType.MRD32, 0x1_0000_0000, 4, None), "address=0x100000000 with MRD32 (3-DW header)"),
    ((FmtType.MRD32, 0, 5, None), "size=5, expected an int <= 4"),
    ((FmtType.MRD32, 0, 0, None), "size=0"),
    ((FmtType.MRD32, 2, 4, None), "offset=2 size=4 crosses a dword boundary"),
    ((FmtType.MWR32, 0, 4, None), "MWR32 at 0x0 needs value="),
    ((FmtType.MRD32, 0, 4, 1), "value=1 for MRD32, which carries no data"),
    ((FmtType.MWR32, 0, 2, 0x10000), "value=65536, expected an int <= 65535"),
    ((FmtType.MWR32, 0, 1, -1), "value=-1"),
]


@pytest.mark.parametrize(("args", "message"), BAD_TLPS, ids=[m for _, m in BAD_TLPS])
def test_bad_tlps_are_rejected(args: tuple[int, int, int, int | None], message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        encode_tlp(*args)
    assert message in str(raised.value)


@given(
    st.integers(0, 0xFFFF_FFFF), st.sampled_from(list(CplStatus)), st.integers(0, 255), st.sampled_from(list(RetStatus))
)
def test_completion_round_trip(data: int, status: CplStatus, byte_count: int, ret: RetStatus) -> None:
    completion = TlpCompletion(data, status, byte_count, ret)
    raw = completion.encode()
    assert len(raw) == 8 and raw[6] == 0 and raw[4] >> 5 == status and raw[7] == ret
    assert TlpCompletion.decode(raw) == completion
    assert completion.ok is (status == CplStatus.SC and ret == RetStatus.OK)
    assert completion.retryable is (ret != RetStatus.OK)


def test_completion_names() -> None:
    assert TlpCompletion(0, 0b001, 4, 0).status_name() == "UR"
    assert TlpCompletion(0, 0b011, 4, 0).status_name() == "reserved 0b011"
    assert TlpCompletion(0, 0, 4, 0xFF).ret_status_name() == "TIMEOUT"
    assert TlpCompletion(0, 0, 4, 2).ret_status_name() == "unknown 0x02"
    assert describe_fmt_type(0x45) == "CFGWR1" and describe_fmt_type(0x30) == "fmt_type 0x30"
    with pytest.raises(InvalidArgument, match="completion of 7 bytes, expected 8"):
        TlpCompletion.decode(bytes(7))
