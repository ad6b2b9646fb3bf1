"""MOCKUSB+AMD: the USB device runtime over MockUSB3, its capabilities and arch, and the bridge-level factory."""

from __future__ import annotations

import pytest

from tinyhil import InvalidArgument, default_registry, open_target
from tinyhil.asm2464 import Asm2464Controller, pcie_bringup
from tinyhil.emulators.asm2464 import Quirks
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.mocks.targets import (
    GFX_TARGET_VERSIONS,
    MOCKUSB_BRIDGE_CAPABILITIES,
    MOCKUSB_CAPABILITIES,
    MockUsbOptions,
    open_mock_usb3,
)
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.usbgpu import UsbAmdDevice


def test_mockusb_is_available_with_the_bridge_and_runtime_capabilities() -> None:
    resolved = default_registry().resolve("MOCKUSB+AMD")
    assert resolved.capabilities == set(MOCKUSB_CAPABILITIES) >= set(MOCKUSB_BRIDGE_CAPABILITIES)
    assert resolved.emulated and resolved.unavailable_reason() is None
    assert "MOCKUSB+AMD" in {t.name for t in default_registry().select(["all"])}


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx950"])
def test_the_arch_selects_the_emulated_gpu_the_bring_up_finds(arch: str) -> None:
    with open_target(f"MOCKUSB+AMD:CC:{arch}") as device:
        assert isinstance(device, UsbAmdDevice)
        assert device.capabilities == set(MOCKUSB_CAPABILITIES)
        assert device.transport.gpu.gfx_target_version == GFX_TARGET_VERSIONS[arch]
        assert device.gpu.topology.vendor_id == 0x1002


def test_options_reach_the_board_and_the_copy_protocol() -> None:
    quirks = Quirks(landing_delay_ns=1000)
    with open_target("MOCKUSB+AMD", mode="timed", quirks=quirks, revision="sentinel-sector") as device:
        assert device.transport.mode.value == "timed" and device.transport.bridge.quirks is quirks
        assert device.copier.revision.value == "sentinel-sector"
        buffer = device.alloc(3000)
        device.copyin(buffer, bytes(range(256)) * 11 + b"x" * 184)
        assert bytes(device.copyout(buffer)) == bytes(range(256)) * 11 + b"x" * 184


@pytest.mark.parametrize("given", ["MOCKUSB+AMD", "MOCKUSB+AMD:LLVM:gfx950", "resolved"])
def test_open_mock_usb3_gives_a_working_bridge(given: str) -> None:
    target = default_registry().resolve("MOCKUSB+AMD") if given == "resolved" else given
    arch = "gfx950" if given.endswith("gfx950") else "gfx1100"
    with open_mock_usb3(target, vram_bytes=64 << 20, quirks=Quirks()) as usb:  # gfx1100's smallest board
        assert isinstance(usb, MockUSB3)
        assert usb.gpu.gfx_target_version == GFX_TARGET_VERSIONS[arch] and usb.gpu.vram_bytes == 64 << 20
        controller = Asm2464Controller(usb, retry_delay_s=0)
        controller.xdata_write(0x5000, b"ok")
        assert controller.xdata_read(0x5000, 2) == b"ok"
        assert pcie_bringup(controller).vendor_id == 0x1002


def test_open_mock_usb3_builds_a_fresh_board_and_names_the_parts_form_for_parts() -> None:
    with pytest.raises(InvalidArgument, match=r"MockUSB3\(function=...\): a fresh board takes no parts.*MockUSB3.over"):
        open_mock_usb3("MOCKUSB+AMD", function=PlainEndpoint(vram_bytes=1 << 20))


@pytest.mark.parametrize(
    ("options", "match"),
    [({"mode": "fast"}, "option mode='fast', expected one of 'sync', 'timed'"),
     ({"revision": "naïve"}, "option revision='naïve', expected one of 'naive', 'sentinel-sector', 'pipelined'"),
     ({"faults": "stall"}, "option faults='stall', expected None or a FaultPlan"),
     ({"seed": "3"}, "seed"),
     ({"vram_bytes": 0}, "vram_bytes=0")],
)  # fmt: skip
def test_bad_option_values_are_named_before_a_board_is_built(options: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        open_target("MOCKUSB+AMD", **options)


@pytest.mark.parametrize("given", ["NULL", 42])
def test_open_mock_usb3_refuses_other_targets(given: object) -> None:
    with pytest.raises(InvalidArgument, match="expected MOCKUSB\\+AMD"):
        open_mock_usb3(given)  # type: ignore[arg-type]


def test_a_misspelt_option_names_the_closest_and_every_valid_one() -> None:
    with pytest.raises(InvalidArgument) as raised:
        open_target("MOCKUSB+AMD", revisoin="naive")
    message = str(raised.value)
    assert "unknown option 'revisoin' (did you mean 'revision'?) for MOCKUSB+AMD" in message
    valid = sorted(MockUsbOptions.__dataclass_fields__)
    assert {"faults", "mode", "quirks", "revision", "seed", "timing", "vram_bytes"} <= set(valid)
    assert message.endswith(f"valid options: {', '.join(valid)}")
