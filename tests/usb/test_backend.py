"""The real usb1 backend: precise reasons for a missing libusb and a missing board, discovery by VID:PID and serial,
the product check, the configuration/claim sequence, the USB+AMD probe, and enumeration of a fake ADD1:0001 board
through the real libusb under umockdev."""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import usb1
from support.registries import registry_of

from tinyhil import builtin_targets
from tinyhil.usb import NO_BRIDGE_REASON, BridgeInfo, BridgeUnavailable, list_bridges, open_usb3, probe_usb3


def _libusb_missing() -> OSError:
    """The OSError usb1 raises when it cannot load libusb (usb1/_libusb1.py, __getLibrary)."""
    return OSError(errno.ENOENT, "cannot find a suitable libusb-1.0", ["libusb-1.0.so.0", "libusb-1.0.so"])


def test_the_no_board_reason_is_exactly_the_spec_text() -> None:
    assert NO_BRIDGE_REASON == "no ASM2464 bridge found (looked for ADD1:0001, 3801:0001)"


class MissingLibusbContext:
    """Behaves like usb1.USBContext on a machine without libusb: open() raises usb1's OSError."""

    closed = False

    def open(self) -> None:
        raise _libusb_missing()

    def close(self) -> None:
        self.closed = True


def test_missing_libusb_is_reported_precisely_everywhere() -> None:
    expected = "libusb-1.0 not found: [Errno 2] cannot find a suitable libusb-1.0: ['libusb-1.0.so.0', 'libusb-1.0.so']"
    with pytest.raises(BridgeUnavailable) as raised:
        open_usb3(context=MissingLibusbContext())
    assert (
        str(raised.value)
        == f"{expected}; install the system package libusb-1.0-0 (Debian, Ubuntu) or libusb (Homebrew)"
    )
    assert raised.value.reason == str(raised.value)
    assert isinstance(raised.value.__cause__, OSError)
    assert probe_usb3(context=MissingLibusbContext()) == raised.value.reason
    assert builtin_targets.usb_probe(context=MissingLibusbContext()) == raised.value.reason


