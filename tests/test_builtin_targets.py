"""The core's targets: NULL and the compile-only NULL targets, as the registry and `tinyhil targets` show them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tinyhil import InvalidArgument, TargetUnavailable, default_registry
from tinyhil.cli import main
from tinyhil.qemu.toolchains import qcomcl_unavailable_reason, qemucc_unavailable_reason

COMPILE_ONLY = {"compile", "compile-only", "qemu-compiler", "null", "copyin", "exec", "timestamps"}


@pytest.fixture(autouse=True)
def unconfigured_qcomcl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TINYHIL_QCOMCL_ROOTFS", raising=False)


def test_tinyhil_targets_lists_both_compile_only_targets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["targets", "--json"]) == 0
    rows = {row["target"]: row for row in json.loads(capsys.readouterr().out)}
    qemucc, qcomcl = rows["NULL:QEMUCC:aarch64"], rows["NULL:QCOMCL:a630"]
    assert set(qemucc["capabilities"]) >= COMPILE_ONLY and set(qcomcl["capabilities"]) >= COMPILE_ONLY
    assert qemucc["emulated"] and qcomcl["emulated"], "neither needs hardware"
    expected = qemucc_unavailable_reason("aarch64")
    assert (qemucc["available"], qemucc["reason"]) == (expected is None, expected)
    assert qcomcl["available"] is False
    assert qcomcl["reason"] == qcomcl_unavailable_reason() and qcomcl["reason"].startswith("not configured: set")


def test_renderer_tokens_resolve_to_the_compile_only_targets() -> None:
    registry = default_registry()
    assert registry.resolve("NULL:QEMUCC").name == "NULL:QEMUCC:aarch64"
    assert registry.resolve("NULL:QEMUCC:aarch64").definition.name == "NULL:QEMUCC:aarch64"
    assert registry.resolve("NULL:QCOMCL:a630").renderer == "QCOMCL"
    assert registry.resolve("NULL").definition.name == "NULL"
    with pytest.raises(InvalidArgument, match=r"known renderers: .*QCOMCL.*QEMUCC"):
        registry.resolve("NULL:NOPE")


def test_usb_amd_is_the_usb_runtime_and_reports_the_missing_bridge_precisely(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyhil import builtin_targets
    from tinyhil.usb import BridgeUnavailable

    resolved = default_registry().resolve("USB+AMD")
    assert not resolved.emulated and "real-hardware" in resolved.capabilities
    assert "exec" not in resolved.capabilities, "host-native code objects run only on the emulated GPU"

    def no_board(serial: str | None = None) -> None:
        raise BridgeUnavailable("no ASM2464 bridge found (looked for ADD1:0001, 3801:0001)")

    monkeypatch.setattr(builtin_targets, "open_usb3", no_board)
    with pytest.raises(TargetUnavailable, match="no ASM2464 bridge found") as info:
        builtin_targets.amd_usb.opener(resolved, resolved.build_options({}))  # what open() runs after the probe
    assert info.value.target == "USB+AMD"


class OneBridge:
    """An unopened ``usb1.USBContext`` stand-in that lists one ADD1:0001 bridge (probing opens no device)."""

    class Device:
        closed = False

        def getVendorID(self) -> int:
            return 0xADD1

        def getProductID(self) -> int:
            return 0x0001

        def getBusNumber(self) -> int:
            return 2

        def getDeviceAddress(self) -> int:
            return 7

        def close(self) -> None:
            self.closed = True

    def __init__(self) -> None:
        self.device = self.Device()

    def open(self) -> OneBridge:
        return self

    def close(self) -> None:
        pass

    def getDeviceIterator(self, skip_on_error: bool = False) -> Iterator[Device]:
        return iter([self.device])


class Files:
    """A firmware source double holding ``names``."""

    def __init__(self, *names: str) -> None:
        self.names = set(names)

    def __repr__(self) -> str:
        return f"<Files: {len(self.names)} of them>"

    def available(self, name: str) -> bool:
        return name in self.names

    def load(self, name: str) -> bytes:
        raise AssertionError("the probe only asks whether a file is there")


def test_usb_amd_with_a_bridge_is_available_exactly_when_the_firmware_files_are_there() -> None:
    from tinyhil import builtin_targets
    from tinyhil.amdgpu.firmware import FirmwareSource
    from tinyhil.spec.amdgpu_firmware import FIRMWARE_PACKAGE, GFX1100_FIRMWARE

    everything, no_rlc = Files(*GFX1100_FIRMWARE), Files(*GFX1100_FIRMWARE[:-1])
    assert isinstance(everything, FirmwareSource)
    assert builtin_targets.usb_probe(context=OneBridge(), firmware=everything) is None
    reason = builtin_targets.usb_probe(context=OneBridge(), firmware=no_rlc)
    assert reason == builtin_targets.usb_firmware_reason(no_rlc)
    assert reason is not None and reason.startswith("an ASM2464 bridge is attached, but the gfx1100 firmware")
    assert "gc_11_0_0_rlc.bin" in reason and "gc_11_0_0_mec.bin" not in reason and FIRMWARE_PACKAGE in reason
    assert builtin_targets.usb_probe(context=OneBridge()) == builtin_targets.usb_firmware_reason()  # default files


@pytest.mark.parametrize(
    ("text", "options", "match"),
    [("NULL", {"allow_copyout": "yes"}, "option allow_copyout='yes', expected True or False"),
     ("USB+AMD", {"revision": "fast"}, "option revision='fast', expected one of 'naive', 'sentinel-sector'"),
     ("USB+AMD", {"serial": 7}, "option serial=7, expected None or a bridge's USB serial string"),
     ("USB+AMD", {"wait_timeout_ms": 0}, "wait_timeout_ms=0")],
)  # fmt: skip
def test_option_values_are_checked_before_the_probe_runs(text: str, options: dict[str, object], match: str) -> None:
    """A bad value is the caller's error on every machine, with or without the hardware."""
    with pytest.raises(InvalidArgument, match=match):
        default_registry().resolve(text).open(**options)


def test_options_objects_carry_the_defaults_and_normalise_enum_values() -> None:
    from tinyhil.builtin_targets import NullOptions, UsbAmdOptions

    resolved = default_registry().resolve("USB+AMD")
    assert resolved.build_options({}) == UsbAmdOptions(serial=None, revision="pipelined", wait_timeout_ms=30_000)
    assert default_registry().resolve("NULL").build_options({"allow_copyout": True}) == NullOptions(True)
    assert [d.options for d in default_registry().definitions() if d.name == "KFD+AMD"] == [()]
