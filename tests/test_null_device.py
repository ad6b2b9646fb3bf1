"""NULL: bookkeeping only, real compilation, fixed durations, copyout refused unless allowed."""

from __future__ import annotations

import numpy as np
import pytest

from tinyhil import CapabilityMissing, InvalidArgument, open_target
from tinyhil.null_device import NULL_EXEC_DURATION_NS, NullDevice
from tinyhil.profile import ProfileRangeEvent


def test_copyout_raises_a_clear_error_unless_allowed() -> None:
    with open_target("NULL") as device:
        buf = device.alloc(16)
        device.copyin(buf, b"\x01" * 16)
        with pytest.raises(CapabilityMissing, match="'copyout': NULL keeps no data; open it with allow_copyout=True"):
            device.copyout(buf)
        out = bytearray(b"\xee" * 16)
        with pytest.raises(CapabilityMissing, match="'copyout': NULL keeps no data; open it with allow_copyout=True"):
            device.copyout_into(buf, out)
        assert out == b"\xee" * 16
        assert "copyout" not in device.capabilities


def test_allow_copyout_returns_zeros_of_the_asked_length() -> None:
    with open_target("NULL", allow_copyout=True) as device:
        buf = device.alloc(16)
        device.copyin(buf, b"\x01" * 16)
        assert "copyout" in device.capabilities
        assert device.copyout(buf, nbytes=5, offset=3) == bytes(5)


def test_allow_copyout_into_writes_zeros_over_exactly_the_callers_bytes() -> None:
    with open_target("NULL", allow_copyout=True) as device:
        buf = device.alloc(16)
        out = np.full(3, 0xEEEE_EEEE, np.uint32)
        device.copyout_into(buf, memoryview(out)[1:], offset=8)
        assert out.tolist() == [0xEEEE_EEEE, 0, 0]


def test_programs_run_for_a_fixed_virtual_duration_and_are_profiled() -> None:
    with open_target("NULL") as device:
        program = device.compile("void k(void) {}", "k")
        assert program.binary.startswith(b"\x7fELF"), "NULL compiles for real"
        start = device.timestamp()
        device.exec(program, (2, 3), 4)
        assert device.timestamp() - start == NULL_EXEC_DURATION_NS
        (event,) = [e for e in device.profile_events if isinstance(e, ProfileRangeEvent) and e.name == "k"]
        assert event.duration_ns == NULL_EXEC_DURATION_NS
        assert event.key == program.key
        assert dict(event.args) == {"grid": [2, 3, 1], "local": [4, 1, 1]}


def test_without_a_compiler_null_does_not_claim_compile() -> None:
    device = NullDevice("NULL")
    assert "compile" not in device.capabilities
    with pytest.raises(NotImplementedError, match="'compile'"):
        device.compile("int x;", "x")


def test_allocations_are_bookkeeping_in_a_large_address_space() -> None:
    with open_target("NULL") as device:
        big = device.alloc(1 << 40)  # a terabyte of bookkeeping costs nothing
        small = device.alloc(1)
        assert small.addr >= big.addr + big.nbytes


def test_unknown_open_options_are_refused() -> None:
    with pytest.raises(InvalidArgument, match=r"unknown option 'turbo' for NULL; valid options: allow_copyout"):
        open_target("NULL", turbo=True)
