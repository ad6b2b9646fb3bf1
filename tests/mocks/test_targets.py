"""MOCKUSB+AMD: the USB device runtime over MockUSB3, its capabilities and its one arch, and the bridge-level
factory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyhil import InvalidArgument, default_registry, open_target
from tinyhil.amdgpu.firmware import FirmwareMissing, GeneratedFirmware
from tinyhil.asm2464 import Asm2464Controller, pcie_bringup
from tinyhil.emulators.asm2464 import Quirks
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.mocks.targets import (
    AMD_ARCHS,
    GFX_TARGET_VERSIONS,
    MOCKUSB_ARCHS,
    MOCKUSB_BRIDGE_CAPABILITIES,
    MOCKUSB_CAPABILITIES,
    MockUsbOptions,
    open_mock_usb3,
)
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.amdgpu_firmware import GFX1100_FIRMWARE
from tinyhil.usbgpu import UsbAmdDevice


def test_mockusb_is_available_with_the_bridge_and_runtime_capabilities() -> None:
    resolved = default_registry().resolve("MOCKUSB+AMD")
    assert resolved.capabilities == set(MOCKUSB_CAPABILITIES) >= set(MOCKUSB_BRIDGE_CAPABILITIES)
    assert resolved.emulated and resolved.unavailable_reason() is None
    assert "MOCKUSB+AMD" in {t.name for t in default_registry().select(["all"])}


def test_the_one_arch_is_the_gfx1100_the_bring_up_finds() -> None:
    assert default_registry().resolve("MOCKUSB+AMD").definition.archs == MOCKUSB_ARCHS == ("gfx1100",)
    with open_target("MOCKUSB+AMD:CC:gfx1100") as device:
        assert isinstance(device, UsbAmdDevice)
        assert device.capabilities == set(MOCKUSB_CAPABILITIES)
        assert device.transport.gpu.gfx_target_version == GFX_TARGET_VERSIONS["gfx1100"] == 110000
        assert (device.gpu.topology.vendor_id, device.gpu.topology.device_id) == (0x1002, 0x744C)


@pytest.mark.parametrize("arch", sorted(set(AMD_ARCHS) - set(MOCKUSB_ARCHS)))
def test_an_arch_whose_interface_is_not_modelled_is_the_registry_s_unknown_arch(arch: str) -> None:
    with pytest.raises(InvalidArgument, match=rf"unknown arch '{arch}' for MOCKUSB\+AMD; known archs: gfx1100$"):
        default_registry().resolve(f"MOCKUSB+AMD:CC:{arch}")
    assert default_registry().resolve(f"MOCKKFD+AMD:CC:{arch}").arch == arch, "MOCKKFD+AMD keeps it"


def test_options_reach_the_board_and_the_copy_protocol() -> None:
    quirks = Quirks(landing_delay_ns=1000)
    with open_target("MOCKUSB+AMD", mode="timed", quirks=quirks, revision="sentinel-sector") as device:
        assert device.transport.mode.value == "timed" and device.transport.bridge.quirks is quirks
        assert device.copier.revision.value == "sentinel-sector"
        buffer = device.alloc(3000)
        device.copyin(buffer, bytes(range(256)) * 11 + b"x" * 184)
        assert bytes(device.copyout(buffer)) == bytes(range(256)) * 11 + b"x" * 184


@pytest.mark.parametrize("given", ["MOCKUSB+AMD", "MOCKUSB+AMD:LLVM:gfx1100", "resolved"])
def test_open_mock_usb3_gives_a_working_bridge(given: str) -> None:
    target = default_registry().resolve("MOCKUSB+AMD") if given == "resolved" else given
    with open_mock_usb3(target, vram_bytes=64 << 20, quirks=Quirks()) as usb:  # gfx1100's smallest board
        assert isinstance(usb, MockUSB3)
        assert usb.gpu.gfx_target_version == 110000 and usb.gpu.vram_bytes == 64 << 20
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
     ({"vram_bytes": 0}, "vram_bytes=0"),
     ({"interface": "bar5"}, "unknown option 'interface'"),
     ({"firmware": "/no/such/dir"}, "firmware='/no/such/dir', expected 'generated' or an existing directory"),
     ({"firmware": 3}, "firmware=3, expected 'generated' or a directory path")],
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


def test_the_firmware_option_boots_the_board_with_the_files_it_names(tmp_path: Path) -> None:
    """``firmware=DIR`` is the boot a board gets: the driver uploads the files found there. A directory holding the
    generated files (written out like the real ones) boots; one that lacks a file fails naming the file."""
    for name in GFX1100_FIRMWARE:
        (tmp_path / name).write_bytes(GeneratedFirmware().load(name))
    with open_target("MOCKUSB+AMD", firmware=str(tmp_path)) as device:
        assert isinstance(device, UsbAmdDevice)
        assert repr(device.gpu.boot.firmware) == f"<DirectoryFirmware {tmp_path}>"
        buffer = device.alloc(1 << 16)
        data = bytes(range(256)) * 256
        device.copyin(buffer, data)
        assert bytes(device.copyout(buffer)) == data
    (tmp_path / "gc_11_0_0_rlc.bin").unlink()
    with pytest.raises(FirmwareMissing, match=r"gc_11_0_0_rlc\.bin"):
        open_target("MOCKUSB+AMD", firmware=str(tmp_path))
