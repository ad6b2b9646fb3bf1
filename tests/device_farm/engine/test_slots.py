"""The --workers slots: never more held than there are, and waiting lanes served largest planned load first."""

from __future__ import annotations

import threading
import time

import pytest

from tinyhil.device_farm.engine.slots import SlotGate
from tinyhil.errors import InvalidArgument


def test_waiting_lanes_get_the_slot_largest_load_first() -> None:
    gate = SlotGate(1)
    order: list[float] = []
    with gate.held():
        waiters = [threading.Thread(target=lambda load=load: _take(gate, load, order)) for load in (1.0, 3.0, 2.0)]
        for waiter in waiters:
            waiter.start()
        while gate.waiting < len(waiters):  # every waiter queued behind the held slot
            time.sleep(0.001)
    for waiter in waiters:
        waiter.join()
    assert order == [3.0, 2.0, 1.0] and gate.peak == 1 and gate.free == 1


def _take(gate: SlotGate, load: float, order: list[float]) -> None:
    with gate.held(load):
        order.append(load)


@pytest.mark.parametrize("slots", [0, -1, 1.5, True])
def test_a_slot_count_below_one_is_refused(slots: object) -> None:
    with pytest.raises(InvalidArgument, match=f"slots={slots!r}, expected an integer >= 1"):
        SlotGate(slots)  # type: ignore[arg-type]
