"""The AMD GPU facts module: bit fields, poll functions, and the spec tables' numbers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import (
    DOORBELL_BAR_BYTES,
    DOORBELL_SLOTS,
    SYS_APERTURE,
    Bar,
    CompareFunction,
    Field,
    QueueKind,
    compare,
)


@given(lsb=st.integers(0, 31), data=st.data())
def test_fields_put_and_get_their_bits_only(lsb: int, data: st.DataObject) -> None:
    width = data.draw(st.integers(1, 32 - lsb))
    field = Field("f", lsb, width)
    value = data.draw(st.integers(0, field.max_value))
    noise = data.draw(st.integers(0, 2**32 - 1)) & ~field.mask
    assert field.get(field.put(value) | noise) == value
    assert field.put(value) & ~field.mask == 0


@pytest.mark.parametrize(("lsb", "width", "value"), [(4, 4, 16), (0, 8, -1), (30, 2, 4)])
def test_values_that_do_not_fit_are_refused_naming_the_field(lsb: int, width: int, value: int) -> None:
    with pytest.raises(InvalidArgument, match=rf"count={value}, expected an int in 0..{(1 << width) - 1:#x}"):
        Field("count", lsb, width).put(value)


@pytest.mark.parametrize(("lsb", "width"), [(32, 1), (0, 0), (30, 3)])
def test_fields_must_lie_inside_a_dword(lsb: int, width: int) -> None:
    with pytest.raises(InvalidArgument, match="expected bits within 0-31"):
        Field("bad", lsb, width)


@given(value=st.integers(0, 2**32 - 1), reference=st.integers(0, 2**32 - 1))
def test_poll_functions_are_the_seven_comparisons(value: int, reference: int) -> None:
    expected = [True, value < reference, value <= reference, value == reference, value != reference]
    expected += [value >= reference, value > reference]
    assert [compare(f, value, reference) for f in CompareFunction] == expected


def test_spec_numbers() -> None:
    """Numbers copied from docs/amdgpu.md's tables (a wrong constant here is a wrong model and a wrong driver)."""
    assert SYS_APERTURE == 1 << 44
    assert (Bar.VRAM, Bar.DOORBELL, Bar.REGS) == (0, 2, 5) and (DOORBELL_BAR_BYTES, DOORBELL_SLOTS) == (8 << 10, 1024)
    assert (QueueKind.SDMA.unit_bytes, QueueKind.COMPUTE.unit_bytes) == (1, 4)
