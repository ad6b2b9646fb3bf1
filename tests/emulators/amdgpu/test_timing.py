"""The virtual-time cost model."""

from __future__ import annotations

import pytest

from tinyhil.emulators.amdgpu import GpuTiming
from tinyhil.errors import InvalidArgument


def test_costs_round_up_to_whole_nanoseconds() -> None:
    timing = GpuTiming(bytes_per_us=16_000, clock_ns=10, dispatch_ns=2_000, workgroup_ns=100)
    assert [timing.transfer_ns(n) for n in (0, 1, 16, 17, 16_000)] == [0, 1, 1, 2, 1000]
    assert timing.poll_interval_ns(4) == 4 * 16 * 10, "intervals count units of 16 clock cycles"
    assert timing.dispatch_cost_ns(3) == 2_300


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("packet_ns", 0, "packet_ns=0, expected an int >= 1"), ("bytes_per_us", 1.5, "bytes_per_us=1.5, expected an int")],
)
def test_bad_costs_are_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        GpuTiming(**{field: value})  # type: ignore[arg-type]
