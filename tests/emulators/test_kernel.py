"""The event kernel: ordering, virtual timeouts, determinism, livelock detection."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.emulators.kernel import EventKernel, NoProgress, VirtualTimeout
from tinyhil.errors import DeviceTimeout, InvalidArgument


def test_events_fire_in_time_then_submission_order() -> None:
    kernel = EventKernel()
    fired: list[tuple[int, str]] = []
    for delay, label in [(30, "c"), (10, "a"), (10, "b"), (0, "now")]:
        kernel.schedule(delay, lambda label=label: fired.append((kernel.now_ns, label)))
    kernel.run_until_idle()
    assert fired == [(0, "now"), (10, "a"), (10, "b"), (30, "c")]


def test_run_until_stops_as_soon_as_the_condition_holds() -> None:
    kernel = EventKernel()
    box = {"value": 0}
    for step in range(1, 6):
        kernel.schedule(step * 100, lambda step=step: box.__setitem__("value", step))
    kernel.run_until(lambda: box["value"] >= 3, 10_000, what="value >= 3")
    assert (kernel.now_ns, box["value"], kernel.pending) == (300, 3, 2)


def test_a_wait_that_can_never_hold_times_out_in_virtual_time_naming_what() -> None:
    kernel = EventKernel()
    kernel.schedule(50, lambda: None)
    with pytest.raises(VirtualTimeout, match=r"waiting for the fence to reach 7: not satisfied within 1000 ns") as info:
        kernel.run_until(lambda: False, 1000, what="the fence to reach 7")
    assert isinstance(info.value, DeviceTimeout) and isinstance(info.value, TimeoutError)
    assert kernel.now_ns == 1000, "the clock jumps to the deadline the host would have waited for"


def test_events_past_the_deadline_stay_queued() -> None:
    kernel = EventKernel()
    fired: list[int] = []
    kernel.schedule(5000, lambda: fired.append(1))
    with pytest.raises(VirtualTimeout):
        kernel.run_until(lambda: bool(fired), 1000, what="late event")
    assert fired == [] and kernel.pending == 1
    kernel.run_for(4000)
    assert fired == [1] and kernel.now_ns == 5000


def test_cancelled_events_never_fire() -> None:
    kernel = EventKernel()
    fired: list[str] = []
    handle = kernel.schedule(10, lambda: fired.append("x"))
    kernel.schedule(20, lambda: fired.append("y"))
    kernel.cancel(handle)
    kernel.run_until_idle()
    assert fired == ["y"]


def test_a_self_rescheduling_zero_delay_event_is_reported_as_no_progress() -> None:
    kernel = EventKernel()

    def again() -> None:
        kernel.schedule(0, again)

    kernel.schedule(0, again)
    with pytest.raises(NoProgress, match="without spin becoming true"):
        kernel.run_until(lambda: False, 10, what="spin")


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_negative_or_non_int_delays_are_rejected(bad: object) -> None:
    with pytest.raises(InvalidArgument, match="delay_ns"):
        EventKernel().schedule(bad, lambda: None)  # type: ignore[arg-type]


@given(st.lists(st.integers(0, 10_000), max_size=50), st.integers(0, 2**32))
def test_same_seed_and_inputs_give_the_same_schedule(delays: list[int], seed: int) -> None:
    def trace() -> list[tuple[int, int, float]]:
        kernel = EventKernel(seed)
        seen: list[tuple[int, int, float]] = []
        for index, delay in enumerate(delays):
            kernel.schedule(delay, lambda index=index: seen.append((kernel.now_ns, index, float(kernel.rng.random()))))
        kernel.run_until_idle()
        return seen

    assert trace() == trace()


def test_the_clock_is_read_only() -> None:
    """Only the kernel moves time: assigning ``now_ns`` raises, and reading it runs no Python frame (so the per-chunk
    call budget of the copy path does not pay for it)."""
    kernel = EventKernel()
    kernel.run_for(250)
    with pytest.raises(AttributeError):
        kernel.now_ns = 0  # type: ignore[misc]
    assert kernel.now_ns == 250
    calls: list[str] = []

    def profile(frame: object, event: str, arg: object) -> None:
        calls.append(event)

    sys.setprofile(profile)
    try:
        kernel.now_ns  # noqa: B018
    finally:
        sys.setprofile(None)
    assert "call" not in calls
