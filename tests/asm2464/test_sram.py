"""The 0xF2 arm encoding and sector padding."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.asm2464 import SramArm, pad_to_sectors, sectors_for
from tinyhil.errors import InvalidArgument


@pytest.mark.parametrize(
    ("nbytes", "slot_start", "device_to_host", "value", "index", "wire"),
    [
        (1, 0, False, 1, 0x0100, 512),
        (512, 5, False, 1, 0x0105, 512),
        (0x4000, 0, False, 32, 0x0100, 0x4000),
        (0x4001, 0, False, 33, 0x0200, 0x4200),
        (0x40000 - 4, 0, False, 512, 0x1000, 0x40000),  # a full copyin chunk fills window 0 exactly
        (0x40000 - 4, 16, False, 512, 0x1010, 0x40000),  # window 1
        (0x80000, 0, False, 1024, 0x2000, 0x80000),  # the whole SRAM
        (1000, 2, True, 0x8002, 0x0102, 1024),
    ],
)
def test_arm_encoding(nbytes: int, slot_start: int, device_to_host: bool, value: int, index: int, wire: int) -> None:
    arm = SramArm.for_bytes(nbytes, slot_start, device_to_host=device_to_host)
    assert (arm.value, arm.index, arm.wire_bytes, arm.sram_offset) == (value, index, wire, slot_start * 0x4000)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sectors": 0}, "sectors=0, expected an int >= 1"),
        ({"sectors": 1, "slot_start": 32}, "slot_start=32"),
        ({"sectors": 1, "slot_start": 31, "slot_count": 2}, "from slot 31 over 2 slots"),
        ({"sectors": 33, "slot_count": 1}, "SRAM arm of 33 sectors (0x4200 bytes) from slot 0 over 1 slots"),
        ({"sectors": 1025}, "expected slot_start + slot_count <= 32"),
        ({"sectors": 1, "slot_count": 33}, "slot_count=33"),
    ],
)
def test_arms_that_overrun_the_sram_are_rejected(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        SramArm(**kwargs)
    assert message in str(raised.value)


@given(st.integers(1, 0x80000), st.integers(0, 31))
def test_an_arm_fits_exactly_when_the_image_fits_from_its_slot(nbytes: int, slot_start: int) -> None:
    fits = slot_start * 0x4000 + sectors_for(nbytes) * 512 <= 0x80000
    if not fits:
        with pytest.raises(InvalidArgument):
            SramArm.for_bytes(nbytes, slot_start)
        return
    arm = SramArm.for_bytes(nbytes, slot_start)
    assert nbytes <= arm.wire_bytes < nbytes + 512
    assert arm.sectors <= arm.slot_count * 32 and arm.slot_start + arm.slot_count <= 32
    assert (arm.slot_count - 1) * 0x4000 < arm.wire_bytes <= arm.slot_count * 0x4000


def test_padding_copies_only_when_needed() -> None:
    aligned = memoryview(np.arange(256, dtype=np.uint32)).cast("B")
    assert pad_to_sectors(aligned) is aligned
    ragged = memoryview(b"\x01" * 700)
    padded = pad_to_sectors(ragged)
    assert len(padded) == 1024 and bytes(padded[:700]) == b"\x01" * 700 and not any(padded[700:])
