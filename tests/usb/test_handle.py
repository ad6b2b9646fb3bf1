"""The seam protocols are exactly usb1's API: same method names, parameter names and defaults."""

from __future__ import annotations

import inspect
from types import ModuleType

import pytest
import usb1

from tinyhil.usb import EventPump, UsbHandle, UsbSyncIO, UsbTransfer

PROTOCOL2USB1 = [(UsbTransfer, usb1.USBTransfer), (UsbHandle, usb1.USBDeviceHandle), (EventPump, usb1.USBContext)]


def _members(protocol: type) -> list[str]:
    return sorted(n for n, v in vars(protocol).items() if inspect.isfunction(v) and not n.startswith("_"))


def _shape(function: object) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(function).parameters.values()]  # type: ignore[arg-type]


def _cases() -> list[tuple[type, type, str]]:
    cases = []
    for protocol, real in PROTOCOL2USB1:
        for name in _members(protocol) + (_members(UsbSyncIO) if protocol is UsbHandle else []):
            # usb1.USBDeviceHandle.close is rebound per instance to a finalizer taking no arguments: checked below.
            if not (real is usb1.USBDeviceHandle and name == "close"):
                cases.append((protocol, real, name))
    return cases


@pytest.mark.parametrize(("protocol", "real", "name"), _cases(), ids=lambda x: getattr(x, "__name__", str(x)))
def test_protocol_methods_have_usb1s_signatures(protocol: type, real: type, name: str) -> None:
    assert hasattr(real, name), f"usb1.{real.__name__} has no {name}"
    assert _shape(getattr(protocol, name)) == _shape(getattr(real, name))


def test_usb1_handles_close_takes_no_caller_arguments() -> None:
    # The instance attribute is a weakref.finalize, called as handle.close(); the class attribute documents it.
    assert "close" in vars(usb1.USBDeviceHandle) and _shape(UsbHandle.close) == [("self", inspect.Parameter.empty)]


def test_protocols_stay_small() -> None:
    for protocol in (UsbTransfer, UsbSyncIO, UsbHandle, EventPump):
        assert len(_members(protocol)) <= 8, protocol


def test_the_scripted_stand_in_satisfies_the_seam(usb_fake: ModuleType) -> None:
    handle = usb_fake.ScriptedHandle()
    assert isinstance(handle, UsbHandle) and isinstance(handle, UsbSyncIO)
    assert isinstance(handle.getTransfer(), UsbTransfer)
    assert isinstance(usb_fake.ScriptedContext(handle), EventPump)
    for protocol, fake in ((UsbTransfer, usb_fake.ScriptedTransfer), (UsbHandle, usb_fake.ScriptedHandle)):
        for name in _members(protocol):
            assert _shape(getattr(protocol, name)) == _shape(getattr(fake, name)), name


def test_a_non_handle_is_not_mistaken_for_one() -> None:
    assert not isinstance(object(), UsbHandle)
    assert not isinstance(usb1.USBContext(), UsbHandle)  # unopened, and a context, not a handle
