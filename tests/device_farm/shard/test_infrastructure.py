"""The infrastructure-failure rule: board lost, lease timeout, killed workers; everything else is the test's."""

from __future__ import annotations

import errno

import pytest
import usb1

from tinyhil.device_farm.leases import LeaseTimeout
from tinyhil.device_farm.shard.infrastructure import infrastructure_cause, killed_cause
from tinyhil.errors import DeviceError
from tinyhil.usb.errors import BridgeUnavailable


def _raised_from(cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise DeviceError("copyin failed") from inner
    except DeviceError as outer:
        return outer


@pytest.mark.parametrize(
    ("exc", "cause"),
    [
        (usb1.USBErrorNoDevice(usb1.ERROR_NO_DEVICE), "board lost: USBErrorNoDevice"),
        (OSError(errno.ENODEV, "No such device"), "board lost: ENODEV"),
        (BridgeUnavailable("no ASM2464 bridge found"), "board lost: BridgeUnavailable"),
        (_raised_from(usb1.USBErrorNoDevice(usb1.ERROR_NO_DEVICE)), "board lost: USBErrorNoDevice"),
        (LeaseTimeout("b", 5.0, [None]), "lease timeout: board 'b': no lease within 5 s, held by holders unknown"),
        (AssertionError("wrong bytes"), None),
        (DeviceError("SDMA fault"), None),
        (OSError(errno.EINVAL, "bad"), None),
        (usb1.USBErrorPipe(usb1.ERROR_PIPE), None),
    ],
)
def test_infrastructure_failures_are_told_from_test_failures(exc: BaseException, cause: str | None) -> None:
    assert infrastructure_cause(exc) == cause


def test_a_signal_death_is_an_infrastructure_cause_and_an_exit_status_is_not() -> None:
    assert killed_cause(-9) == "worker killed by SIGKILL"
    assert killed_cause(-200) == "worker killed by signal 200"
    assert killed_cause(0) is None and killed_cause(1) is None
