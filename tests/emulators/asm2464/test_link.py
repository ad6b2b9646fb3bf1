"""PCIe power and link: boots off, 0xF3 powers on, LTSSM 0x78 in L0, the link-up delay quirk, power off."""

from __future__ import annotations

import pytest

from tinyhil.emulators.asm2464 import Quirks, UsbStall
from tinyhil.emulators.pcie import PcieUnsupportedRequest


def test_boots_with_the_link_down_and_powers_on(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    assert host.inp(0xE4, 1, 0xB450) == b"\x00"
    host.power_on()
    assert host.inp(0xE4, 1, 0xB450) == b"\x78"
    host.out(0xF3, 0)
    assert host.inp(0xE4, 1, 0xB450) == b"\x00"


def test_link_up_delay_in_virtual_time(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(quirks=Quirks(link_up_delay_ns=2_000_000))
    host.power_on()
    powered_at = host.bridge.kernel.now_ns
    assert host.inp(0xE4, 1, 0xB450) == b"\x00", "still training"
    host.bridge.kernel.run_until(lambda: host.bridge.link.up, 10_000_000, what="link up")
    assert host.bridge.kernel.now_ns - powered_at == 2_000_000
    assert host.inp(0xE4, 1, 0xB450) == b"\x78"


def test_power_off_while_training_cancels_the_link_up(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host(quirks=Quirks(link_up_delay_ns=2_000_000))
    host.power_on()
    host.out(0xF3, 0)
    host.bridge.kernel.run_for(5_000_000)
    assert not host.bridge.link.up and host.inp(0xE4, 1, 0xB450) == b"\x00"


def test_gpu_dma_needs_the_link(make_host) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    with pytest.raises(PcieUnsupportedRequest, match="link is down"):
        host.bridge.dma_read(0x200000, 4)


@pytest.mark.parametrize(("value", "index"), [(2, 0), (0x101, 0), (1, 1)])
def test_malformed_power_requests_stall(make_host, value: int, index: int) -> None:  # type: ignore[no-untyped-def]
    host = make_host()
    with pytest.raises(UsbStall, match="0xF3"):
        host.out(0xF3, value, index)
    assert not host.bridge.link.powered
