"""Fixtures of the gfx1100 front-end tests: a front end on a fresh kernel, a PCIe side, the raw-register driver."""

from __future__ import annotations

import pytest
from support.gfx1100 import VRAM_BYTES, RawDriver
from support.system_bus import FakePcie

from tinyhil.emulators.amdgpu.gfx1100 import Gfx1100Front
from tinyhil.emulators.kernel import EventKernel


@pytest.fixture
def pcie() -> FakePcie:
    return FakePcie(0x1_0000_0000, 1 << 20)


@pytest.fixture
def front(pcie: FakePcie) -> Gfx1100Front:
    return Gfx1100Front.build(EventKernel(), vram_bytes=VRAM_BYTES, pcie=pcie)


@pytest.fixture
def raw(front: Gfx1100Front, pcie: FakePcie) -> RawDriver:
    return RawDriver(front, pcie)
