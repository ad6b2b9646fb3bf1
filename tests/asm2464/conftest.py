"""Fixtures of the ASM2464 client tests: a controller over the real emulated bridge (``Asm2464``) behind the emulated
usb1 stack MockUSB3 uses, with a wire recorder (``support.wire``) between the transport and the handle."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.wire import Recorded, WireRecorder, recorded_board

from tinyhil.asm2464 import Asm2464Controller, PcieTopology, pcie_bringup
from tinyhil.emulators.asm2464 import Asm2464


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    """A fresh emulated bridge (a plain GPU endpoint behind it) and a transport whose wire is recorded."""
    with recorded_board() as board:
        yield board


@pytest.fixture
def bridge(recorded: Recorded) -> Asm2464:
    """The emulated bridge itself: its backdoors (``read_sram``, ``write_xdata``...) set up and check state."""
    return recorded.bridge


@pytest.fixture
def wire(recorded: Recorded) -> WireRecorder:
    """What crossed the wire: ``wire.transfers`` and ``wire.requests()``."""
    return recorded.wire


@pytest.fixture
def controller(recorded: Recorded) -> Asm2464Controller:
    """A controller over the recorded transport (retry pauses of 0 s), PCIe off."""
    return recorded.controller(retry_delay_s=0)


@pytest.fixture
def topology(controller: Asm2464Controller, wire: WireRecorder) -> PcieTopology:
    """PCIe powered and brought up (the wire is cleared afterwards, so tests see only their own transfers)."""
    brought_up = pcie_bringup(controller)
    wire.clear()
    return brought_up
