"""tinyhil.align and the ring-size rule: each rule written once, checked against its definition."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil._check import check_ring_bytes
from tinyhil.align import ceil_div, round_down, round_up
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import RING_MAX_BYTES, RING_MIN_BYTES
from tinyhil.spec.kfd_queues import KFD_MIN_QUEUE_RING_SIZE


@given(st.integers(min_value=-(1 << 64), max_value=1 << 64), st.integers(min_value=0, max_value=40))
def test_a_power_of_two_unit_matches_the_bit_mask_form(value: int, shift: int) -> None:
    unit = 1 << shift
    assert round_up(value, unit) == (value + unit - 1) & ~(unit - 1)
    assert round_down(value, unit) == value & ~(unit - 1)


@given(st.integers(min_value=-(1 << 64), max_value=1 << 64), st.integers(min_value=1, max_value=10_000))
def test_any_unit_gives_the_nearest_multiple_on_each_side(value: int, unit: int) -> None:
    up, down = round_up(value, unit), round_down(value, unit)
    assert up % unit == 0 and down % unit == 0
    assert down <= value <= up and up - down in ((0,) if value % unit == 0 else (unit,))


@given(st.integers(min_value=-(1 << 64), max_value=1 << 64), st.integers(min_value=1, max_value=10_000))
def test_ceil_div_counts_the_units_that_cover_a_value(value: int, unit: int) -> None:
    pieces = ceil_div(value, unit)
    assert (pieces - 1) * unit < value <= pieces * unit


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [
        (0x300, {}, "ring_bytes=0x300, expected a power of two"),
        (128, {}, f"ring_bytes=128, expected an int >= {RING_MIN_BYTES}"),
        (RING_MAX_BYTES * 2, {}, f"ring_bytes={RING_MAX_BYTES * 2}, expected an int <= {RING_MAX_BYTES}"),
        (512, {"min_bytes": KFD_MIN_QUEUE_RING_SIZE, "max_bytes": None}, "expected an int >= 1024"),
        ("4096", {}, "expected an int"),
    ],
)
def test_the_ring_rule_names_the_limit_a_size_breaks(value: object, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        check_ring_bytes("ring_bytes", value, **kwargs)


def test_the_ring_rule_takes_each_paths_range() -> None:
    assert check_ring_bytes("ring_bytes", RING_MIN_BYTES) == RING_MIN_BYTES
    assert check_ring_bytes("ring_bytes", 1 << 31, min_bytes=KFD_MIN_QUEUE_RING_SIZE, max_bytes=None) == 1 << 31
