"""MOCKUSB+AMD at the bridge level: honest capabilities, a precise reason for the missing device runtime, the
transport factory, and the portable suite's ``all`` selection leaving it out instead of failing on it."""

from __future__ import annotations

import pytest

from tinyhil import InvalidArgument, TargetUnavailable, default_registry
from tinyhil.asm24 import Asm24Controller, pcie_bringup
from tinyhil.emulators.asm2464 import Quirks
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.mocks.targets import MOCKUSB_BRIDGE_CAPABILITIES, open_mock_usb3
from tinyhil.mocks.usb3 import MockUSB3


def test_mockusb_claims_the_bridge_capabilities_and_no_runtime_one() -> None:
    resolved = default_registry().resolve("MOCKUSB+AMD")
    assert resolved.capabilities == {"usb3", "sram-windows", "pcie"} == set(MOCKUSB_BRIDGE_CAPABILITIES)
    assert resolved.emulated


def test_opening_the_device_runtime_says_precisely_what_is_missing_and_where_the_bridge_is() -> None:
    resolved = default_registry().resolve("MOCKUSB+AMD")
    reason = resolved.unavailable_reason()
    assert reason is not None and "device runtime" in reason and "issue 5" in reason and "open_mock_usb3" in reason
    with pytest.raises(TargetUnavailable, match="issue 5") as info:
        resolved.open()
    assert info.value.target == "MOCKUSB+AMD"


def test_all_and_emulated_leave_it_out_of_the_portable_suite_but_naming_it_keeps_it_visible() -> None:
    registry = default_registry()
    assert "MOCKUSB+AMD" not in {t.name for t in registry.select(["all"])}
    assert "MOCKUSB+AMD" not in {t.name for t in registry.select(["emulated"])}
    assert [t.name for t in registry.select(["MOCKUSB+AMD"])] == ["MOCKUSB+AMD"]


@pytest.mark.parametrize("given", ["MOCKUSB+AMD", "MOCKUSB+AMD:LLVM:gfx950", "resolved"])
def test_open_mock_usb3_gives_a_working_bridge(given: str) -> None:
    target = default_registry().resolve("MOCKUSB+AMD") if given == "resolved" else given
    with open_mock_usb3(target, function=PlainEndpoint(vram_bytes=1 << 20), quirks=Quirks()) as usb:
        assert isinstance(usb, MockUSB3)
        controller = Asm24Controller(usb, retry_delay_s=0)
        controller.xdata_write(0x5000, b"ok")
        assert controller.xdata_read(0x5000, 2) == b"ok"
        assert pcie_bringup(controller).vendor_id == 0x1002


@pytest.mark.parametrize("given", ["NULL", 42])
def test_open_mock_usb3_refuses_other_targets(given: object) -> None:
    with pytest.raises(InvalidArgument, match="expected MOCKUSB\\+AMD"):
        open_mock_usb3(given)  # type: ignore[arg-type]