def test_missing_libusb_through_the_real_usb1_context(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_library(libusb: object = None) -> bool:
        raise _libusb_missing()

    monkeypatch.setattr(usb1, "loadLibrary", no_library)  # what usb1.USBContext.open() calls first
    reason = probe_usb3()
    assert reason is not None and reason.startswith("libusb-1.0 not found: [Errno 2] cannot find a suitable libusb")
    assert registry_of(builtin_targets.amd_usb).resolve("USB+AMD").unavailable_reason() == reason


def _real_libusb_or_skip() -> None:
    try:
        with usb1.USBContext():
            pass
    except OSError as exc:
        pytest.skip(f"the system libusb-1.0 is not loadable here (Debian package libusb-1.0-0): {exc}")


def test_no_board_through_the_real_libusb() -> None:
    _real_libusb_or_skip()
    if list_bridges():
        pytest.skip(f"an ASM2464 bridge is attached ({list_bridges()}): this test needs none")
    assert probe_usb3() == NO_BRIDGE_REASON
    with pytest.raises(BridgeUnavailable) as raised:
        open_usb3()
    assert str(raised.value) == NO_BRIDGE_REASON
    assert registry_of(builtin_targets.amd_usb).resolve("USB+AMD").unavailable_reason() == NO_BRIDGE_REASON


class FakeDevice:
    """usb1.USBDevice stand-in; ``open()`` gives a scripted handle with the usb1 string/config methods."""

    def __init__(self, fake: ModuleType, vid: int, pid: int, *, serial: Any = "S1", product: Any = "custom ASM2464"):
        self.fake, self.vid, self.pid, self.serial, self.product = fake, vid, pid, serial, product
        self.bus, self.address = 1, 5
        self.closed = False
        self.handle: Any = None
        self.open_error: BaseException | None = None

    def getVendorID(self) -> int:
        return self.vid

    def getProductID(self) -> int:
        return self.pid

    def getBusNumber(self) -> int:
        return self.bus

    def getDeviceAddress(self) -> int:
        return self.address

    def getSerialNumber(self) -> Any:
        if isinstance(self.serial, BaseException):
            raise self.serial
        return self.serial

    def open(self) -> Any:
        if self.open_error is not None:
            raise self.open_error
        device = self

        class OpenHandle(self.fake.ScriptedHandle):  # type: ignore[name-defined,misc]
            def getProduct(self) -> Any:
                return device.product

            def setConfiguration(self, configuration: int) -> None:
                self.events.append(("set_configuration", configuration))

            def setAutoDetachKernelDriver(self, enable: bool) -> None:
                self.events.append(("auto_detach", enable))

        self.handle = OpenHandle()
        return self.handle

    def close(self) -> None:
        self.closed = True


class FakeContext:
    """Unopened usb1.USBContext stand-in listing ``devices``."""

    def __init__(self, *devices: FakeDevice) -> None:
        self.devices = devices
        self.state = "new"

    def open(self) -> FakeContext:
        self.state = "open"
        return self

    def close(self) -> None:
        self.state = "closed"

    def getDeviceIterator(self, skip_on_error: bool = False) -> Any:
        assert self.state == "open" and skip_on_error
        return iter(self.devices)

    def handleEventsTimeout(self, tv: float = 0) -> None:
        pass


def test_open_selects_configuration_1_then_claims_interface_0(usb_fake: ModuleType) -> None:
    other = FakeDevice(usb_fake, 0x1D6B, 0x0003)
    board = FakeDevice(usb_fake, 0x3801, 0x0001, product="AS2462 bridge")
    context = FakeContext(other, board)
    transport = open_usb3(context=context)
    assert board.handle.events == [("auto_detach", True), ("set_configuration", 1), ("claim", 0)]
    assert other.closed and not board.closed
    transport.close()
    assert board.handle.closed and context.state == "closed"


def test_several_boards_need_a_serial_and_the_error_lists_them(usb_fake: ModuleType) -> None:
    boards = [
        FakeDevice(usb_fake, 0xADD1, 0x0001, serial="A"),
        FakeDevice(usb_fake, 0x3801, 0x0001, serial=usb1.USBErrorAccess(usb1.ERROR_ACCESS)),
    ]
    context = FakeContext(*boards)
    with pytest.raises(BridgeUnavailable) as raised:
        open_usb3(context=context)
    assert str(raised.value) == (
        "2 ASM2464 bridges attached (ADD1:0001 at bus 1 address 5 serial 'A', 3801:0001 at bus 1 address 5 serial "
        "<serial unreadable: LIBUSB_ERROR_ACCESS [-3]>); pass serial= to choose one"
    )
    assert context.state == "closed"
    transport = open_usb3("A", context=FakeContext(*boards))
    assert boards[0].handle is not None and boards[1].closed
    transport.close()
    with pytest.raises(BridgeUnavailable, match=r"no ASM2464 bridge with serial 'B' \(attached: ADD1:0001 .*'A'"):
        open_usb3("B", context=FakeContext(*boards))


@pytest.mark.parametrize("product", ["ASM2464 stock firmware", None, ""])
def test_a_board_without_the_custom_firmware_is_refused(usb_fake: ModuleType, product: Any) -> None:
    board = FakeDevice(usb_fake, 0xADD1, 0x0001, product=product)
    context = FakeContext(board)
    with pytest.raises(BridgeUnavailable, match=rf"reports product {product!r}, expected one starting with 'custom'"):
        open_usb3(context=context)
    assert board.handle.closed and context.state == "closed"
    assert ("claim", 0) not in board.handle.events


def test_device_errors_pass_through_and_close_the_context(usb_fake: ModuleType) -> None:
    board = FakeDevice(usb_fake, 0xADD1, 0x0001)
    board.open_error = usb1.USBErrorAccess(usb1.ERROR_ACCESS)
    context = FakeContext(board)
    with pytest.raises(usb1.USBErrorAccess):
        open_usb3(context=context)
    assert context.state == "closed"


def test_libusb_init_failure_is_its_own_reason() -> None:
    class Broken(FakeContext):
        def open(self) -> FakeContext:
            raise usb1.USBErrorOther(usb1.ERROR_OTHER)

    assert probe_usb3(context=Broken()) == "libusb-1.0 failed to initialise: LIBUSB_ERROR_OTHER [-99]"


def test_listing_opens_nothing_and_the_probe_finds_the_board(usb_fake: ModuleType) -> None:
    board = FakeDevice(usb_fake, 0xADD1, 0x0001)
    assert list_bridges(context=FakeContext(board)) == (BridgeInfo(0xADD1, 0x0001, 1, 5),)
    assert board.handle is None and board.closed
    assert probe_usb3(context=FakeContext(board)) is None
    # A bridge is attached: USB+AMD is available exactly when the gfx1100 firmware files are installed.
    assert builtin_targets.usb_probe(context=FakeContext(board)) == builtin_targets.usb_firmware_reason()
    assert builtin_targets.usb_probe(context=FakeContext()) == NO_BRIDGE_REASON


def test_an_emulated_stack_without_kernel_driver_detach_opens_too(usb_fake: ModuleType) -> None:
    board = FakeDevice(usb_fake, 0xADD1, 0x0001)
    original = board.open

    def open_without_detach() -> Any:
        handle = original()
        handle.setAutoDetachKernelDriver = None  # what getattr(..., None) sees on a handle lacking the method
        return handle

    board.open = open_without_detach  # type: ignore[method-assign]
    open_usb3(context=FakeContext(board)).close()
    assert board.handle.events[:2] == [("set_configuration", 1), ("claim", 0)]


def test_a_non_string_serial_is_refused() -> None:
    with pytest.raises(BridgeUnavailable, match="serial=5, expected a string"):
        open_usb3(5)  # type: ignore[arg-type]


# --- umockdev: a fake ADD1:0001 board enumerated by the real libusb through the real usb1 backend ---
def _descriptors() -> bytes:
    """Device + configuration descriptors of a USB 3 device with the bridge's interface 0 and bulk 0x02 / 0x81."""
    device = bytes([18, 1, 0x20, 0x03, 0, 0, 0, 9, 0xD1, 0xAD, 0x01, 0x00, 0x00, 0x01, 1, 2, 3, 1])
    interface = bytes([9, 4, 0, 0, 2, 0xFF, 0xFF, 0xFF, 0])
    endpoints = b"".join(bytes([7, 5, ep, 2, 0x00, 0x04, 0, 6, 0x30, 15, 0, 0, 0]) for ep in (0x02, 0x81))
    config = bytes([9, 2, 9 + len(interface) + len(endpoints), 0, 1, 1, 0, 0x80, 0x32])
    return device + config + interface + endpoints


def _umockdev_board(serial: str, devnum: int) -> str:
    return f"""P: /devices/pci0000:00/0000:00:14.0/usb2/2-{devnum}
N: bus/usb/002/{devnum:03d}
E: BUSNUM=002
E: DEVNAME=/dev/bus/usb/002/{devnum:03d}
E: DEVNUM={devnum:03d}
E: DEVTYPE=usb_device
E: DRIVER=usb
E: PRODUCT=add1/1/100
E: SUBSYSTEM=usb
A: busnum=2
A: devnum={devnum}
A: idProduct=0001
A: idVendor=add1
A: product=custom ASM2464 (umockdev)
A: serial={serial}
A: speed=5000
H: descriptors={_descriptors().hex()}

"""


_UMOCKDEV_SCRIPT = """
import json
import usb1
from tinyhil import builtin_targets
from tinyhil.usb import list_bridges, open_usb3
out = {"bridges": [str(b) for b in list_bridges()], "probe": builtin_targets.usb_probe()}
try:
    open_usb3()
except Exception as exc:
    out["open"] = [type(exc).__name__, isinstance(exc, usb1.USBError), str(exc)]
print(json.dumps(out))
"""


@pytest.mark.parametrize("boards", [1, 2])
def test_real_backend_enumerates_a_fake_board_under_umockdev(tmp_path: Path, boards: int) -> None:
    tool = shutil.which("umockdev-run")
    if tool is None:
        pytest.skip("umockdev-run not found on PATH (Debian/Ubuntu package: umockdev)")
    _real_libusb_or_skip()
    description = tmp_path / "bridge.umockdev"
    description.write_text("".join(_umockdev_board(f"UMOCK{n}", 3 + n) for n in range(boards)))
    result = subprocess.run(
        [tool, "-d", str(description), "--", sys.executable, "-c", _UMOCKDEV_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(out["bridges"]) == [f"ADD1:0001 at bus 2 address {3 + n}" for n in range(boards)]
    # Bridges are attached, so the probe gets past libusb and discovery, to the firmware files.
    assert out["probe"] == builtin_targets.usb_firmware_reason()
    kind, is_usb1_error, message = out["open"]
    if boards == 1:
        # umockdev replays no usbdevfs traffic here: reading the product string fails, and the usb1 error passes through
        assert is_usb1_error and kind.startswith("USBError"), out
    else:
        assert kind == "BridgeUnavailable" and message.startswith("2 ASM2464 bridges attached (ADD1:0001 at bus 2")
        assert message.endswith("; pass serial= to choose one")
