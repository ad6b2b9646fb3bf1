"""The AMDHSA rules in tinyhil.spec.amdhsa: rsrc2's LDS granules and the user-SGPR layout."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdhsa import (
    LDS_GRANULE_BYTES,
    LDS_SIZE_FIELD_MASK,
    USER_SGPR_WIDTHS,
    KernelCodeProperty,
    Rsrc2,
    rsrc2_lds_bytes,
    rsrc2_with_lds,
    user_sgpr_dwords,
)

_MAX_LDS = LDS_SIZE_FIELD_MASK * LDS_GRANULE_BYTES


@given(st.integers(0, 0xFFFF_FFFF), st.integers(0, _MAX_LDS))
def test_rsrc2_with_lds_covers_the_bytes_in_whole_granules_and_keeps_the_other_fields(rsrc2: int, lds: int) -> None:
    out = rsrc2_with_lds(rsrc2, lds)
    assert lds <= rsrc2_lds_bytes(out) < lds + LDS_GRANULE_BYTES
    assert rsrc2_lds_bytes(out) % LDS_GRANULE_BYTES == 0
    field = LDS_SIZE_FIELD_MASK << Rsrc2.GRANULATED_LDS_SIZE
    assert out & ~field == rsrc2 & ~field


@pytest.mark.parametrize("lds", [-1, _MAX_LDS + 1])
def test_lds_the_field_cannot_hold_is_refused_naming_the_value(lds: int) -> None:
    with pytest.raises(InvalidArgument, match=f"lds_bytes={lds:#x}"):
        rsrc2_with_lds(0, lds)


def test_user_sgprs_follow_the_load_order_with_each_fields_width() -> None:
    values = {flag: (0x1111_1111 * (k + 1)) | ((0xA0 + k) << 32) for k, flag in enumerate(USER_SGPR_WIDTHS)}
    every = 0
    for flag in USER_SGPR_WIDTHS:
        every |= flag
    dwords = user_sgpr_dwords(every, values)
    assert len(dwords) == sum(USER_SGPR_WIDTHS.values())
    at = 0
    for flag, width in USER_SGPR_WIDTHS.items():
        assert dwords[at : at + width] == [(values[flag] >> (32 * i)) & 0xFFFF_FFFF for i in range(width)]
        at += width
    only = KernelCodeProperty.ENABLE_SGPR_KERNARG_SEGMENT_PTR
    assert user_sgpr_dwords(only, values) == [values[only] & 0xFFFF_FFFF, values[only] >> 32]
    with pytest.raises(KeyError):
        user_sgpr_dwords(only, {})
